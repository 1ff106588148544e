"""The proxy's configuration: config.yaml's typed model and its generated reference."""
