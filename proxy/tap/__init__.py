"""``lineage-proxy tap``: watch accepted events as they pass (like ``vector tap``).

:mod:`.hub` holds the subscribers and is what the delivery pipeline publishes to (one
cheap check per event when nobody listens); :mod:`proxy.web.tap_endpoint` streams a subscriber's
events as Server-Sent Events on ``GET /api/v1/tap``; :mod:`.client` is the CLI side.
"""
