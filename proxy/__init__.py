"""lineage-proxy: accept OpenLineage events over HTTP, validate them, make them durable."""

__version__ = "0.1.0"
