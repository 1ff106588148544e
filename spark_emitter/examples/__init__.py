"""Runnable example pipelines for the emitter (the README demo and the end-to-end test)."""
