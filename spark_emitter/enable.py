"""``enable_lineage(spark)``: the one call that makes a PySpark job emit OpenLineage.

Starts py4j's callback server (so the JVM can call Python), registers
:class:`~spark_emitter.listener.LineageListener` on the SparkContext, announces the
application run, and arranges that the application's COMPLETE goes out and the send queue
drains when Spark stops or, if the script never stops Spark, when Python exits.
"""

from __future__ import annotations

import atexit
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import quote_plus

from spark_emitter.buffer import DiskBuffer, default_buffer_directory
from spark_emitter.config import EmitterConfig, resolve_config
from spark_emitter.delivery import DeliveryStats, EventSender, open_client
from spark_emitter.events import (
    AppContext,
    ApplicationDetails,
    JobRef,
    TableCatalog,
    normalize_name,
)
from spark_emitter.listener import LineageListener
from spark_emitter.plan_reader import CatalogContext
from spark_emitter.run_ids import uuid7

__all__ = ["NOTHING_CONFIGURED", "LineageEmitter", "enable_lineage"]

log = logging.getLogger(__name__)

_SESSION_ATTRIBUTE = "_openlineage_emitter"
# Said (once per session) when lineage is asked for but has nowhere to go.
NOTHING_CONFIGURED = (
    "openlineage: no transport configured, so this Spark application emits NO lineage. "
    "Set OPENLINEAGE_URL (or spark.openlineage.transport.url, or an openlineage.yml) "
    "to send it."
)
# How long to let Spark's listener bus catch up at interpreter exit, before reporting the
# application's end (executions still queued there would otherwise come after it).
_BUS_DRAIN_MS = 10_000


class LineageEmitter:
    """Handle on an enabled emitter: its application run id, counters, and close()."""

    def __init__(self, spark: Any, listener: LineageListener, sender: EventSender) -> None:
        self._spark = spark
        self._listener = listener
        self._sender = sender

    @property
    def app_run_id(self) -> str:
        return self._listener.app.app_run_id

    @property
    def app_job(self) -> JobRef:
        return self._listener.app.application

    @property
    def stats(self) -> DeliveryStats:
        return self._sender.stats

    @property
    def callback_failures(self) -> int:
        return self._listener.failures

    def flush(self, timeout: float = 10.0) -> bool:
        """Wait until Spark has delivered pending listener events and they were sent."""
        self._wait_for_listener_bus(int(timeout * 1000))
        return self._sender.flush(timeout)

    def close(self) -> bool:
        """Report the application's end now (if Spark has not) and drain the queue."""
        if not self._listener.finished:
            self._wait_for_listener_bus(_BUS_DRAIN_MS)
        return self._listener.finish()

    def _wait_for_listener_bus(self, timeout_ms: int) -> None:
        try:
            self._spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty(timeout_ms)
        except Exception:  # JVM gone or bus stopped: nothing left to wait for
            log.debug("openlineage: listener bus not drained", exc_info=True)


def _catalog_context(spark: Any) -> CatalogContext:
    jvm = spark.sparkContext._jvm
    hadoop_conf = spark.sparkContext._jsc.hadoopConfiguration()
    warehouse_path = jvm.org.apache.hadoop.fs.Path(spark.conf.get("spark.sql.warehouse.dir"))
    warehouse = str(warehouse_path.getFileSystem(hadoop_conf).makeQualified(warehouse_path))
    metastore = None
    if spark.conf.get("spark.sql.catalogImplementation", "in-memory") == "hive":
        metastore = hadoop_conf.get("hive.metastore.uris") or None
    return CatalogContext(spark._jsparkSession, metastore, warehouse)


def _application_details(spark: Any, conf: Mapping[str, str]) -> ApplicationDetails:
    """What the official ``spark_applicationDetails`` facet says of this application
    (its ``proxyUrl`` and ``historyUrl`` only when YARN's or the reverse proxy's are set)."""
    context = spark.sparkContext
    app_id = str(context.applicationId)
    proxy = conf.get(
        "spark.org.apache.hadoop.yarn.server.webproxy.amfilter.AmIpFilter.param.PROXY_URI_BASES"
    )
    if proxy is None and conf.get("spark.ui.reverseProxy") == "true":
        base = conf.get("spark.ui.reverseProxyUrl")
        proxy = f"{base.rstrip('/')}/proxy/{quote_plus(app_id)}" if base else None
    history = conf.get("spark.yarn.historyServer.address")
    if history is not None:
        history = history if history.startswith("http") else f"http://{history}"
        history = f"{history.rstrip('/')}/history/{quote_plus(app_id)}"
    return ApplicationDetails(
        master=str(context.master),
        app_name=str(context.appName),
        application_id=app_id,
        deploy_mode=conf.get("spark.submit.deployMode", "client"),
        user_name=str(context.sparkUser()),
        driver_host=conf.get("spark.driver.host"),
        ui_web_url=context.uiWebUrl,
        proxy_url=proxy,
        history_url=history,
    )


