"""Spark jobs over the proxy's archive (JSON Lines under ``dt=…/namespace=…/``).

:mod:`.compact` turns it into Parquet; :mod:`.graph` derives runs, dataset edges,
column-lineage edges and each run's merged facets. Both use only Spark and Hadoop APIs
for paths (``s3a://``, ``hdfs://`` and local paths alike) and no Python UDFs, so they run
unchanged under ``spark-submit`` on a cluster: ship the package with ``--py-files``.
"""
