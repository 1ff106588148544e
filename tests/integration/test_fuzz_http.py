"""Property-based fuzzing of a real ``lineage-proxy serve`` process over HTTP (hypothesis).

Any body with any headers: never a 5xx (Kafka is up, so not even 503), never a hang,
memory bounded. Any valid event — odd namespaces, calendar-edge offsets, integers
beyond 64 bits, unicode — is acknowledged and stored in Kafka exactly as sent.
Runs are reproducible: derandomized, no example database.
"""

from __future__ import annotations

import gzip
import json
import time
import uuid
import zlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any

import pytest
import requests
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.support.figures import report
from tests.support.kafka_reader import read_topic
from tests.support.load import kafka_run_ids
from tests.support.processes import ServeProcess, serve_process, wait_until_ready
from tests.support.sample_events import PRODUCER, facet, rich_run_event, run_event

pytestmark = [pytest.mark.integration, pytest.mark.slow]

FUZZ = settings(
    max_examples=200,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow],
)
# Per request: far above a normal answer, far below "hung".
REQUEST_SECONDS = 10.0


class Proxy:
    def __init__(self, process: ServeProcess, url: str, topic: str) -> None:
        self.process, self.url, self.topic = process, url, topic

    def rss_bytes(self) -> int:
        for line in Path(f"/proc/{self.process.pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
        raise AssertionError("no VmRSS")

    def post(self, path: str, body: bytes, headers: dict[str, str]) -> requests.Response:
        started = time.monotonic()
        response = requests.post(self.url + path, data=body, headers=headers, timeout=30)
        elapsed = time.monotonic() - started
        assert elapsed < REQUEST_SECONDS, f"{elapsed:.1f} s for {body[:200]!r}"
        return response


@pytest.fixture
def proxy(broker) -> Iterator[Proxy]:
    """A ``lineage-proxy serve`` process of its own, writing to a topic of its own."""
    topic = f"test.fuzz.{uuid.uuid4().hex[:8]}"
    process, url = serve_process(
        broker.bootstrap_servers, kafka__topic=topic, server__run_consumers="[]"
    )
    try:
        wait_until_ready(url, process)
        yield Proxy(process, url, topic)
    finally:
        process.terminate()
        process.wait(30)
        log = process.log()
        assert "Traceback" not in log, log[-5000:]


# -- any body, any headers ------------------------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers()
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=30),
    lambda inner: (
        st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=10), inner, max_size=5)
    ),
    max_leaves=25,
)


@st.composite
def mutated_events(draw: st.DrawFn) -> bytes:
    """A valid event with one field replaced, removed, or the bytes cut short."""
    event = rich_run_event()
    body = json.dumps(event).encode()
    how = draw(st.sampled_from(["replace", "remove", "truncate", "as_is"]))
    if how == "truncate":
        return body[: draw(st.integers(0, len(body) - 1))]
    if how == "as_is":
        return body
    holder, key = draw(
        st.sampled_from(
            [
                (event, "eventTime"),
                (event, "eventType"),
                (event, "producer"),
                (event, "run"),
                (event["run"], "runId"),
                (event["job"], "namespace"),
                (event["job"], "name"),
                (event["outputs"][0], "namespace"),
                (event["outputs"][0]["outputFacets"]["outputStatistics"], "rowCount"),
            ]
        )
    )
    if how == "remove":
        del holder[key]
    else:
        holder[key] = draw(json_values)
    return json.dumps(event).encode()


bodies = st.one_of(
    st.binary(max_size=3000),
    json_values.map(lambda v: json.dumps(v).encode()),
    st.lists(mutated_events(), max_size=3).map(lambda es: b"[" + b",".join(es) + b"]"),
    mutated_events(),
)
CONTENT_TYPES = [
    None,
    "application/json",
    "application/json; charset=utf-8",
    "text/plain",
    "application/x-www-form-urlencoded",
    "multipart/form-data; boundary=xyz",
    "application/octet-stream",
    "garbage",
]
PATHS = ["/api/v1/lineage", "/api/v1/lineage/batch", "/a/prefix/api/v1/lineage", "/api/v1/other"]


@st.composite
def encoded(draw: st.DrawFn, body: bytes) -> tuple[bytes, str | None]:
    how = draw(st.sampled_from(["none", "gzip", "gzip-two-members", "deflate", "lie", "br"]))
    if how == "gzip":
        return gzip.compress(body), "gzip"
    if how == "gzip-two-members":
        cut = draw(st.integers(0, len(body)))
        return gzip.compress(body[:cut]) + gzip.compress(body[cut:]), "x-gzip"
    if how == "deflate":
        return zlib.compress(body), "deflate"
    if how == "lie":
        return body, "gzip"  # says gzip, is not
    if how == "br":
        return body, "br"
    return body, None


@st.composite
def requests_of_any_kind(draw: st.DrawFn) -> tuple[str, bytes, dict[str, str]]:
    body, encoding = draw(encoded(draw(bodies)))
    headers = {"Content-Type": draw(st.sampled_from(CONTENT_TYPES)), "Content-Encoding": encoding}
    return draw(st.sampled_from(PATHS)), body, {k: v for k, v in headers.items() if v}


