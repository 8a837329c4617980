"""Sharding of SampleDBs across operator replicas: the shard of a key and the rebalancing decision.

Pure (no I/O, no clock: times come in as seconds of the observer's monotonic clock, in model/sharding.py's
ShardView). runtime/shards.py reads and writes the Leases and calls plan_shards every retry period.

Invariants:
- shard_of is stable across processes, Python versions and hash seeds: sha256 of "namespace/name", the
  first 8 bytes big-endian, mod shards (never Python's hash(), which is salted per process).
- plan_shards, for one member's view: every held shard is in exactly one of renew, release or drop; take
  is disjoint from held; renew + take never exceed the fair share ceil(shards / members), and a member
  releases only what is above it; a shard is taken only when its record is known and free (no holder,
  or released), names us, or has not changed for its leaseDurationSeconds (expired): a valid lease of
  another holder is never taken. A held shard whose record names another valid holder is dropped
  (lost). Exclusivity between members comes from the Lease writes (PUT with resourceVersion); this
  function only never asks for a valid foreign lease.
- Which shards a member keeps, releases or takes follows a per-member rendezvous ranking (sha256 of
  "identity/shard"), so concurrent members mostly want different shards and the choice is stable.
- Buckets (the shard-filtered caches): bucket_of is the same hash mod BUCKETS (60), whatever --shards is;
  every child carries its database's bucket in BUCKET_LABEL (objects shared by the databases of a
  namespace carry SHARED_BUCKET). When shards divides BUCKETS (filterable), bucket_of(k) mod shards ==
  shard_of(k, shards) for every key, so the buckets of a set of shards name exactly their databases'
  children, and a server-side selector `BUCKET_LABEL in (...)` (bucket_selector) watches them alone.
- A SampleDB carries its own bucket in BUCKET_LABEL too (set by its first pass, with the finalizer); one
  without a valid value (no label, or one that is not a bucket: is_bucket) is what unbucketed_selector
  selects, and every replica caches those, so none is missed before its label is set.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterable

from sampledb_operator.model.sharding import ShardPlan, ShardRecord, ShardView

__all__ = ["BUCKETS", "BUCKET_LABEL", "SHARED_BUCKET", "ShardPlan", "ShardRecord", "ShardView", "available",
           "bucket_of", "bucket_selector", "buckets_of", "fair_share", "filterable", "is_bucket", "plan_shards",
           "rank", "shard_of", "unbucketed_selector"]

BUCKETS = 60                        # fixed: divisible by 1-6, 10, 12, 15, 20, 30 and 60 shards
BUCKET_LABEL = "sampledb.io/bucket"
SHARED_BUCKET = "shared"            # the bucket of what no single database owns (the scripts ConfigMap)


def _hash(namespace: str, name: str) -> int:
    """The first 8 bytes of sha256("namespace/name")."""
    return int.from_bytes(hashlib.sha256(f"{namespace}/{name}".encode()).digest()[:8], "big")


def shard_of(namespace: str, name: str, shards: int) -> int:
    """The shard (0 .. shards-1) of the object namespace/name."""
    if shards < 1:
        raise ValueError("shards must be >= 1")
    return _hash(namespace, name) % shards


def bucket_of(namespace: str, name: str) -> int:
    """The bucket (0 .. BUCKETS-1) of the database namespace/name: the value its children's BUCKET_LABEL holds."""
    return _hash(namespace, name) % BUCKETS


def filterable(shards: int) -> bool:
    """Whether the buckets split exactly along `shards` shards (shards divides BUCKETS), so a replica may
    watch only its shards' children."""
    return shards >= 1 and BUCKETS % shards == 0


def buckets_of(shards_held: Iterable[int], shards: int) -> list[str]:
    """The BUCKET_LABEL values of the children of `shards_held` (of `shards`), the shared bucket first."""
    if not filterable(shards):
        raise ValueError(f"{shards} shards do not divide {BUCKETS} buckets")
    held = set(shards_held)
    return [SHARED_BUCKET] + [str(b) for b in range(BUCKETS) if b % shards in held]


def bucket_selector(base: str | None, shards_held: Iterable[int], shards: int) -> str:
    """`base` narrowed to the children of `shards_held`: base,BUCKET_LABEL in (shared,...) (no base: the
    bucket term alone). With no shard held it still names the shared bucket (a set-based selector needs one
    value at least)."""
    term = f"{BUCKET_LABEL} in ({','.join(buckets_of(shards_held, shards))})"
    return f"{base},{term}" if base else term


def is_bucket(value: str | None) -> bool:
    """Whether `value` is a database's bucket (a BUCKET_LABEL value "0" .. "59", as bucket_of gives it)."""
    return (value is not None and value.isascii() and value.isdigit() and str(int(value)) == value
            and int(value) < BUCKETS)


def unbucketed_selector(base: str | None = None) -> str:
    """The selector of the objects `base` selects whose BUCKET_LABEL is not a bucket: none at all, or any other
    value (the API server's `notin` matches an object without the key too)."""
    term = f"{BUCKET_LABEL} notin ({','.join(str(b) for b in range(BUCKETS))})"
    return f"{base},{term}" if base else term


def fair_share(shards: int, members: int) -> int:
    """The most shards one member may hold: ceil(shards / members) (members counted at least 1)."""
    return math.ceil(shards / max(1, members))


def rank(identity: str, shard: int) -> bytes:
    """The rendezvous rank of a shard for a member: lower is preferred."""
    return hashlib.sha256(f"{identity}/{shard}".encode()).digest()


def _by_rank(identity: str, shards: Iterable[int]) -> list[int]:
    return sorted(shards, key=lambda s: rank(identity, s))


def available(record: ShardRecord, me: str) -> bool:
    """A shard we may try to acquire: free, released, ours, or expired."""
    return record.holder in ("", me) or record.expired


def plan_shards(view: ShardView) -> ShardPlan:
    """Which shards to take, renew, release or drop, keeping at most the fair share."""
    share = fair_share(view.shards, view.members)
    held = {s for s in view.held if 0 <= s < view.shards}
    drop = sorted(s for s in held if (r := view.records.get(s)) is not None and not available(r, view.me))
    keep = _by_rank(view.me, held - set(drop))
    renew, release = keep[:share], keep[share:]
    candidates = [s for s in range(view.shards)
                  if s not in held and (r := view.records.get(s)) is not None and available(r, view.me)]
    # our own records first (a restart with the same identity), then by our ranking
    candidates.sort(key=lambda s: (view.records[s].holder != view.me, rank(view.me, s)))
    take = candidates[:max(0, share - len(renew))]
    return ShardPlan(share=share, take=tuple(sorted(take)), renew=tuple(sorted(renew)),
                     release=tuple(sorted(release)), drop=tuple(drop))
