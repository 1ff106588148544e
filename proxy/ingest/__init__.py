"""One event's way in, free of HTTP: authorize, validate and repair, route, deliver."""
