"""HTTP delivery to lineage backends: one module per target kind, shared by the proxy's
routing ``http`` destination and the consumer daemons.

Each target module (generic, marquez, egeria, datahub) owns exactly its path, auth and how
success, retriable and permanent failure are told apart; :mod:`.targets` is the ``kind``
→ model table and config union; :mod:`.destination` owns HTTP (aiohttp). The package
imports nothing itself, so that reading a config never loads aiohttp.
"""
