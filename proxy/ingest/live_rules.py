"""The rules the running proxy routes by: load at start, rebuild and swap on change.

:class:`LiveRules` reads the rules file, builds the destinations it names through
:mod:`proxy.destinations.registry` (reusing the live ones whose name and config did not
change, so an archive keeps its open files and Kafka its producer), compiles the rules
and swaps them into the :class:`RulesRouter` in one assignment, so an event is always
routed by one whole ruleset, old or new, never a mix.

Reload happens on SIGHUP (``serve`` calls :meth:`LiveRules.request_reload`) and when the
file's mtime, size or inode changes (:meth:`LiveRules.watch` polls with ``os.stat`` on a
worker thread). A file that does not load, check or build is refused with one log line
naming file, line and reason; the old rules keep serving. ``/metrics`` counts reloads
by result. Destinations the new rules no longer use are closed after a grace period, so
deliveries already handed to them finish.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Coroutine
from dataclasses import replace
from pathlib import Path
from typing import Any

from proxy.destinations import Destination
from proxy.destinations.kinds import DestinationConfig
from proxy.destinations.registry import DestinationResources, build_destination
from proxy.openlineage.repaired import RepairedEvent
from proxy.support.file_state import FileState, file_state
from proxy.support.yaml_source import ConfigError
from routing_rules.compiler import compile_rules
from routing_rules.loader import load_rules_file
from routing_rules.ruleset import Route, Ruleset, Trace
from routing_rules.schema import RulesFile
from routing_rules.stats import RoutingStats

__all__ = ["LiveRules", "RulesRouter"]

log = logging.getLogger(__name__)

_Built = dict[str, tuple[DestinationConfig, Destination]]


def _used_destinations(rules: RulesFile) -> list[str]:
    names = [n for rule in rules.rules for n in rule.to] + rules.default.to
    names += rules.rejected.to if rules.rejected is not None else []
    return list(dict.fromkeys(names))


class RulesRouter:
    """The proxy's :class:`~proxy.ingest.router.Router`: route by the current ruleset."""

    def __init__(self, ruleset: Ruleset[Destination]) -> None:
        self.ruleset = ruleset

    def route(self, event: dict[str, Any], trace: Trace | None = None) -> Route[Destination]:
        route = self.ruleset.route(event, trace)
        if isinstance(event, RepairedEvent) and route.event is not event:
            # Transforms work on a plain copy; what was repaired still travels with it.
            return replace(route, event=RepairedEvent(route.event, event.repairs))
        return route

    def route_rejected(self, envelope: dict[str, Any]) -> Route[Destination]:
        return Route(envelope, self.ruleset.rejected)


class LiveRules:
    def __init__(
        self,
        path: Path,
        resources: DestinationResources,
        stats: RoutingStats,
        *,
        retire_after_seconds: float = 10.0,
    ) -> None:
        self.path = path
        self.resources = resources
        self.stats = stats
        self.retire_after_seconds = retire_after_seconds
        self.router: RulesRouter | None = None
        self._built: _Built = {}
        self._lock = asyncio.Lock()
        self._file_state: FileState | None = None
        self._tasks: set[asyncio.Task[object]] = set()
        self._retiring: list[Destination] = []

    @property
    def destinations(self) -> list[Destination]:
        return [destination for _, destination in self._built.values()]

    async def start(self) -> RulesRouter:
        """Load the file for the first time; a broken file raises :class:`ConfigError`."""
        ruleset, built = await self._load()
        self._built = built
        self.router = RulesRouter(ruleset)
        self.stats.loaded(True)
        log.info("routing by %s (%d rules)", self.path, len(ruleset.rules))
        return self.router

    async def _load(self) -> tuple[Ruleset[Destination], _Built]:
        self._file_state = await asyncio.to_thread(file_state, self.path)
        rules = await asyncio.to_thread(load_rules_file, self.path)
        built: _Built = {}
        new: list[Destination] = []
        try:
            for name in _used_destinations(rules):
                config = rules.destinations[name]
                old = self._built.get(name)
                if old is not None and old[0] == config:
                    built[name] = old
                    continue
                try:
                    destination = await build_destination(name, config, self.resources)
                except Exception as exc:
                    # Whatever a destination trips on while starting (a directory it may
                    # not create, a librdkafka setting it does not know) refuses the file.
                    raise ConfigError(f"{self.path}: destination {name!r}: {exc}") from exc
                new.append(destination)
                built[name] = (config, destination)
        except BaseException:
            await self._close_all(new)
            raise
        resolve = {name: destination for name, (_, destination) in built.items()}.__getitem__
        return compile_rules(rules, resolve, self.stats, source=str(self.path)), built

    async def reload(self) -> bool:
        """Load, build and swap; on any error keep the old rules. True when swapped."""
        async with self._lock:
            assert self.router is not None, "start() first"
            try:
                ruleset, built = await self._load()
            except ConfigError as exc:
                log.error("rules reload refused, the previous rules keep serving:\n%s", exc)
                self.stats.count_reload("failure")
                return False
            except Exception:
                # A bug of ours must not stop the watcher or the old rules.
                log.exception("rules reload failed, the previous rules keep serving")
                self.stats.count_reload("failure")
                return False
            self.router.ruleset = ruleset
            kept = {id(d) for _, d in built.values()}
            retired = [d for _, d in self._built.values() if id(d) not in kept]
            self._built = built
            self.stats.count_reload("success")
            log.info("rules reloaded from %s (%d rules)", self.path, len(ruleset.rules))
            if retired:
                self._retiring.extend(retired)
                self._spawn(self._retire(retired))
            return True

    def request_reload(self) -> None:
        """Schedule a reload (the SIGHUP handler); reloads never overlap."""
        self._spawn(self.reload())

    async def watch(self, interval: float) -> None:
        """Reload whenever the file changes; runs until cancelled."""
        while True:
            await asyncio.sleep(interval)
            state = await asyncio.to_thread(file_state, self.path)
            if state != self._file_state:
                await self.reload()

    def _spawn(self, coroutine: Coroutine[object, object, object]) -> None:
        task = asyncio.ensure_future(coroutine)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _retire(self, destinations: list[Destination]) -> None:
        await asyncio.sleep(self.retire_after_seconds)
        for destination in destinations:
            if destination in self._retiring:
                self._retiring.remove(destination)
        await self._close_all(destinations)

    async def _close_all(self, destinations: list[Destination]) -> None:
        for destination in destinations:
            try:
                await destination.close()
            except Exception:
                log.exception("closing destination %s failed", destination.name)

    async def close(self) -> None:
        """Stop reloading and close every destination, retiring ones included."""
        for task in list(self._tasks):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self._close_all(self._retiring + self.destinations)
        self._retiring.clear()
        self._built = {}
