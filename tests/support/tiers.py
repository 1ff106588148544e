"""The suite's two tiers (docs/contributing/test-suite.md, "Two tiers"), and the pytest plugin that
assigns them (tests/conftest.py registers it).

A test is in the **full** tier (marker ``full``) when it starts something only the whole
suite provides: a JVM (Apache Kafka, PySpark, Marquez, S3Proxy) or a tool installed for
it alone (dbt, PostgreSQL, Chromium). Every other test is in the **quick** tier:
``scripts/test.sh`` runs both, ``scripts/test.sh --quick`` runs ``-m "not full"``.

Nobody lists tests. At collection, every test is marked ``full`` that

- uses a fixture declared with :func:`starts`, directly or through other fixtures (the
  ``broker`` fixture, and with it ``start_proxy``, ``topic_with``…), or
- carries one of :data:`FULL_MARKERS` (``spark``, ``marquez``).

And whatever starts such a thing calls :func:`require_full` first, which fails a test of
the quick tier — in either run, so CI catches a test whose need no fixture shows (one
that starts a cluster in its body, say): mark that one ``@pytest.mark.full``.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import TypeVar

import pytest

__all__ = ["FULL", "FULL_MARKERS", "full_because", "require_full", "starts"]

FULL = "full"
# Markers whose tests are in the full tier whatever fixtures they use.
FULL_MARKERS = {
    "spark": "PySpark (a JVM)",
    "marquez": "Marquez (a JVM) and PostgreSQL",
}

_DECLARED = "_lineage_proxy_starts"
# The test this process runs now (set around each test by the hook below).
_running: pytest.Item | None = None

F = TypeVar("F", bound=Callable[..., object])


def starts(what: str) -> Callable[[F], F]:
    """Declare that a fixture starts ``what``, which only the full tier has: every test
    using it, directly or through other fixtures, is marked ``full``. Written under
    ``@pytest.fixture``::

        @pytest.fixture(scope="session")
        @starts("Apache Kafka (a JVM)")
        def broker() -> KafkaCluster: ...
    """

    def declare(function: F) -> F:
        setattr(function, _DECLARED, what)
        return function

    return declare


def full_because(item: pytest.Item) -> list[str]:
    """Why ``item`` is in the full tier (its markers, the fixtures it uses); empty: quick."""
    reasons = [
        f"@pytest.mark.{name}: {what}"
        for name, what in FULL_MARKERS.items()
        if item.get_closest_marker(name) is not None
    ]
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for name in info.names_closure:
            definitions = info.name2fixturedefs.get(name) or ()
            # The last definition is the one the test gets (a module's overrides conftest's).
            what = getattr(definitions[-1].func, _DECLARED, None) if definitions else None
            if what is not None:
                reasons.append(f"fixture {name}: {what}")
    return reasons


def require_full(what: str) -> None:
    """Called before starting ``what``: fails the running test unless it is in the full
    tier (outside a test, in a helper process or a script, it does nothing)."""
    item = _running
    if item is None or item.get_closest_marker(FULL) is not None:
        return
    pytest.fail(
        f"{item.nodeid} starts {what}, which only the full tier has, but is not marked "
        f"`{FULL}`: declare the fixture that starts it with @starts(...), or mark the test "
        "@pytest.mark.full (tests/support/tiers.py, docs/contributing/test-suite.md)",
        pytrace=False,
    )


def pytest_itemcollected(item: pytest.Item) -> None:
    """Mark ``full`` every test :func:`full_because` finds a reason for, before ``-m``
    selects (``--quick``: ``-m "not full"``)."""
    if full_because(item):
        item.add_marker(FULL)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_protocol(item: pytest.Item) -> Generator[None, object, object]:
    """Remember the running test for :func:`require_full`."""
    global _running
    _running = item
    try:
        return (yield)
    finally:
        _running = None
