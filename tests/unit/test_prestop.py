"""The preStop hook of the chart's proxy pods (proxy/server/prestop.py) against a real spool on
disk: it waits while a segment is left and ends once the drainer's confirm deleted it."""

from __future__ import annotations

import asyncio
import sys
import time
from pathlib import Path

import yaml

from proxy.destinations.kafka.spool import Spool
from proxy.destinations.kafka.stranded import RECORD, read_record
from proxy.server.prestop import main, spool_directories, wait_until_drained


async def _spool_with_one_event(directory: Path) -> Spool:
    spool = Spool(directory, max_bytes=1 << 20, segment_bytes=1 << 16)
    await spool.open()
    await spool.append("openlineage.events", "run:ns/job", [], b'{"e": 1}')
    return spool


def _config(tmp_path: Path, spool_root: Path) -> Path:
    path = tmp_path / "config.yaml"
    path.write_text(yaml.safe_dump({"kafka": {"spool": {"directory": str(spool_root)}}}))
    return path


async def test_a_spooled_event_is_found_in_any_cluster_or_worker_directory(tmp_path: Path):
    root = tmp_path / "spool"
    directory = root / "worker-1" / "kafka_9092"
    spool = await _spool_with_one_event(directory)
    assert spool_directories(root) == [directory]
    # Time is up at once: the directory holding the event is named.
    assert wait_until_drained(root, 0) == [directory]
    await spool.confirm(await spool.read(10))
    await spool.close()
    assert spool_directories(root) == []
    assert wait_until_drained(root, 0) == []


async def test_time_up_with_events_left_exits_1_and_names_them(tmp_path: Path, capsys):
    root = tmp_path / "spool"
    spool = await _spool_with_one_event(root / "c")
    await spool.close()
    assert main(["--config", str(_config(tmp_path, root)), "--timeout", "0"]) == 1
    err = capsys.readouterr().err
    assert str(root / "c") in err and "runbooks.md#" in err
    # Both ways out: the pod back, or a drain by hand from a pod that mounts the volume.
    assert "scale back up" in err and "lineage-proxy spool drain" in err


async def test_time_up_leaves_a_record_beside_the_events(tmp_path: Path, monkeypatch):
    """The hook's failure event expires in about an hour and the pod's metrics go with
    it: what stays is a record on the volume, which the next proxy on it reports
    (tests/unit/test_stranded.py). Seen failing before the record existed (the hook
    wrote nothing: read_record was None)."""
    monkeypatch.setenv("HOSTNAME", "lp-lineage-proxy-3")
    root = tmp_path / "spool"
    spool = await _spool_with_one_event(root / "c")
    await spool.close()
    assert main(["--config", str(_config(tmp_path, root)), "--timeout", "0"]) == 1
    stranded = read_record(root)
    assert stranded is not None
    assert (stranded.pod, stranded.events, stranded.directories) == (
        "lp-lineage-proxy-3",
        1,
        [str(root / "c")],
    )
    assert stranded.bytes > 0 and abs(stranded.at - time.time()) < 60
    assert (root / RECORD).is_file() and not list(root.glob(".*.tmp"))


async def test_the_hook_ends_once_the_drainer_confirmed_the_last_event(tmp_path: Path):
    root = tmp_path / "spool"
    spool = await _spool_with_one_event(root / "c")
    config = _config(tmp_path, root)
    hook = await asyncio.create_subprocess_exec(
        *[
            sys.executable,
            "-m",
            "proxy.server.prestop",
            "--config",
            str(config),
            "--timeout",
            "600",
        ],
        stdout=asyncio.subprocess.PIPE,
    )
    assert hook.stdout is not None
    try:
        waiting = (await asyncio.wait_for(hook.stdout.readline(), 120)).decode()
        assert waiting.startswith("waiting up to 600 s") and str(root / "c") in waiting
        await spool.confirm(await spool.read(10))
        out = (await asyncio.wait_for(hook.communicate(), 120))[0].decode()
    finally:
        if hook.returncode is None:
            hook.kill()
        await spool.close()
    assert hook.returncode == 0
    assert f"spool {root} is empty" in out


def test_an_empty_or_missing_spool_directory_ends_the_hook_at_once(tmp_path: Path):
    assert main(["--config", str(_config(tmp_path, tmp_path / "none")), "--timeout", "600"]) == 0
