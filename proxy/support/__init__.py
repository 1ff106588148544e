"""What every layer uses: the config-model base, YAML with positions, secrets, TLS,
logging and small bounded structures."""
