"""Stalled tap readers and a best-effort target that never answers, against the real
proxy process: its memory stays bounded by ``server.max_queued_bytes`` and comes back
once the readers are cut off and the target answers again (docs/operate/ingest-limits.md).

Three readers open the tap with a 4 KB receive window and then read nothing; the rules
send every event to Kafka (Tansu) and to an HTTP target that accepts connections and
never answers (best effort: off the request path). 300 events of 900 KB each are posted
one after another; STALLED_SECONDS later more are posted until the readers are cut off.
RSS is read from /proc: ``VmHWM`` (the peak, reset through ``clear_refs`` once the proxy
is warm) and ``VmRSS`` (now).

The bound stated here: warm RSS + 2 x the budget (a queued event is counted by its JSON
size; a best-effort delivery holds the event and its JSON, a tap reader the event) +
96 MiB for what no queue holds (the request being read, parsed and sent to Kafka, a
frame in each stalled reader's socket buffers, the allocator's slack).

Seen failing on the code before the budget (this test with ``server__max_queued_bytes``
left out, which that code does not know, and a pause in place of the wait for the
queues' gauge it does not have): 84 MiB warm, 677 MiB peak against a bound of 308 MiB,
and still 677 MiB 30 s after the readers had left and the target had reset its
connections — every event sat in each reader's 1,000-event queue and in the best-effort
queue of 10,000 events. Seen failing, too, with the heap trim of proxy.support.free_memory
disabled: peak 129 MiB, but 128 MiB after the queues were empty (75 MiB with it).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import struct
import time

import orjson
import pytest
from aiohttp import ClientSession

from proxy.tap.hub import STALLED_SECONDS
from tests.support.figures import report
from tests.support.metrics import metrics_of, total
from tests.support.process_memory import reset_peak, rss
from tests.support.processes import serve_process, wait_until_ready
from tests.support.sample_events import PRODUCER, run_event
from tests.support.tap_readers import stalled_reader
from tests.support.waiting import eventually

pytestmark = pytest.mark.integration

MiB = 1024 * 1024
BUDGET = 64 * MiB
SLACK = 96 * MiB
READERS = 3
EVENTS = 300
EVENT_BYTES = 900 * 1024
RULES = """
version: 1
destinations:
  kafka: {{kind: kafka, key: run}}
  audit:
    kind: http
    target:
      kind: http
      url: "{url}/api/v1/lineage"
      timeout_seconds: 600
      retry: {{max_attempts: 1}}
default:
  to: [kafka, audit]
