"""The operator's status page: ``GET /`` (and ``/ui``) and the JSON it polls,
``GET /api/v1/status``.

Every figure comes from a place the proxy already keeps: the Prometheus registry of
:class:`~proxy.metrics.process.ProxyMetrics` (and the collectors registered in it: rules, spools,
tap, in-process consumers), destination health from :mod:`proxy.web.readiness`, and the
last refusals from :class:`~proxy.web.client_faults.ClientFaults`. :mod:`.rates` turns the
counters into per-minute rates over a sliding window; :mod:`.report` builds the JSON;
:mod:`.endpoints` serves it and the page (``page.html``, one static file).
"""
