"""The web layer: the aiohttp application and everything that speaks HTTP to clients.

:mod:`.app` builds the application (routes, its one middleware, the lifetime of what it
holds); :mod:`.keys` holds every typed key of its state. The endpoints: ingest
(:mod:`.lineage_endpoints`, reading bodies with :mod:`.ingest`, the fast path
:mod:`.ingest_lane`), health (:mod:`.readiness`), the status page (:mod:`.status`), the
tap stream (:mod:`.tap_endpoint`), the API description (:mod:`.openapi`). Around them:
request ids, connection limits, the bytes-in-flight cap, and the count of client faults.

The web layer sits on the data path (pipeline, rules, destinations, validation) and
never the other way round: the import-linter contracts in ``pyproject.toml`` say so.
"""
