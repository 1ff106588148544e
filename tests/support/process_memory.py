"""A process's memory as the kernel counts it (``/proc/<pid>/status``), for the tests
that hold the proxy's RSS under a stated bound."""

from __future__ import annotations

from pathlib import Path

__all__ = ["reset_peak", "rss"]


def rss(pid: int, field: str) -> int:
    """``VmRSS`` (now) or ``VmHWM`` (peak) of ``pid`` in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(f"{field}:"):
            return int(line.split()[1]) * 1024
    raise AssertionError(f"no {field} for {pid}")


def reset_peak(pid: int) -> None:
    """Start a new peak: ``VmHWM`` := ``VmRSS`` (Linux ≥ 4.0)."""
    Path(f"/proc/{pid}/clear_refs").write_text("5")
