"""Decisions of a database's instances as a group: replication, failover and switchover (with the pooler's pause
around a switchover), rolling restarts, the operator's own template rollouts, hibernation. Pure, as all of
decide/."""
