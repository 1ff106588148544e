"""``lineage-proxy schema`` and ``config-reference``: config.yaml and rules files described
for editors and the docs."""

from __future__ import annotations

import argparse
import sys

from proxy.cli.common import (
    EXIT_OK,
)


def _cmd_schema(args: argparse.Namespace) -> int:
    from proxy.config.reference import json_schema

    print(json_schema(args.document))
    return EXIT_OK


def _cmd_config_reference(args: argparse.Namespace) -> int:
    from proxy.config.reference import config_reference

    sys.stdout.write(config_reference())
    return EXIT_OK


def add_editor_commands(
    commands: argparse._SubParsersAction[argparse.ArgumentParser],
) -> None:
    schema = commands.add_parser(
        "schema",
        help="print the JSON Schema of config.yaml or of a rules file (for editors)",
    )
    schema.add_argument("document", choices=["config", "rules"])
    schema.set_defaults(func=_cmd_schema)
    reference = commands.add_parser(
        "config-reference",
        help="print the configuration reference (Markdown): every key, type, default",
    )
    reference.set_defaults(func=_cmd_config_reference)
