"""``lineage-proxy rules check|test`` and ``config check``: files checked without starting
anything (exit 1 with file:line: reason when broken)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import orjson

from proxy.cli.common import (
    EXIT_INVALID,
    EXIT_OK,
    EXIT_USAGE,
    UsageError,
    config_from,
)
from proxy.config.settings import ConfigError, ProxyConfig, load_config

if TYPE_CHECKING:
    from routing_rules.dry_run import DryRun
    from routing_rules.schema import RulesFile


def _rules_path(args: argparse.Namespace) -> Path:
    from routing_rules.loader import BUILTIN_RULES

    if args.file is not None:
        return Path(args.file)
    config = config_from(args) if args.config else ProxyConfig()
    return config.routing.rules or BUILTIN_RULES


def _cmd_rules_check(args: argparse.Namespace) -> int:
    from routing_rules.loader import load_rules_file

    path = _rules_path(args)
    try:
        rules = load_rules_file(path)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    print(f"{path}: ok ({len(rules.rules)} rules, {len(rules.destinations)} destinations)")
    return EXIT_OK


def cmd_config_check(args: argparse.Namespace) -> int:
    """Everything ``serve`` and ``consume`` check before they start, without starting:
    the config, the rules file it names, each consumer's target (credentials from the
    environment included)."""
    from proxy.destinations.http.target import HttpTarget
    from routing_rules.loader import BUILTIN_RULES, load_rules_file

    try:
        config = load_config(args.config)
        rules_path = config.routing.rules or BUILTIN_RULES
        rules = load_rules_file(rules_path)
        for name, consumer in config.consumers.items():
            target = consumer.target
            if isinstance(target, HttpTarget) and target.auth is not None:
                try:
                    target.auth.header()  # a credential's environment variable is set
                except ValueError as exc:
                    where = f"{args.config}: consumers.{name}.target.auth"
                    raise ConfigError(f"{where}: {exc}") from None
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_INVALID
    consumers = ", ".join(config.consumers) or "none"
    print(
        f"{args.config}: ok (rules {rules_path}: {len(rules.rules)} rules, "
        f"{len(rules.destinations)} destinations; consumers: {consumers})"
    )
    return EXIT_OK


def _cmd_rules_test(args: argparse.Namespace) -> int:
    from proxy.validation import EventValidator
    from proxy.validation.repairs import EventRepairer
    from routing_rules.dry_run import DryRun
    from routing_rules.loader import load_rules_file

    try:
        rules = load_rules_file(args.file)
    except ConfigError as exc:
        print(exc)
        return EXIT_INVALID
    if (args.cases is None) == (not args.events):
        raise UsageError("give EVENT.json files or --cases FILE (not both)")
    config = config_from(args) if args.config else ProxyConfig()
    validator = EventValidator(
        strict=config.validation.is_strict, extra_schema_dir=config.validation.extra_schema_dir
    )
    repairer = EventRepairer(
        config.validation.enabled_repairs(), config.validation.naive_time_zones()
    )
    dry_run = DryRun(
        rules,
        validator,
        repairer,
        source=str(args.file),
        default_topic=config.kafka.topic,
        archive_root=config.routing.archive_root,
    )
    if args.cases is not None:
        return _run_rules_cases(dry_run, rules, args.cases)
    status = EXIT_OK
    for name in args.events:
        try:
            document = orjson.loads(Path(name).read_bytes())
        except (OSError, orjson.JSONDecodeError) as exc:
            print(f"{name}: cannot read an event: {exc}", file=sys.stderr)
            status = EXIT_INVALID
            continue
        for outcome in dry_run.outcomes(name, document):
            if outcome.invalid:
                status = EXIT_INVALID
            if args.json:
                print(orjson.dumps(outcome.as_json()).decode())
            else:
                print(outcome.as_text())
    return status


def _run_rules_cases(dry_run: DryRun, rules: RulesFile, path: Path) -> int:
    from routing_rules.cases import load_cases, run_cases

    try:
        cases = load_cases(path, rules)
    except ConfigError as exc:
        print(exc, file=sys.stderr)
        return EXIT_USAGE
    results = run_cases(dry_run, cases)
    for result in results:
        print(result.as_text())
    failed = sum(not result.passed for result in results)
    print(f"{path}: {len(results) - failed} passed, {failed} failed")
    return EXIT_INVALID if failed else EXIT_OK


def add_rules_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    rules = commands.add_parser("rules", help="check routing rules files and dry-run events")
    sub = rules.add_subparsers(dest="rules_command", required=True, metavar="COMMAND")
    check = sub.add_parser(
        "check", help="validate a rules file (exit 1 with file:line: reason if it is broken)"
    )
    check.add_argument(
        "file", nargs="?", metavar="FILE", help="rules file (default: routing.rules of --config)"
    )
    check.add_argument("--config", type=Path, help="config naming the rules file")
    check.set_defaults(func=_cmd_rules_check)
    test = sub.add_parser(
        "test",
        help="dry run: for each event, the rules that matched, transforms, destinations "
        "and the event as it would be sent",
    )
    test.add_argument("file", metavar="FILE", help="rules file")
    test.add_argument("events", nargs="*", metavar="EVENT.json", help="an event or a batch")
    test.add_argument(
        "--cases",
        type=Path,
        metavar="FILE",
        help="rules unit tests: YAML cases with expected destinations, fields, drops "
        "(exit 1 if one fails, 2 if the file is malformed)",
    )
    test.add_argument("--config", type=Path, help="config with validation settings")
    test.add_argument("--json", action="store_true", help="one JSON object per event")
    test.set_defaults(func=_cmd_rules_test)


def add_config_commands(commands: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    config_commands = commands.add_parser("config", help="check a config file without starting")
    config_sub = config_commands.add_subparsers(
        dest="config_command", required=True, metavar="COMMAND"
    )
    check = config_sub.add_parser(
        "check",
        help="validate config.yaml, its rules file and its consumers' targets "
        "(exit 1 with file:line: reason if broken)",
    )
    check.add_argument("--config", type=Path, required=True, help="config file to check")
    check.set_defaults(func=cmd_config_check)
