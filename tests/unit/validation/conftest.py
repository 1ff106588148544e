"""Fixtures for the validator tests: our validator, the oracle, a fresh valid event."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator

from proxy.validation import EventValidator
from tests.support.paths import SPEC_DIR
from tests.unit.validation.spec_oracle import Oracle, oracle_missing, valid_run_event


@pytest.fixture(scope="session")
def spec_dir() -> Path:
    if not (SPEC_DIR / "OpenLineage.json").is_file():
        oracle_missing(
            f"official OpenLineage spec not found at {SPEC_DIR.resolve()} "
            "(put it there or set OPENLINEAGE_SPEC_DIR)"
        )
    return SPEC_DIR


@pytest.fixture(scope="session")
def oracle(spec_dir: Path) -> Oracle:
    checker = Draft202012Validator.FORMAT_CHECKER
    if not {"date-time", "uri", "uuid"} <= set(checker.checkers):
        oracle_missing(
            "jsonschema format checkers missing: pip install 'jsonschema[format-nongpl]'"
        )
    return Oracle(spec_dir)


@pytest.fixture(scope="session")
def validator() -> EventValidator:
    return EventValidator()


@pytest.fixture
def event() -> dict[str, Any]:
    return copy.deepcopy(valid_run_event())
