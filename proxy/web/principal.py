"""Who sent a request: its Authorization header, or its verified client certificate
(the web layer's side of proxy/auth/, which knows no HTTP server)."""

from __future__ import annotations

from aiohttp import web

from proxy.auth.authenticator import Authenticator
from proxy.auth.principal import Principal
from proxy.support.request_errors import RequestError
from proxy.support.tls import client_common_name

__all__ = ["principal_of"]


def principal_of(authenticator: Authenticator, request: web.Request) -> Principal:
    """``request``'s principal; 400 for two Authorization headers (servers and proxies
    in front of them differ on which one counts, so neither is trusted)."""
    if authenticator.enabled and len(request.headers.getall("Authorization", ())) > 1:
        raise RequestError(
            400,
            "two Authorization headers",
            [
                {
                    "header": "Authorization",
                    "message": "send one: servers and proxies differ on which one counts",
                }
            ],
        )
    return authenticator.authenticate(
        request.headers.get("Authorization"), lambda: client_common_name(request.transport)
    )
