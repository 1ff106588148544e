"""A spooled event (Kafka unreachable) is answered 2xx only after the spool segment's
fsync and, for a new segment, the fsync of its directory: the proxy's system calls,
recorded with strace, show both finishing before the response is written to that
request's socket (tests/support/syscalls.py; the archive's counterpart is
test_archive_durable_before_2xx.py).

Seen failing without the segment's fsync, and without ``fsync_directory`` after the
``os.open`` of a new segment (``Spool._new_segment``): every client was listed as
answered before its directory's fsync.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.ports import free_port
from tests.support.sample_events import run_event
from tests.support.syscalls import (
    SEGMENT,
    assert_synced_before_answers,
    post_on_own_connection,
    traced_proxy,
)

pytestmark = pytest.mark.integration

REQUESTS = 5


@pytest.mark.slow
def test_a_spooled_event_is_fsynced_before_its_2xx(tmp_path: Path) -> None:
    # Kafka is unreachable (nothing listens there): every event goes to the spool.
    with traced_proxy(
        tmp_path,
        f"127.0.0.1:{free_port()}",
        kafka__spool__after_seconds="0.2",
        kafka__create_topics="false",
        server__run_consumers="[]",
    ) as (url, trace):
        clients = []
        # One after another, each on its own connection, so that each answer follows its
        # own sync.
        for _ in range(REQUESTS):
            status, client = post_on_own_connection(url, run_event())
            assert status == 200, status
            clients.append(client)
    assert_synced_before_answers(trace.read_text(), clients, SEGMENT)
