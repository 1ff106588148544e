"""Support code the tests share (runners of real components)."""
