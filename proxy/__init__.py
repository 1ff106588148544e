"""lineage-proxy: accept OpenLineage events over HTTP, validate them, and make them durable in Kafka."""

__version__ = "0.1.0"
