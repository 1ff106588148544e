"""The PySpark side: a listener that emits OpenLineage events, and jobs over the archive."""
