"""What every stage needs to know about an OpenLineage event, written once.

The proxy, the routing rules, the consumers and the Spark jobs all import from here:
the event-kind test (:mod:`.kinds`), the Kafka message key (:mod:`.keys`) and the
names an event is about (:mod:`.names`).
"""

from proxy.openlineage.keys import event_key
from proxy.openlineage.kinds import EventKind, event_kind
from proxy.openlineage.names import subject_name

__all__ = ["EventKind", "event_key", "event_kind", "subject_name"]
