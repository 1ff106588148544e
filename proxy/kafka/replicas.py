"""Why a replicated Kafka cluster refuses acks=all writes, in words for the operator.

With ``min.insync.replicas=2`` (the usual production setting), a partition whose in-sync
replicas have fallen below it makes the brokers answer every acks=all produce with
NOT_ENOUGH_REPLICAS. librdkafka retries that error silently until the message times out,
so the proxy would only see timeouts and spool; this asks the cluster (topic metadata and
the topic's ``min.insync.replicas``) so /readyz and the status page can say what is
wrong and what brings writes back. Tansu has no replication and never says this.
"""

from __future__ import annotations

from confluent_kafka.admin import AdminClient, ConfigResource, ResourceType

__all__ = ["replication_shortfall"]


def replication_shortfall(admin: AdminClient, topic: str, timeout: float = 2.0) -> str | None:
    """A sentence naming the partitions of ``topic`` with fewer in-sync replicas than its
    ``min.insync.replicas`` (None when there are none, or the cluster cannot say), asked
    through ``admin`` (``KafkaProducer.admin_client()``). Blocking: call from a thread."""
    try:
        # Every topic's metadata: asking for one topic creates it on a broker with
        # auto.create.topics.enable (this runs every second while Kafka does not confirm).
        metadata = admin.list_topics(timeout=timeout)
        resource = ConfigResource(ResourceType.TOPIC, topic)
        configs = admin.describe_configs([resource], request_timeout=timeout)[resource]
        entry = configs.result(timeout=timeout).get("min.insync.replicas")
    except Exception:
        return None
    described = metadata.topics.get(topic)
    if described is None or described.error is not None or entry is None or not entry.value:
        return None
    needed = int(entry.value)
    short = sorted(p.id for p in described.partitions.values() if len(p.isrs) < needed)
    if not short:
        return None
    fewest = min(len(described.partitions[p].isrs) for p in short)
    return (
        f"NOT_ENOUGH_REPLICAS: {len(short)} of {len(described.partitions)} partitions of "
        f"{topic} have {fewest} in-sync replica(s), min.insync.replicas is {needed}; "
        f"{len(metadata.brokers)} broker(s) registered. The brokers refuse acks=all "
        "writes until replicas return: bring the missing brokers back"
    )
