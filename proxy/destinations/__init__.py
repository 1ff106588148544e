"""Where accepted events go. One module per kind; shared by the proxy and the consumers.

What each kind is configured with is :mod:`.config` (pure: no network or file code);
:mod:`.registry` builds a live destination from it, wrapped in :mod:`.retry` when the
config has a retry policy.

A destination's :meth:`deliver` is the promise: it returns only once the destination
holds the event (for Kafka: the delivery report with acks=all came back) and raises
:class:`DeliveryError` otherwise. The HTTP handler awaits it before answering 2xx.
"""

from proxy.destinations.base import (
    DeliveryError,
    Destination,
    TooLarge,
)

__all__ = ["DeliveryError", "Destination", "TooLarge"]
