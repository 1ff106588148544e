"""The Kafka destination: the producer's topic writer and its on-disk spool for outages."""
