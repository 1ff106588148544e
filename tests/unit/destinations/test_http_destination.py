"""HttpDestination against the target doubles on loopback: real sockets, real answers."""

from __future__ import annotations

import socket

import aiohttp
import orjson
import pytest

from proxy.destinations.http.datahub import DataHubTarget
from proxy.destinations.http.destination import HttpDeliveryError, HttpDestination, http_destination
from proxy.destinations.http.egeria import EgeriaTarget
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget
from proxy.destinations.retry_config import RetryConfig
from tests.support.doubles.datahub_double import DataHubDouble
from tests.support.doubles.egeria_double import EgeriaDouble
from tests.support.doubles.marquez_double import MarquezDouble
from tests.support.doubles.target_double import TargetDouble
from tests.support.sample_events import run_event

FAST_RETRY = RetryConfig(max_attempts=5, initial_backoff_seconds=0.001, max_backoff_seconds=0.01)


async def _deliver(destination, event):
    await destination.deliver(event, orjson.dumps(event))


async def test_marquez_accepts_with_201_and_stores():
    async with MarquezDouble() as marquez:
        dest = HttpDestination("m", MarquezTarget(kind="marquez", url=marquez.url))
        await dest.start()
        try:
            event = run_event()
            await _deliver(dest, event)
            assert marquez.events == [event] and marquez.answers == [201]
        finally:
            await dest.close()


async def test_marquez_double_refuses_a_body_not_sent_as_json():
    """What makes every Marquez test above also check our Content-Type."""
    async with MarquezDouble() as marquez, aiohttp.ClientSession() as session:
        body = orjson.dumps(run_event())
        for headers in ({"Content-Type": "text/plain"}, {}):
            async with session.post(marquez.url + marquez.path, data=body, headers=headers) as r:
                assert r.status == 415, headers
        async with session.post(marquez.url + marquez.path, json=run_event()) as r:
            assert r.status == 201
    assert marquez.answers == [415, 415, 201]


@pytest.mark.parametrize(
    ("payload", "status", "reason"),
    [
        (b'{"eventTime": null}', 422, "refused"),
        (orjson.dumps({**run_event(), "eventTime": "2026-11-23"}), 500, "could not parse"),
        (b"{not json", 500, "could not parse"),
    ],
)
async def test_marquez_refusals_are_permanent_with_status_and_excerpt(payload, status, reason):
    async with MarquezDouble() as marquez:
        dest = HttpDestination("m", MarquezTarget(kind="marquez", url=marquez.url))
        await dest.start()
        try:
            with pytest.raises(HttpDeliveryError) as caught:
                await dest.deliver({}, payload)
        finally:
            await dest.close()
    error = caught.value
    assert not error.retriable and error.status == status and reason in error.reason
    assert error.excerpt  # the body is kept for the dead-letter headers
    assert marquez.events == []


async def test_5xx_and_429_are_retriable_with_retry_after():
    async with MarquezDouble() as marquez:
        marquez.fail_next(1, 429, retry_after="3")
        dest = HttpDestination("m", MarquezTarget(kind="marquez", url=marquez.url))
        await dest.start()
        try:
            with pytest.raises(HttpDeliveryError) as caught:
                await _deliver(dest, run_event())
        finally:
            await dest.close()
    assert caught.value.retriable and caught.value.retry_after == 3.0


async def test_connection_refused_is_retriable():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dest = HttpDestination("m", MarquezTarget(kind="marquez", url=f"http://127.0.0.1:{port}"))
    await dest.start()
    try:
        with pytest.raises(HttpDeliveryError, match="connection failed") as caught:
            await _deliver(dest, run_event())
    finally:
        await dest.close()
    assert caught.value.retriable and caught.value.status is None


async def test_retrying_destination_rides_out_a_short_outage():
    async with MarquezDouble() as marquez:
        marquez.fail_next(3, 503)
        target = MarquezTarget(kind="marquez", url=marquez.url, retry=FAST_RETRY)
        retried: list[int] = []
        dest = http_destination("m", target, on_retry=lambda e, n, d: retried.append(n))
        await dest.start()
        try:
            event = run_event()
            await _deliver(dest, event)
        finally:
            await dest.close()
    assert marquez.events == [event] and retried == [1, 2, 3]
    assert marquez.answers == [503, 503, 503, 201]


async def test_egeria_200_with_related_http_code_is_a_failure():
    async with EgeriaDouble(server="lineage-daemon") as egeria:
        good = EgeriaTarget(kind="egeria", url=egeria.url, server="lineage-daemon", user="me")
        wrong = EgeriaTarget(kind="egeria", url=egeria.url, server="nope", user="me")
        dest, bad_dest = HttpDestination("e", good), HttpDestination("e", wrong)
        await dest.start()
        await bad_dest.start()
        try:
            event = run_event()
            await _deliver(dest, event)
            with pytest.raises(HttpDeliveryError, match="OMAG-MULTI-TENANT-404") as caught:
                await _deliver(bad_dest, run_event())
            egeria.fail_related(1, 503)
            with pytest.raises(HttpDeliveryError) as server_side:
                await _deliver(dest, run_event())
            egeria.fail_related(1, 400)
            with pytest.raises(HttpDeliveryError) as refused:
                await _deliver(dest, run_event())
        finally:
            await dest.close()
            await bad_dest.close()
    assert egeria.events == [event]
    # An unknown server is the daemon's misconfiguration: retried, not dead-lettered.
    assert caught.value.status == 200 and caught.value.retriable
    assert server_side.value.retriable
    assert not refused.value.retriable


async def test_datahub_bearer_token_and_invalid_event():
    async with DataHubDouble(token="tok", accepted_status=202) as datahub:
        target = DataHubTarget.model_validate(
            {"kind": "datahub", "url": datahub.url, "auth": {"type": "bearer", "token": "tok"}}
        )
        dest = HttpDestination("d", target)
        await dest.start()
        try:
            event = run_event()
            await _deliver(dest, event)
            with pytest.raises(HttpDeliveryError) as caught:
                await dest.deliver({}, b'{"no": "eventTime"}')
        finally:
            await dest.close()
    assert datahub.events == [event] and datahub.answers == [202, 400]
    assert not caught.value.retriable


async def test_generic_batch_mode_posts_one_json_array():
    async with TargetDouble() as receiver:
        target = GenericHttpTarget(
            kind="http",
            url=receiver.url + receiver.path,
            batch_events=10,
            headers={"X-Team": "a"},
        )
        dest = HttpDestination("h", target)
        await dest.start()
        try:
            events = [run_event() for _ in range(3)]
            await dest.deliver_batch(events, [orjson.dumps(e) for e in events])
        finally:
            await dest.close()
    assert receiver.events == events and receiver.answers == [200]


async def test_double_goes_down_and_comes_back_on_the_same_port():
    async with MarquezDouble() as marquez:
        dest = HttpDestination("m", MarquezTarget(kind="marquez", url=marquez.url))
        await dest.start()
        try:
            await marquez.down()
            with pytest.raises(HttpDeliveryError):
                await _deliver(dest, run_event())
            await marquez.up()
            await _deliver(dest, run_event())
        finally:
            await dest.close()
    assert len(marquez.events) == 1
