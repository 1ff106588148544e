"""Prometheus metrics: one process's registry, the workers' merged view, disk room."""
