"""The server process: serve, workers under one supervisor, shutdown, the embedded broker."""
