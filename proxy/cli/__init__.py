"""The ``lineage-proxy`` command line: the parser and one module per command group."""
