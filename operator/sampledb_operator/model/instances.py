"""What a PostgreSQL instance says about itself (read by the operator over SQL), as a plain value.

Shared by the SQL client (pg/, which fills it) and the decisions (decide/replicas/replication.py, which read it).
LSNs are byte positions in the WAL (pg_lsn as an integer), so they compare and subtract directly.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class ServerState:
    """One server's answer: in recovery (a standby) or not (a primary), and how far its WAL goes."""

    in_recovery: bool
    current_lsn: int | None = None  # a primary's pg_current_wal_lsn()
    receive_lsn: int | None = None  # a standby's pg_last_wal_receive_lsn() (flushed to its disk)
    replay_lsn: int | None = None  # a standby's pg_last_wal_replay_lsn()
    timeline: int | None = None
    config_changed: bool = False  # its config file is newer than its last configuration load
    idle_slot: str | None = None  # a primary's inactive replication slot that holds the oldest WAL
    idle_slot_retained: int | None = None  # and the WAL it holds: bytes from its restart_lsn to the current LSN
    receiving: bool = False  # a standby whose WAL receiver streams from a primary (pg_stat_wal_receiver)

    @property
    def position(self) -> int:
        """How far this server's WAL goes: what a standby holds (received or replayed), a primary's current LSN."""
        if not self.in_recovery:
            return self.current_lsn or 0
        return max(self.receive_lsn or 0, self.replay_lsn or 0)


@dataclass(frozen=True, slots=True)
class LeaseRenewal:
    """A primary's lease renewed (pg/client.renew_lease), and what the server said with it."""

    watched: bool  # its self-fence runs (dataplane/self-fence.sh touched its file in the last 5 s)
    sender_timeout: float  # its wal_sender_timeout, seconds (0: WAL senders never time out)


def format_lsn(value: int | None) -> str | None:
    """An integer WAL position as PostgreSQL prints a pg_lsn (X/Y in hex)."""
    if value is None:
        return None
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


def parse_lsn(text: str) -> int:
    """A pg_lsn's text (X/Y in hex) as an integer."""
    high, low = text.split("/", 1)
    return (int(high, 16) << 32) | int(low, 16)
