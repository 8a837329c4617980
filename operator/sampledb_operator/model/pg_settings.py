"""PostgreSQL settings that only a server restart applies (pg_settings.context = 'postmaster').

Pure data. The list is the union over the majors the operator runs (15 to 18), taken from
`postgres --describe-config` of 15 and 18 plus the 16/17 additions (reserved_connections,
debug_io_direct, the SLRU buffer sizes and max_notify_queue_pages of 17). A setting that is
postmaster-context in any supported major is listed (autovacuum_max_workers: postmaster in 15-17,
sighup in 18), so a change of it always restarts the pod. Every other setting (sighup, superuser,
user, backend, ...) is applied by a reload; a `backend`-context setting reaches new sessions only.
"""

from __future__ import annotations

POSTMASTER_PARAMETERS: frozenset[str] = frozenset({
    "archive_mode", "autovacuum_freeze_max_age", "autovacuum_max_workers",
    "autovacuum_multixact_freeze_max_age", "autovacuum_worker_slots", "bonjour", "bonjour_name",
    "cluster_name", "commit_timestamp_buffers", "config_file", "data_directory", "data_sync_retry",
    "debug_io_direct", "dynamic_shared_memory_type", "event_source", "external_pid_file", "hba_file",
    "hot_standby", "huge_page_size", "huge_pages", "ident_file", "io_max_combine_limit",
    "io_max_concurrency", "io_method", "jit_provider", "listen_addresses", "logging_collector",
    "max_active_replication_origins", "max_connections", "max_files_per_process",
    "max_locks_per_transaction", "max_logical_replication_workers", "max_notify_queue_pages",
    "max_pred_locks_per_transaction", "max_prepared_transactions", "max_replication_slots",
    "max_wal_senders", "max_worker_processes", "min_dynamic_shared_memory", "multixact_member_buffers",
    "multixact_offset_buffers", "notify_buffers", "old_snapshot_threshold", "port", "recovery_target",
    "recovery_target_action", "recovery_target_inclusive", "recovery_target_lsn", "recovery_target_name",
    "recovery_target_time", "recovery_target_timeline", "recovery_target_xid", "reserved_connections",
    "serializable_buffers", "shared_buffers", "shared_memory_type", "shared_preload_libraries",
    "subtransaction_buffers", "superuser_reserved_connections", "track_activity_query_size",
    "track_commit_timestamp", "transaction_buffers", "unix_socket_directories", "unix_socket_group",
    "unix_socket_permissions", "wal_buffers", "wal_decode_buffer_size", "wal_level", "wal_log_hints",
})


def needs_restart(name: str) -> bool:
    """A change of `name` takes effect only when the server restarts (names are case-insensitive)."""
    return name.lower() in POSTMASTER_PARAMETERS
