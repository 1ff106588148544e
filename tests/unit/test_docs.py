"""The docs cannot drift from the code: every config, rules and openlineage.yml snippet is
loaded by what loads the real file, every ``lineage-proxy`` command line is parsed by the
real CLI parser, and every command's ``--help`` has a description and an example.

A snippet says what it is by its title (```` ```yaml title="config.yaml" ````, the
Material theme shows it as a caption): ``config.yaml``, ``rules.yaml`` or ``openlineage.yml``.
A YAML snippet without a title must not look like one of them, so nothing escapes."""

from __future__ import annotations

import argparse
import inspect
import json
import re
import shlex
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from openlineage.client.transport import get_default_factory

from proxy.cli.main import build_parser
from proxy.config.settings import load_config
from routing_rules.loader import load_rules_file
from tests.support.cli import run_cli

REPO = Path(__file__).resolve().parents[2]
PAGES = [*sorted((REPO / "docs").rglob("*.md")), REPO / "README.md"]
_FENCE = re.compile(
    r"^(?P<indent> *)```(?P<info>[^\n`]*)\n(?P<body>.*?)^(?P=indent)```$", re.M | re.S
)
_TITLE = re.compile(r'title="(?P<title>[^"]+)"')
_CONFIG_SECTIONS = {"server", "kafka", "validation", "auth", "routing", "logging", "consumers"}


@dataclass(frozen=True)
class Snippet:
    page: Path
    line: int
    language: str
    title: str | None
    body: str

    def __str__(self) -> str:
        return f"{self.page.relative_to(REPO)}:{self.line}"


def _snippets(page: Path) -> Iterator[Snippet]:
    text = page.read_text()
    for match in _FENCE.finditer(text):
        info = match["info"].strip()
        title = _TITLE.search(info)
        indent = len(match["indent"])
        body = "\n".join(line[indent:] for line in match["body"].splitlines())
        yield Snippet(
            page=page,
            line=text.count("\n", 0, match.start()) + 1,
            language=info.split(" ", 1)[0],
            title=title["title"] if title else None,
            body=body,
        )


SNIPPETS = [snippet for page in PAGES for snippet in _snippets(page)]


def _of(language: str, title: str | None = None) -> list[Snippet]:
    return [s for s in SNIPPETS if s.language == language and (title is None or s.title == title)]


def test_the_docs_have_snippets_of_every_checked_kind():
    # Guards the finder itself: a fence pattern that matched nothing would pass every test.
    for title in (
        "config.yaml",
        "rules.yaml",
        "openlineage.yml",
        "my-values.yaml",
        "per-team-topics.cases.yaml",
    ):
        assert _of("yaml", title), title
    assert _TARGET_FRAGMENTS
    assert len(_AIRFLOW) >= 2  # the variable and airflow.cfg
    assert _cli_lines()


@pytest.mark.parametrize("snippet", _of("yaml", "config.yaml"), ids=str)
def test_config_snippets_load_as_config_yaml(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    # A secret named by its variable (``sasl.password_env: KAFKA_PASSWORD``) is read at
    # load: the operator has set it.
    for variable in re.findall(r"_env: *([A-Z][A-Z0-9_]*)", snippet.body):
        monkeypatch.setenv(variable, "set-by-the-operator")
    path = tmp_path / "config.yaml"
    path.write_text(snippet.body)
    load_config(path, environ={})  # raises ConfigError (file:line: reason) when wrong


_TARGET_FRAGMENTS = [
    s for s in _of("yaml") if s.title is None and set(yaml.safe_load(s.body) or ()) == {"target"}
]


@pytest.mark.parametrize("snippet", _TARGET_FRAGMENTS, ids=str)
def test_consumer_target_fragments_load_as_a_consumer(
    snippet: Snippet, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """A page that shows only a consumer's ``target:`` (one per store or server) shows one
    the config accepts."""
    for variable in re.findall(r"_env: *([A-Z][A-Z0-9_]*)", snippet.body):
        monkeypatch.setenv(variable, "set-by-the-operator")
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"consumers": {"shown": yaml.safe_load(snippet.body)}}))
    load_config(path, environ={})


@pytest.mark.parametrize("snippet", _of("yaml", "my-values.yaml"), ids=str)
def test_helm_values_snippets_pass_the_charts_schema_and_their_config_loads(
    snippet: Snippet, tmp_path: Path
):
    values = yaml.safe_load(snippet.body)
    schema = (REPO / "deploy" / "helm" / "lineage-proxy" / "values.schema.json").read_text()
    jsonschema.validate(values, yaml.safe_load(schema))
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump(values["config"]))
    load_config(path, environ={})


@pytest.mark.parametrize("snippet", _of("yaml", "per-team-topics.cases.yaml"), ids=str)
async def test_rules_cases_snippets_pass_rules_test_against_the_example_rules(
    snippet: Snippet, tmp_path: Path
):
    """The cases a page shows pass ``rules test --cases`` against the example rules file
    they are written for; an event named by file is the example's first inline event."""
    examples = REPO / "routing_rules" / "examples"
    shown = yaml.safe_load(snippet.body)["cases"]
    inline = yaml.safe_load((examples / "per-team-topics.cases.yaml").read_text())
    for case in shown:
        if isinstance(case["event"], str):
            event_file = tmp_path / case["event"]
            event_file.parent.mkdir(parents=True, exist_ok=True)
            event_file.write_text(json.dumps(inline["cases"][0]["event"]))
    cases = tmp_path / "cases.yaml"
    cases.write_text(snippet.body)
    code, out, err = await run_cli(
        "rules", "test", str(examples / "per-team-topics.yaml"), "--cases", str(cases)
    )
    assert code == 0, out + err
    assert out.count("PASS ") == len(shown), out


