"""Test doubles of lineage targets that cannot run here (no container engine).

Each ``*_double`` is a real aiohttp server on a loopback port that answers the way the
real target is documented to answer (its public API docs) and keeps what it received in
``.events`` so tests can assert on it. compose/ runs the real targets.
"""
