"""What every stage needs to know about an OpenLineage event, written once.

The proxy, the routing rules, the consumers and the Spark jobs all import from here:
the event-kind test (:mod:`.kinds`) and the Kafka message key (:mod:`.keys`).
"""

from proxy.openlineage.keys import event_key
from proxy.openlineage.kinds import EventKind, event_kind

__all__ = ["EventKind", "event_key", "event_kind"]
