"""Real servers the tests start themselves (built once into a cache outside git)."""
