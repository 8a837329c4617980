"""--test-hooks: a SampleDB's testing.sampledb.io/ annotations reach its Jobs' pods only when the operator is
started with it; without it the reconcilers hand decide/ the SampleDB without them."""

from __future__ import annotations

from tests.support.fake_cluster import FakeCluster, sampledb

from sampledb_operator.decide import jobs
from sampledb_operator.model.sampledb import SampleDB

FAIL = {"testing.sampledb.io/fail": "backup", "sampledb.io/restart": "now"}


def test_without_test_annotations_keeps_every_other_annotation() -> None:
    db = SampleDB.model_validate(sampledb(annotations=FAIL))
    stripped = jobs.without_test_annotations(db)
    assert stripped.metadata.annotations == {"sampledb.io/restart": "now"}
    assert db.metadata.annotations == FAIL  # the cached object is left as it is
    plain = SampleDB.model_validate(sampledb(annotations={"sampledb.io/restart": "now"}))
    assert jobs.without_test_annotations(plain) is plain


def test_the_hooks_reach_the_jobs_pods_only_when_turned_on() -> None:
    cluster = FakeCluster()
    db = SampleDB.model_validate(sampledb(annotations=FAIL))
    assert not cluster.ctx.test_hooks  # off by default
    off = jobs.job(cluster.ctx.for_jobs(db), name="orders-backup-1", component="backup", script="backup.sh")
    assert "testing.sampledb.io/fail" not in (off["spec"]["template"]["metadata"].get("annotations") or {})
    cluster.ctx.test_hooks = True
    on = jobs.job(cluster.ctx.for_jobs(db), name="orders-backup-1", component="backup", script="backup.sh")
    assert on["spec"]["template"]["metadata"]["annotations"]["testing.sampledb.io/fail"] == "backup"