@pytest.mark.parametrize("snippet", _of("yaml", "rules.yaml"), ids=str)
def test_rules_snippets_pass_rules_check(snippet: Snippet, tmp_path: Path):
    path = tmp_path / "rules.yaml"
    path.write_text(snippet.body)
    load_rules_file(path)


@pytest.mark.parametrize("snippet", _of("yaml", "openlineage.yml"), ids=str)
def test_openlineage_yml_snippets_make_the_transport_they_show(snippet: Snippet):
    """openlineage-python builds the transport; every key is one its config knows (the
    client itself ignores unknown keys, so a typo would silently do nothing)."""
    _assert_client_makes(yaml.safe_load(snippet.body)["transport"], snippet)


def _assert_client_makes(config: dict[str, Any], snippet: Snippet) -> None:
    """openlineage-python builds the transport ``config`` describes, knowing every key."""
    transport = get_default_factory().create(config)
    for transport_config in [config, *config.get("transports", {}).values()]:
        made: Any = get_default_factory().create(transport_config)  # each kind has .config
        known = set(inspect.signature(type(made.config)).parameters) | {"type"}
        assert set(transport_config) <= known, f"{snippet}: unknown {set(transport_config) - known}"
    assert transport.kind == config["type"]
    if config.get("auth", {}).get("type") == "api_key":  # a misspelt key sends no token
        [token] = [v for k, v in config["auth"].items() if k != "type"]
        bearer = transport.config.auth.get_bearer()  # type: ignore[attr-defined]
        assert bearer == f"Bearer {token}", snippet


# The Airflow provider hands this JSON to openlineage-python's transport factory.
_AIRFLOW_TRANSPORT = re.compile(
    r"^(?:export AIRFLOW__OPENLINEAGE__TRANSPORT='(?P<env>.*)'|transport = (?P<ini>\{.*\}))$", re.M
)
_AIRFLOW = [
    (snippet, match["env"] or match["ini"])
    for snippet in SNIPPETS
    if snippet.language in ("bash", "ini")
    for match in _AIRFLOW_TRANSPORT.finditer(snippet.body)
]


@pytest.mark.parametrize(("snippet", "transport"), _AIRFLOW, ids=lambda v: str(v)[:40])
def test_airflow_transport_json_makes_the_transport_it_shows(snippet: Snippet, transport: str):
    _assert_client_makes(json.loads(transport), snippet)


@pytest.mark.parametrize("snippet", _of("yaml"), ids=str)
def test_untitled_yaml_snippets_parse_and_are_not_unchecked_configs(snippet: Snippet):
    data = yaml.safe_load(snippet.body)
    if snippet.title is None and isinstance(data, dict):
        assert not set(data) & _CONFIG_SECTIONS, f"{snippet}: title it config.yaml"
        assert not {"rules", "destinations"} & set(data), f"{snippet}: title it rules.yaml"
        assert "transport" not in data, f"{snippet}: title it openlineage.yml"


def _command_in(line: str) -> str | None:
    """The ``lineage-proxy …`` command on a shell line — where ``lineage-proxy`` is the
    command run (first word of the line or after ``|``, ``&&``, ``;``, ``$(``, ``<(``, past
    ``VAR=value`` words), not an argument of another command — up to its end; or None."""
    for part in re.split(r"\s*(?:\|\|?|&&|;|\$\(|<\()\s*", line.split(" #", 1)[0]):
        words = part.strip().split(" ")
        while words and re.fullmatch(r"[A-Z_][A-Z0-9_]*=\S*", words[0]):
            words = words[1:]
        if words and (words[0] == "lineage-proxy" or words[0].endswith("/lineage-proxy")):
            command = " ".join(["lineage-proxy", *words[1:]])
            command = re.split(r" (?:>|&)(?: |$)", command)[0].strip()
            return command[:-1] if command.endswith(")") and "(" not in command else command
    return None


def _cli_lines() -> list[tuple[Snippet, str]]:
    found = []
    for snippet in SNIPPETS:
        if snippet.language in ("bash", "sh", "console"):
            for line in snippet.body.replace("\\\n", " ").splitlines():
                if command := _command_in(line):
                    found.append((snippet, command))
    return found


def _parses(command: str) -> bool:
    try:
        build_parser().parse_args(shlex.split(command)[1:])
    except SystemExit as exc:  # --help exits 0 after printing
        return exc.code == 0
    return True


@pytest.mark.parametrize(("snippet", "command"), _cli_lines(), ids=lambda v: str(v)[:60])
def test_every_cli_example_is_accepted_by_the_parser(snippet: Snippet, command: str):
    assert _parses(command), f"{snippet}: `{command}` is refused by the CLI"


def _commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> Iterator[tuple[tuple[str, ...], argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


_COMMANDS = list(_commands(build_parser()))


@pytest.mark.parametrize(
    ("path", "parser"), _COMMANDS, ids=[" ".join(path) or "(top)" for path, _ in _COMMANDS]
)
def test_every_command_help_has_a_description_and_an_example(path, parser):
    help_text = parser.format_help()
    assert parser.description, f"lineage-proxy {' '.join(path)}: no description"
    examples = re.split(r"\nexamples?:\n", help_text, maxsplit=1)[1:]
    commands = [c for line in "".join(examples).splitlines() if (c := _command_in(line))]
    assert commands, f"lineage-proxy {' '.join(path)}: no example in\n{help_text}"
    for command in commands:
        assert _parses(command), f"the example `{command}` is refused by the CLI"
