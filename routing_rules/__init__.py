"""The rule language that decides where each event goes (YAML → compiled router)."""
