"""Daemons that read lineage topics and deliver to Marquez, Egeria, DataHub, HTTP, archive."""
