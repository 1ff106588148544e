"""OpenLineage for PySpark jobs, with no JVM jar: ``enable_lineage(spark)``.

A Python Spark listener registered through py4j reads each SQL execution's plans and
sends the application's and each action's run events through a bounded background
queue (see :mod:`spark_emitter.enable`).
"""

from spark_emitter.config import ConfigurationError, EmitterConfig
from spark_emitter.enable import LineageEmitter, enable_lineage

__all__ = ["ConfigurationError", "EmitterConfig", "LineageEmitter", "enable_lineage"]
