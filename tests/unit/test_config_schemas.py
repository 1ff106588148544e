"""The JSON Schemas of config.yaml and rules files, and the configuration reference, are
generated from the models: the committed copies are current, the shipped files validate,
and a misspelt key fails the schema as it fails the loader."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import jsonschema
import pytest
import yaml
from pydantic import ValidationError

from proxy.cli.main import main
from proxy.config.reference import SCHEMA_FILES, SCHEMAS, config_reference, json_schema
from tests.support.paths import REPO

REGENERATE = "stale: regenerate with scripts/config_docs.sh and commit the result"
CONFIG_FILES = [REPO / "config.yaml", REPO / "compose" / "config.yaml"]
RULES_FILES = [REPO / "routing_rules" / "default.yaml"] + [
    path
    for path in sorted((REPO / "routing_rules" / "examples").glob("*.yaml"))
    if not path.name.endswith(".cases.yaml")  # rules unit tests, not rules files
]


@functools.cache
def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((REPO / SCHEMA_FILES[name]).read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


@pytest.mark.parametrize("name", sorted(SCHEMAS))
def test_committed_schema_is_what_the_models_generate(name):
    assert (REPO / SCHEMA_FILES[name]).read_text() == json_schema(name) + "\n", (
        f"{SCHEMA_FILES[name]} {REGENERATE}"
    )


def test_committed_configuration_reference_is_what_the_models_generate():
    committed = (REPO / "docs" / "reference" / "configuration.md").read_text()
    assert committed == config_reference(), f"docs/reference/configuration.md {REGENERATE}"


@pytest.mark.parametrize(
    ("name", "path"),
    [("config", p) for p in CONFIG_FILES] + [("rules", p) for p in RULES_FILES],
    ids=lambda value: value.name if isinstance(value, Path) else value,
)
def test_shipped_file_validates_and_names_its_schema_for_editors(name, path):
    text = path.read_text()
    first = text.splitlines()[0]
    pointer = re.fullmatch(r"# yaml-language-server: \$schema=(\S+)", first)
    assert pointer, f"{path}: first line should point editors at the schema"
    assert (path.parent / pointer[1]).resolve() == (REPO / SCHEMA_FILES[name]).resolve()
    errors = list(_validator(name).iter_errors(yaml.safe_load(text)))
    assert not errors, [f"{list(e.absolute_path)}: {e.message}" for e in errors]


@pytest.mark.parametrize(
    ("name", "document", "where"),
    [
        ("config", {"server": {"prot": 5000}}, ["server"]),
        ("config", {"kafka": {"spool": {"enabled": "maybe"}}}, ["kafka", "spool", "enabled"]),
        ("rules", {"version": 1, "default": {"to": []}, "rules": [{"nmae": "x"}]}, ["rules", 0]),
    ],
)
def test_a_broken_key_fails_the_schema_as_it_fails_the_loader(name, document, where):
    errors = list(_validator(name).iter_errors(document))
    assert errors and any(list(e.absolute_path) == where for e in errors), errors
    with pytest.raises(ValidationError):
        SCHEMAS[name].model_validate(document)


def test_cli_prints_the_schema_and_the_reference(capsys):
    assert main(["schema", "rules"]) == 0
    assert json.loads(capsys.readouterr().out)["title"].startswith("lineage-proxy: a rules file")
    assert main(["config-reference"]) == 0
    assert capsys.readouterr().out == config_reference()


def test_reference_lists_every_key_with_type_default_and_a_description():
    reference = config_reference()
    for model in SCHEMAS.values():
        for key in model.model_json_schema(by_alias=True)["properties"]:
            assert f"| `{key}` |" in reference
    rows = [line for line in reference.splitlines() if line.startswith("| `")]
    undescribed = [row.split("|")[1].strip() for row in rows if row.rstrip().endswith("|  |")]
    assert not undescribed, (
        f"keys without a description: {undescribed}; write a comment right above the field "
        "in its model (or Field(description=...)), then run scripts/config_docs.sh"
    )
    assert "| `port` | int (≥ 0, ≤ 65535) | `5000` |" in reference
