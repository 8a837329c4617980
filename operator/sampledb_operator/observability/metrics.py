"""Every Prometheus metric the operator exports, on one registry.

Names and labels of the controller-runtime and workqueue families match controller-runtime's,
so existing Grafana dashboards work. This module imports nothing from the rest of the package;
every other layer may import it. Label values known up front are pre-initialised to 0 by
`init_controller` / `init_queue` so that rate() and absent() behave from the first scrape.
"""

from __future__ import annotations

from prometheus_client import (
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    PlatformCollector,
    ProcessCollector,
    disable_created_metrics,
)

# controller-runtime exports no *_created series; neither do we (it also halves the exposition).
disable_created_metrics()  # type: ignore[no-untyped-call]

REGISTRY = CollectorRegistry(auto_describe=True)
# process_* (CPU, resident memory, open fds, start time) and python_info, as controller-runtime's
# registry carries process_* and go_*: memory and restart alerts need them.
ProcessCollector(registry=REGISTRY)
PlatformCollector(registry=REGISTRY)

_RECONCILE_BUCKETS = (
    0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0,
    1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60,
)
_QUEUE_BUCKETS = tuple(10.0**e for e in range(-8, 4))  # 1e-8 .. 1e3, as client-go's workqueue metrics

# controller-runtime: controller
reconcile_total = Counter(
    "controller_runtime_reconcile_total",
    "Total number of reconciliations per controller",
    ["controller", "result"],
    registry=REGISTRY,
)
reconcile_errors_total = Counter(
    "controller_runtime_reconcile_errors_total",
    "Total number of reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
terminal_reconcile_errors_total = Counter(
    "controller_runtime_terminal_reconcile_errors_total",
    "Total number of terminal reconciliation errors per controller",
    ["controller"],
    registry=REGISTRY,
)
reconcile_time_seconds = Histogram(
    "controller_runtime_reconcile_time_seconds",
    "Length of time per reconciliation per controller",
    ["controller"],
    buckets=_RECONCILE_BUCKETS,
    registry=REGISTRY,
)
max_concurrent_reconciles = Gauge(
    "controller_runtime_max_concurrent_reconciles",
    "Maximum number of concurrent reconciles per controller",
    ["controller"],
    registry=REGISTRY,
)
active_workers = Gauge(
    "controller_runtime_active_workers",
    "Number of currently used workers per controller",
    ["controller"],
    registry=REGISTRY,
)

# client-go / controller-runtime: workqueue
workqueue_depth = Gauge("workqueue_depth", "Current depth of workqueue", ["name", "controller"], registry=REGISTRY)
workqueue_adds_total = Counter(
    "workqueue_adds_total", "Total number of adds handled by workqueue", ["name", "controller"], registry=REGISTRY
)
workqueue_retries_total = Counter(
    "workqueue_retries_total", "Total number of retries handled by workqueue", ["name", "controller"],
    registry=REGISTRY,
)
workqueue_queue_duration_seconds = Histogram(
    "workqueue_queue_duration_seconds",
    "How long in seconds an item stays in workqueue before being requested",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
workqueue_work_duration_seconds = Histogram(
    "workqueue_work_duration_seconds",
    "How long in seconds processing an item from workqueue takes",
    ["name", "controller"],
    buckets=_QUEUE_BUCKETS,
    registry=REGISTRY,
)
workqueue_unfinished_work_seconds = Gauge(
    "workqueue_unfinished_work_seconds",
    "How many seconds of work has been done that is in progress and hasn't been observed by "
    "work_duration. Large values indicate stuck threads.",
    ["name", "controller"],
    registry=REGISTRY,
)
workqueue_longest_running_processor_seconds = Gauge(
    "workqueue_longest_running_processor_seconds",
    "How many seconds has the longest running processor for workqueue been running.",
    ["name", "controller"],
    registry=REGISTRY,
)

# leader election and REST client
leader_election_master_status = Gauge(
    "leader_election_master_status",
    "Gauge of if the reporting system is master of the relevant lease, 0 indicates backup, 1 indicates master.",
    ["name"],
    registry=REGISTRY,
)
rest_client_requests_total = Counter(
    "rest_client_requests_total",
    "Number of HTTP requests, partitioned by status code, method, and host.",
    ["code", "method"],
    registry=REGISTRY,
)
rest_client_request_duration_seconds = Histogram(
    "rest_client_request_duration_seconds",
    "Request latency in seconds. Broken down by verb.",
    ["verb"],
    registry=REGISTRY,
)
api_requests_total = Counter(
    "sampledb_api_requests_total",
    "Requests to the API server by what they ask of RBAC: verb, API group, resource, subresource; and HTTP status.",
    ["verb", "group", "resource", "subresource", "code"],
    registry=REGISTRY,
)

# the operator's own
watch_restarts_total = Counter(
    "sampledb_watch_restarts_total",
    "Watch streams (re)opened, by resource and cause (expired, closed, error, silent)",
    ["resource", "cause"],
    registry=REGISTRY,
)
watch_relists_total = Counter(
    "sampledb_watch_relists_total", "Full lists of a resource (initial and after 410 Gone)", ["resource"],
    registry=REGISTRY,
)
caches_synced_timestamp_seconds = Gauge(
    "sampledb_caches_synced_timestamp_seconds",
    "Unix time at which every cache was synced (0 until then); minus process_start_time_seconds, how long a start"
    " took to know the cluster",
    registry=REGISTRY,
)
watch_events_total = Counter(
    "sampledb_watch_events_total", "Watch events received, by resource and type", ["resource", "type"],
    registry=REGISTRY,
)
cache_objects = Gauge("sampledb_cache_objects", "Objects held in the informer cache", ["resource"], registry=REGISTRY)

backups_total = Counter(
    "sampledb_backups_total", "Backups finished, by reason and result", ["reason", "result"], registry=REGISTRY
)
snapshot_duration_seconds = Histogram(
    "sampledb_snapshot_duration_seconds",
    "Pre-deletion snapshot duration, from Job creation to completion",
    registry=REGISTRY,
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
upgrade_duration_seconds = Histogram(
    "sampledb_upgrade_duration_seconds",
    "Version upgrade duration, by kind (minor, major)",
    ["kind"],
    registry=REGISTRY,
    buckets=(1, 5, 10, 30, 60, 120, 300, 600, 1800, 3600),
)
event_loop_lag_seconds = Gauge(
    "sampledb_event_loop_lag_seconds",
    "How much later than asked the last 1 s event-loop heartbeat woke up",
    registry=REGISTRY,
)

# the nodes' heartbeats (reconcilers/node_heartbeats.py)
silent_nodes = Gauge(
    "sampledb_silent_nodes",
    "Nodes whose kubelet has not renewed its heartbeat Lease for --node-silent-seconds (their primaries fail over)",
    registry=REGISTRY,
)
node_heartbeat_read_errors_total = Counter(
    "sampledb_node_heartbeat_read_errors_total",
    "Failed reads of the nodes' heartbeat Leases (kube-node-lease); failovers then wait for the node controller",
    registry=REGISTRY,
)

# sharding (--shards > 1; runtime/shards.py)
memory_trims_total = Counter(
    "sampledb_memory_trims_total",
    "Times the C heap's free pages were handed back to the system (malloc_trim, runtime/memory.py)",
    registry=REGISTRY,
)
shards_owned = Gauge(
    "sampledb_shards_owned",
    "Shards of the SampleDBs this replica owns (reconciles) now; 0 without sharding (--shards 1)",
    registry=REGISTRY,
)
shard_owned = Gauge(
    "sampledb_shard_owned", "1 for each shard this replica owns, 0 for the others (only with --shards > 1)",
    ["shard"], registry=REGISTRY,
)
shards_cached = Gauge(
    "sampledb_shards_cached",
    "Shards whose children this replica's shard-filtered caches have listed and watch (--shard-caches); a shard"
    " is reconciled only once it is owned and cached",
    registry=REGISTRY,
)
shard_members = Gauge(
    "sampledb_shard_members", "Live replicas this one sees in the shard members Lease (itself included)",
    registry=REGISTRY,
)
shard_transitions_total = Counter(
    "sampledb_shard_transitions_total",
    "Shard ownership changes of this replica: acquired, released (above its fair share, or on shutdown),"
    " lost (not renewed within the renew deadline, or another holder)",
    ["event"], registry=REGISTRY,
)
SHARD_EVENTS = ("acquired", "released", "lost")

RECONCILE_RESULTS = ("success", "error", "requeue", "requeue_after")
# every phase sampledb_databases{phase} exports (0 when none): observability.database_metrics
PHASES = ("Pending", "Provisioning", "Initializing", "Restoring", "Running", "Upgrading", "Migrating", "Degraded",
          "Paused", "Hibernated", "Deleting", "Failed")


def init_controller(controller: str, workers: int) -> None:
    """Pre-initialise every per-controller series to 0 (and the worker gauge to `workers`)."""
    for result in RECONCILE_RESULTS:
        reconcile_total.labels(controller=controller, result=result)
    reconcile_errors_total.labels(controller=controller)
    terminal_reconcile_errors_total.labels(controller=controller)
    reconcile_time_seconds.labels(controller=controller)
    max_concurrent_reconciles.labels(controller=controller).set(workers)
    active_workers.labels(controller=controller).set(0)


def init_shards(shards: int) -> None:
    """Pre-initialise the sharding series: every shard not owned, no transition yet."""
    shards_owned.set(0)
    for shard in range(shards):
        shard_owned.labels(shard=str(shard)).set(0)
    for event in SHARD_EVENTS:
        shard_transitions_total.labels(event=event)


def init_queue(name: str, controller: str) -> None:
    """Pre-initialise every workqueue series of one queue to 0."""
    for family in (workqueue_depth, workqueue_adds_total, workqueue_retries_total,
                   workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
                   workqueue_unfinished_work_seconds, workqueue_longest_running_processor_seconds):
        family.labels(name=name, controller=controller)


elections_total = Counter(
    "sampledb_elections_total",
    "Steps of the operator's primary elections: FailoverStarted, SwitchoverStarted, Promoted, FailoverRetargeted,"
    " UnexpectedPrimaryFenced",
    ["reason"],
    registry=REGISTRY,
)
ELECTION_REASONS = ("FailoverStarted", "SwitchoverStarted", "Promoted", "FailoverRetargeted", "UnexpectedPrimaryFenced",
                    "SelfFenceReleased")

primary_lease_renewals_total = Counter(
    "sampledb_primary_lease_renewals_total",
    "Renewals of the primaries' leases (a primary with standbys that hears neither the operator nor a standby for the"
    " lease's 45 s stops itself), by result: renewed, unwatched (its server runs no self-fence: a pod started"
    " before it existed), failed",
    ["result"],
    registry=REGISTRY,
)

storage_autogrowths_total = Counter(
    "sampledb_storage_autogrowths_total",
    "Growths of databases' data volumes asked by spec.storage.autoGrow",
    registry=REGISTRY,
)


def init_operator() -> None:
    """Pre-initialise the sampledb_* series whose label values are known."""
    for reason in ELECTION_REASONS:
        elections_total.labels(reason=reason)
    for reason in ("scheduled", "manual", "pre-delete", "pre-upgrade", "pre-migration"):
        for result in ("succeeded", "failed"):
            backups_total.labels(reason=reason, result=result)
    for kind in ("minor", "major"):
        upgrade_duration_seconds.labels(kind=kind)
    for result in ("renewed", "unwatched", "failed"):
        primary_lease_renewals_total.labels(result=result)
