"""Who may send what: bearer tokens and client certificates, each one's namespace scope, and
their configuration (the web layer reads the request, :mod:`proxy.web.principal`)."""
