"""Rules files: every example loads; every mistake names file, line and reason."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from proxy.support.yaml_source import ConfigError
from routing_rules.loader import BUILTIN_RULES, load_rules_file
from tests.support.paths import REPO

# Rules files; ``*.cases.yaml`` beside them are their unit tests (test_examples.py).
EXAMPLES = sorted(
    p
    for p in (REPO / "routing_rules" / "examples").glob("*.yaml")
    if not p.name.endswith(".cases.yaml")
)


def test_there_are_examples_for_the_documented_cases():
    names = {p.stem for p in EXAMPLES}
    assert {
        "per-team-topics",
        "drop-running",
        "redact-sql",
        "archive-everything",
        "namespace-alignment",
        "spark-to-marquez",
    } <= names


@pytest.mark.parametrize("path", [*EXAMPLES, BUILTIN_RULES], ids=lambda p: Path(p).name)
def test_example_and_default_files_keep_refused_events(path: Path):
    """A copied example must not start dropping what fails validation."""
    assert load_rules_file(path).rejected is not None


@pytest.mark.parametrize("path", [*EXAMPLES, BUILTIN_RULES], ids=lambda p: Path(p).name)
def test_example_and_default_files_load(path: Path):
    rules = load_rules_file(path)
    assert rules.version == 1
    assert rules.default.to or rules.default.drop


def test_builtin_default_routes_everything_to_kafka_and_the_archive():
    rules = load_rules_file(BUILTIN_RULES)
    assert rules.rules == []
    assert rules.default.to == ["kafka", "archive"]
    assert rules.destinations["kafka"].kind == "kafka"
    assert rules.destinations["archive"].kind == "archive"


def error(text: str) -> str:
    with pytest.raises(ConfigError) as caught:
        load_rules_file("team.yaml", textwrap.dedent(text).lstrip())
    return str(caught.value)


BASE = """
version: 1
destinations:
  a: {kind: kafka}
"""


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "rules:\n  - to: [a]\n    matchh: {}\ndefault: {to: [a]}\n",
            "team.yaml:6: rules.0.matchh: unknown key",
        ),
        (
            "rules:\n  - to: [b]\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0.to.0: unknown destination 'b' (a)",
        ),
        (
            "rules: []\ndefault: {to: [a, zz]}\n",
            "team.yaml:5: default.to.1: unknown destination 'zz' (a)",
        ),
        (
            "rules:\n  - match: {job_namespace: {regex: '('}}\n    to: [a]\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0.match.job_namespace",
        ),
        (
            "rules:\n  - to: [a]\n    drop: true\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0: Value error, drop: true cannot be combined",
        ),
        (
            "rules:\n  - match: {kind: run}\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0: Value error, a rule needs to:, drop: true or continue: true",
        ),
        (
            "rules:\n  - {name: x, to: [a]}\n  - {name: x, to: [a]}\ndefault: {to: [a]}\n",
            "team.yaml:6: rules.1.name: 'x' is also the name of rule 0",
        ),
        ("rules: []\n", "team.yaml:1: default: Field required"),
        (
            "rules:\n  - transform: [{redact: [a], add_tags: {x: y}}]\n    to: [a]\n"
            "default: {to: [a]}\n",
            "team.yaml:5: rules.0.transform.0: Value error, each transform step has exactly one",
        ),
        (
            "rules:\n  - transform:\n      - map_namespaces:\n          datasets:\n"
            "            - {from_regex: 'a(b)', to: '\\\\2'}\n    to: [a]\ndefault: {to: [a]}\n",
            "team.yaml:8: rules.0.transform.0.map_namespaces.datasets.0: Value error, to refers",
        ),
        (
            "rules:\n  - match: {event_type: [START, STOP]}\n    to: [a]\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0.match.event_type",
        ),
        (
            "rules:\n  - throttle: {interval_seconds: 0}\n    to: [a]\ndefault: {to: [a]}\n",
            "team.yaml:5: rules.0.throttle.interval_seconds: Input should be greater than 0",
        ),
        (
            "rules: []\ndefault: {to: [a]}\nrejected: {to: []}\n",
            "team.yaml:6: rejected.to: List should have at least 1 item",
        ),
    ],
)
def test_mistakes_name_file_line_and_reason(body: str, expected: str):
    assert expected in error(BASE + body)


def test_version_must_be_1():
    assert "team.yaml:1: version: Input should be 1" in error(
        "version: 2\ndestinations: {}\ndefault: {drop: true}\n"
    )


def test_destination_kind_and_keys_are_checked():
    message = error(
        """
        version: 1
        destinations:
          a: {kind: kafkaa}
          b:
            kind: kafka
            key: "{job.namespace"
          c: {kind: archive}
          d: {kind: kafka, producer: {acks: "1"}}
        default: {drop: true}
        """
    )
    assert "team.yaml:3: destinations.a: Input tag 'kafkaa' found using 'kind'" in message
    assert "team.yaml:6: destinations.b.key" in message
    assert "team.yaml:7: destinations.c.directory: Field required" in message
    assert "team.yaml:8: destinations.d: Value error, producer.acks='1'" in message


def test_unknown_key_strategy_is_explained():
    message = error(
        BASE.replace("{kind: kafka}", "{kind: kafka, key: partition}") + "default: {to: [a]}\n"
    )
    assert "unknown key strategy 'partition'" in message


def test_invalid_yaml_and_duplicate_keys_name_the_line():
    assert error("version: 1\nrules: [\n").startswith("team.yaml:3: invalid YAML")
    assert error("version: 1\nversion: 1\n") == "team.yaml:2: duplicate key 'version'"


def test_top_level_must_be_a_mapping():
    assert error("- a\n") == "team.yaml:1: a rules file is a mapping with version: 1"


def test_missing_file_is_a_clear_error(tmp_path: Path):
    with pytest.raises(ConfigError, match=r"nope\.yaml: cannot read"):
        load_rules_file(tmp_path / "nope.yaml")
