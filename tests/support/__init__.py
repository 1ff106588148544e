"""Code tests share: brokers and clusters, processes, readers, loads."""
