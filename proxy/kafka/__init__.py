"""The Kafka client code the proxy's destinations and the consumers share: the producer,
record keys, the order stamp, replica checks and the client's logs."""
