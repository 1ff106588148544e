"""What the tests share: paths and per-worker directories (paths.py), ports of this
worker (ports.py), one sync and one async ``wait_for`` (waiting.py), processes started
as users start them (processes.py), Apache Kafka clusters (kafka_cluster.py), independent
Kafka readers (kafka_reader.py), client loads and their comparison with what landed
(load.py), a metrics scraper (metrics.py), the proxy configuration tests start from
(proxies.py), the two tiers and the plugin that marks the full one (tiers.py), the
events tests send (sample_events.py, client_events.py), certificates, config files and
their errors, the fault tests' figures (figures.py) and small disks (small_disk.py), and
the doubles of targets that cannot run here (doubles/). Tests import helpers from here
only; helpers that serve one folder's tests alone (the Spark side-by-side jobs in
tests/spark/, the Flink job in tests/flink/) stay beside those tests.

Under pytest-xdist every worker is a process of its own with its own broker, ports and
directories (workers.py); nothing here is shared between workers but the figures
directory the controller prints from (tests/support/figures.py)."""
