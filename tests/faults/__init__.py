"""Shared tools for fault tests: load from many clients, what landed, printed figures."""