def test_any_body_and_headers_never_get_a_5xx_a_hang_or_unbounded_memory(proxy):
    rss_before = proxy.rss_bytes()
    statuses: dict[int, int] = {}

    @FUZZ
    @given(requests_of_any_kind())
    def post_anything(request: tuple[str, bytes, dict[str, str]]) -> None:
        path, body, headers = request
        response = proxy.post(path, body, headers)
        statuses[response.status_code] = statuses.get(response.status_code, 0) + 1
        assert response.status_code < 500, (response.status_code, response.text, body[:300])
        answer = response.json()
        if response.status_code >= 400:
            assert answer["error"], answer

    post_anything()
    growth = proxy.rss_bytes() - rss_before
    report("fuzz_any_body", statuses=statuses, rss_growth_mb=round(growth / 2**20, 1))
    assert growth < 200 * 2**20


# -- valid events: stored == sent -----------------------------------------------------

OFFSETS = [UTC, timezone(timedelta(hours=14)), timezone(-timedelta(hours=12))]
OFFSETS += [timezone(timedelta(hours=5, minutes=45)), timezone(-timedelta(hours=9, minutes=30))]


@st.composite
def event_times(draw: st.DrawFn) -> str:
    """RFC 3339 date-times at calendar edges: leap days, year ends, far offsets."""
    moment = draw(
        st.one_of(
            st.datetimes(min_value=datetime(1970, 1, 1), max_value=datetime(9999, 12, 30)),
            st.sampled_from(
                [
                    datetime(2024, 2, 29, 23, 59, 59, 999999),
                    datetime(2023, 12, 31, 23, 59, 59),
                    datetime(2000, 1, 1),
                    datetime(1999, 12, 31, 23, 59, 59, 1),
                ]
            ),
        )
    )
    offset = draw(st.sampled_from(OFFSETS))
    text = moment.replace(tzinfo=offset).isoformat(
        timespec=draw(st.sampled_from(["seconds", "milliseconds", "microseconds"]))
    )
    return text.replace("+00:00", "Z") if draw(st.booleans()) else text


names = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00"), min_size=1, max_size=40
)
big_integers = st.one_of(
    st.integers(min_value=2**63 - 5, max_value=2**64 + 5),
    st.integers(min_value=-(2**64), max_value=-(2**63) + 5),
    st.integers(min_value=10**30, max_value=10**300),
    st.integers(),
)


@st.composite
def valid_events(draw: st.DrawFn) -> dict[str, Any]:
    event = run_event(namespace=draw(names), name=draw(names))
    event["eventTime"] = draw(event_times())
    event["eventType"] = draw(
        st.sampled_from(["START", "RUNNING", "COMPLETE", "ABORT", "FAIL", "OTHER"])
    )
    event["run"]["facets"]["custom"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/schemas/custom.json#/$defs/Custom",
        "counter": draw(big_integers),
        "label": draw(st.text(st.characters(blacklist_categories=["Cs"]), max_size=50)),
        "extra": draw(json_values),
    }
    event["inputs"] = [
        {
            "namespace": draw(names),
            "name": draw(names),
            "facets": {"schema": facet("SchemaDatasetFacet", "1-1-1", fields=[])},
        }
    ]
    return event


def test_valid_events_are_acknowledged_and_stored_exactly_as_sent(proxy, broker):
    sent: dict[str, dict[str, Any]] = {}

    @FUZZ
    @given(valid_events(), st.booleans(), st.booleans())
    def post_valid(event: dict[str, Any], batch: bool, compress: bool) -> None:
        body = json.dumps([event] if batch else event, ensure_ascii=False).encode()
        headers = {"Content-Type": "application/json"}
        if compress:
            body, headers["Content-Encoding"] = gzip.compress(body), "gzip"
        path = "/api/v1/lineage/batch" if batch else "/api/v1/lineage"
        response = proxy.post(path, body, headers)
        assert response.status_code == 200, (response.text, event)
        assert response.json()["status"] == "success"
        sent[event["run"]["runId"]] = event

    post_valid()
    found = kafka_run_ids(broker.bootstrap_servers, proxy.topic)
    records = read_topic(broker.bootstrap_servers, proxy.topic, expect=len(sent))
    stored = {
        e["run"]["runId"]: e
        for e in (json.loads(r.value) for r in records if r.value.startswith(b"{"))
    }
    mismatched = [run_id for run_id, event in sent.items() if stored.get(run_id) != event]
    lost = set(sent) - set(found)
    duplicates = sum(n - 1 for n in found.values())
    report(
        "fuzz_valid_events_stored_exactly",
        sent=len(sent),
        lost=len(lost),
        duplicates=duplicates,
        mismatched=len(mismatched),
    )
    assert set(found) == set(sent) and duplicates == 0
    assert mismatched == [], [(sent[i], stored.get(i)) for i in mismatched[:3]]
