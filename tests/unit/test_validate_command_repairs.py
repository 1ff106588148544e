"""``lineage-proxy validate`` says of an event what the proxy would do with it: one the
proxy repairs and accepts is not called invalid (it is listed as repaired)."""

from __future__ import annotations

import subprocess
import sys

import orjson

from tests.support.sample_events import run_event


def _validate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "proxy", "validate", *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_an_event_the_proxy_would_repair_is_valid_with_its_repairs_named(tmp_path) -> None:
    event = run_event()
    event["eventTime"] = "2026-11-23T10:00:00"  # datetime.now().isoformat()
    path = tmp_path / "event.json"
    path.write_bytes(orjson.dumps(event))

    done = _validate(str(path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"{path}: /eventTime: naive_date_time: '2026-11-23T10:00:00' → " in done.stdout
    assert f"{path}: valid after repairs" in done.stdout

    strict = _validate("--strict", str(path))  # as validation.mode: strict would refuse it
    assert strict.returncode == 1
    assert f"{path}: /eventTime: " in strict.stdout