"""


def large_event() -> bytes:
    """A valid RunEvent of about EVENT_BYTES: a custom run facet carrying 1,500 texts of
    600 bytes (many mid-sized values, as a wide schema or column lineage has; one long
    text would be one allocation of its own, given back to the system when freed)."""
    event = run_event()
    event["run"]["facets"]["blob"] = {
        "_producer": PRODUCER,
        "_schemaURL": "https://example.com/facets/BlobRunFacet.json",
        "texts": [f"{i:08d}" + "x" * 600 for i in range(EVENT_BYTES // 612)],
    }
    return orjson.dumps(event)


class SilentTarget:
    """An HTTP target that accepts connections, reads what comes and never answers —
    until it :meth:`recovers`: then it answers 200 to every request."""

    def __init__(self) -> None:
        self.connections: list[asyncio.StreamWriter] = []
        self.server: asyncio.Server | None = None
        self.answering = False

    async def start(self) -> str:
        self.server = await asyncio.start_server(self._accept, "127.0.0.1", 0)
        port = self.server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    async def _accept(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections.append(writer)
        with contextlib.suppress(ConnectionError, asyncio.IncompleteReadError):
            while self.answering or not writer.is_closing():
                if not self.answering:
                    if not await reader.read(65536):
                        return
                    continue
                head = await reader.readuntil(b"\r\n\r\n")
                length = next(
                    (
                        int(line.split(b":")[1])
                        for line in head.split(b"\r\n")
                        if line.lower().startswith(b"content-length:")
                    ),
                    0,
                )
                await reader.readexactly(length)
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
                await writer.drain()

    def recovers(self) -> None:
        """Answer from now on; the connections that were never answered are reset."""
        self.answering = True
        for writer in self.connections:
            writer.transport.abort()
        self.connections.clear()

    async def close(self) -> None:
        if self.server is not None:
            self.server.close()
        for writer in self.connections:
            writer.transport.abort()
        if self.server is not None:
            await self.server.wait_closed()


def cut_off(metrics: str) -> float | None:
    return total(metrics, "lineage_proxy_tap_readers_cut_off_total")


async def test_stalled_tap_readers_and_a_dead_best_effort_target_stay_under_the_budget(
    dedicated_broker, tmp_path
):
    target = SilentTarget()
    rules = tmp_path / "rules.yaml"
    rules.write_text(RULES.format(url=await target.start()))
    process, url = serve_process(
        dedicated_broker.bootstrap_servers,
        routing__rules=str(rules),
        server__run_consumers="[]",
        server__max_queued_bytes=str(BUDGET),
    )
    readers: list[socket.socket] = []
    try:
        wait_until_ready(url, process)
        port = int(url.rsplit(":", 1)[1])
        body = large_event()
        async with ClientSession() as session:

            async def post() -> int:
                async with session.post(f"{url}/api/v1/lineage", data=body) as response:
                    return response.status

            for _ in range(3):  # warm: every code path of a large event has run
                assert await post() == 200
            warm = rss(process.pid, "VmRSS")
            reset_peak(process.pid)

            readers = [await asyncio.to_thread(stalled_reader, port) for _ in range(READERS)]
            started = time.monotonic()
            statuses = [await post() for _ in range(EVENTS)]
            seconds = time.monotonic() - started
            # The readers stay stalled: once they have read nothing for STALLED_SECONDS,
            # the next event the budget refuses cuts them off and frees what they held.
            await asyncio.sleep(STALLED_SECONDS + 1)
            for _ in range(20):
                statuses.append(await post())
                if cut_off(await metrics_of(url)) == READERS:
                    break
            cut_off_rss = rss(process.pid, "VmRSS")
            peak = rss(process.pid, "VmHWM")
            figures = await metrics_of(url)

        for reader in readers:  # the readers leave: reset, not a clean close
            reader.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            reader.close()
        target.recovers()

        async def nothing_queued() -> bool:
            return total(await metrics_of(url), "lineage_proxy_queued_bytes") == 0

        # The circuit to the target closes at its next probe (within 5 s), and what
        # waited is delivered.
        emptied = await eventually(nothing_queued, 60)
        came_back = await eventually(lambda: rss(process.pid, "VmRSS") < warm + 32 * MiB, 30)
        after = rss(process.pid, "VmRSS")
        log = process.log()
        report(
            "queued_bytes",
            events=EVENTS,
            event_kib=EVENT_BYTES // 1024,
            tap_readers=READERS,
            posted_after_stall=len(statuses) - EVENTS,
            accepted=statuses.count(200),
            seconds=round(seconds, 1),
            tap_dropped=total(figures, "lineage_proxy_tap_dropped_total"),
            tap_readers_cut_off=cut_off(figures),
            best_effort_dropped=total(figures, "lineage_proxy_best_effort_dropped_total"),
            budget_mib=BUDGET // MiB,
            rss_warm_mib=round(warm / MiB, 1),
            rss_peak_mib=round(peak / MiB, 1),
            rss_readers_cut_off_mib=round(cut_off_rss / MiB, 1),
            rss_bound_mib=round((warm + 2 * BUDGET + SLACK) / MiB, 1),
            rss_after_mib=round(after / MiB, 1),
        )
        assert statuses.count(200) == len(statuses)
        assert cut_off(figures) == READERS
        assert emptied, "the queues still hold bytes after the target recovered"
        assert peak < warm + 2 * BUDGET + SLACK, f"peak {(peak - warm) / MiB:.0f} MiB over warm"
        assert came_back, f"RSS {after / MiB:.0f} MiB after, warm {warm / MiB:.0f}"
        assert total(figures, "lineage_proxy_best_effort_dropped_total")
        assert "Traceback" not in log, log[-3000:]
    finally:
        for reader in readers:
            reader.close()
        await target.close()
        process.terminate()
        process.wait(30)
