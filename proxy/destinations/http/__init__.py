"""HTTP delivery to lineage backends: one module per target kind, shared by the proxy's
routing ``http`` destination and the consumer daemons.

Each target module (generic, marquez, egeria, datahub) owns exactly its path, auth and how
success, retriable and permanent failure are told apart; :mod:`.destination` owns HTTP.
"""

from proxy.destinations.http.datahub import DataHubTarget
from proxy.destinations.http.destination import HttpDeliveryError, HttpDestination
from proxy.destinations.http.egeria import EgeriaTarget
from proxy.destinations.http.generic import GenericHttpTarget
from proxy.destinations.http.marquez import MarquezTarget
from proxy.destinations.http.target import BasicAuth, BearerAuth, HttpTarget, Verdict
from proxy.destinations.http.targets import TARGETS, HttpTargetConfig, http_destination

__all__ = [
    "TARGETS",
    "BasicAuth",
    "BearerAuth",
    "DataHubTarget",
    "EgeriaTarget",
    "GenericHttpTarget",
    "HttpDeliveryError",
    "HttpDestination",
    "HttpTarget",
    "HttpTargetConfig",
    "MarquezTarget",
    "Verdict",
    "http_destination",
]