def _table_catalog(spark: Any, catalog: CatalogContext) -> TableCatalog:
    implementation = spark.conf.get("spark.sql.catalogImplementation", "in-memory")
    return TableCatalog(
        name="spark_catalog",
        type=implementation,
        framework="hive" if implementation == "hive" else "spark",
        metadata_uri=catalog.metastore_uri,
        warehouse_uri=catalog.warehouse,
    )


def _app_context(
    spark: Any, config: EmitterConfig, conf: Mapping[str, str], catalog: CatalogContext
) -> AppContext:
    parent = root = None
    if config.parent_namespace and config.parent_name and config.parent_run_id:
        parent = JobRef(config.parent_namespace, config.parent_name, config.parent_run_id)
    if config.root_namespace and config.root_name and config.root_run_id:
        root = JobRef(config.root_namespace, config.root_name, config.root_run_id)
    return AppContext(
        namespace=config.namespace,
        app_name=normalize_name(config.app_name or spark.sparkContext.appName),
        app_run_id=uuid7(),
        spark_version=spark.version,
        spark_properties={k: conf[k] for k in config.captured_properties if k in conf},
        parent=parent,
        root=root,
        append_dataset_name=config.append_dataset_name,
        report_read_only_actions=config.report_read_only_actions,
        dataset_lineage=config.dataset_lineage_enabled,
        details=_application_details(spark, conf),
        catalog=_table_catalog(spark, catalog),
    )


def _disk_buffer(config: EmitterConfig, owner: str) -> DiskBuffer | None:
    """Where undelivered events wait; None when switched off or the directory is unusable
    (the job goes on without it, and says so)."""
    if not config.buffer_enabled:
        return None
    directory = Path(config.buffer_directory or default_buffer_directory())
    try:
        return DiskBuffer(directory, owner, config.buffer_max_bytes)
    except OSError as error:
        log.warning("openlineage: no disk buffer, events the proxy misses are lost: %s", error)
        return None


def enable_lineage(
    spark: Any,
    *,
    url: str | None = None,
    namespace: str | None = None,
    api_key: str | None = None,
    endpoint: str | None = None,
    timeout: float | None = None,
    app_name: str | None = None,
    report_read_only_actions: bool | None = None,
    dataset_lineage_enabled: bool | None = None,
    environ: Mapping[str, str] | None = None,
) -> LineageEmitter | None:
    """Make ``spark`` emit OpenLineage events; returns None when disabled or when no
    transport is configured.

    ``url`` (with ``endpoint``, ``api_key``, ``timeout``) makes an http transport; left out,
    the transport comes from Spark conf (``spark.openlineage.transport.*``) or, with none
    there, from the openlineage-python client's own configuration (``openlineage.yml``,
    ``OPENLINEAGE_URL``…); the rest from ``spark.openlineage.*`` or ``OPENLINEAGE_NAMESPACE``.
    See :mod:`spark_emitter.config`. Calling it again on the same session returns the same
    emitter.
    """
    existing: LineageEmitter | None = getattr(spark, _SESSION_ATTRIBUTE, None)
    if existing is not None:
        return existing
    from pyspark.java_gateway import ensure_callback_server_started

    conf = dict(spark.sparkContext.getConf().getAll())
    config = resolve_config(
        conf,
        os.environ if environ is None else environ,
        {
            "url": url,
            "namespace": namespace,
            "api_key": api_key,
            "endpoint": endpoint,
            "timeout": timeout,
            "app_name": app_name,
            "report_read_only_actions": report_read_only_actions,
            "dataset_lineage_enabled": dataset_lineage_enabled,
        },
    )
    client = None if config.disabled else open_client(config.transport)
    if client is None:
        if config.disabled:
            log.info("openlineage: disabled (spark.openlineage.disabled / OPENLINEAGE_DISABLED)")
        else:
            log.warning(NOTHING_CONFIGURED)
        return None
    catalog = _catalog_context(spark)
    app = _app_context(spark, config, conf, catalog)
    sender = EventSender(
        client,
        queue_size=config.queue_size,
        buffer=_disk_buffer(config, app.app_run_id),
        retry_interval=config.buffer_retry_interval,
    )
    listener = LineageListener(
        app,
        sender,
        catalog,
        spark.sparkContext._jvm,
        config.drain_timeout,
        config.running_interval,
    )
    # py4j logs every call from the JVM at INFO: with the listener that is several lines
    # per Spark task. Quieted unless the application set py4j's level itself.
    py4j_log = logging.getLogger("py4j.clientserver")
    if py4j_log.level == logging.NOTSET:
        py4j_log.setLevel(logging.WARNING)
    ensure_callback_server_started(spark.sparkContext._gateway)
    listener.start(int(spark.sparkContext.startTime) or int(time.time() * 1000))
    spark.sparkContext._jsc.sc().addSparkListener(listener)
    emitter = LineageEmitter(spark, listener, sender)
    setattr(spark, _SESSION_ATTRIBUTE, emitter)
    # Registered after the SparkContext, so it runs before anything that stops the JVM.
    atexit.register(emitter.close)
    return emitter
