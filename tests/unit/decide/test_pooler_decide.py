"""spec.pooler -> PgBouncer's pgbouncer.ini, Deployment and Service: what they hold, what they never hold."""

from __future__ import annotations

import configparser
from typing import Any

from sampledb_operator.decide import plan
from sampledb_operator.decide.children import desired as d
from sampledb_operator.decide.children import pooler as dp
from sampledb_operator.decide.children.desired_inputs import Inputs
from sampledb_operator.model import names
from sampledb_operator.model.pooler import DEFAULT_IMAGE, POOLER_ROLE
from sampledb_operator.model.sampledb import SampleDB


def make_db(pooler: dict[str, Any] | None = None, **spec: Any) -> SampleDB:
    body: dict[str, Any] = {"version": "16.4", "storage": {"size": "1Gi"}, **spec}
    if pooler is not None:
        body["pooler"] = pooler
    return SampleDB.model_validate({"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                    "metadata": {"name": "orders", "namespace": "shop", "uid": "uid-1"},
                                    "spec": body})


def parsed(db: SampleDB, *, ca: bool = True) -> configparser.ConfigParser:
    ini = configparser.ConfigParser(interpolation=None)
    ini.read_string(dp.ini(db, ca=ca))
    return ini


def test_the_ini_sends_every_database_to_the_primary_and_asks_the_server_for_each_login() -> None:
    ini = parsed(make_db({"mode": "transaction", "defaultPoolSize": 7, "maxClientConnections": 300}))
    assert ini["databases"]["*"] == "host=orders.shop.svc port=5432"
    bouncer = ini["pgbouncer"]
    assert (bouncer["pool_mode"], bouncer["default_pool_size"], bouncer["max_client_conn"]) == ("transaction", "7",
                                                                                               "300")
    assert bouncer["auth_type"] == "scram-sha-256" and bouncer["auth_user"] == POOLER_ROLE
    assert bouncer["auth_dbname"] == "postgres"
    assert bouncer["auth_query"] == "SELECT usename, passwd FROM sampledb_pooler.lookup($1)"
    assert bouncer["auth_file"] == "/etc/pgbouncer-auth/userlist.txt"
    assert bouncer["server_tls_sslmode"] == "verify-full" and bouncer["server_tls_ca_file"].endswith("/ca.crt")
    assert bouncer["unix_socket_dir"] == "" and bouncer["admin_users"] == POOLER_ROLE  # PAUSE/RESUME


def test_without_tls_the_server_is_reached_in_clear_and_parameters_come_last() -> None:
    db = make_db({"parameters": {"server_idle_timeout": "30", "query_timeout": "5"}}, tls={"enabled": False})
    bouncer = parsed(db, ca=False)["pgbouncer"]
    assert bouncer["server_tls_sslmode"] == "disable" and "server_tls_ca_file" not in bouncer
    assert (bouncer["server_idle_timeout"], bouncer["query_timeout"]) == ("30", "5")
    assert list(bouncer)[-2:] == ["query_timeout", "server_idle_timeout"]


def test_the_userlist_holds_the_pooler_roles_line_only() -> None:
    assert dp.userlist('a"b') == '"sampledb_pooler" "a""b"\n'


def test_the_deployment_mounts_what_the_ini_names_and_rolls_when_it_changes() -> None:
    db = make_db({"instances": 3})
    dep = dp.deployment(db, ca=True)
    spec = dep["spec"]
    assert spec["replicas"] == 3 and spec["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    pod = spec["template"]["spec"]
    container, _exporter = pod["containers"]
    assert container["image"] == DEFAULT_IMAGE and container["command"] == ["pgbouncer", "/etc/pgbouncer/pgbouncer.ini"]
    mounts = {m["mountPath"]: m["name"] for m in container["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/pgbouncer"]]["configMap"]["name"] == names.pooler_name("orders")
    assert volumes[mounts["/etc/pgbouncer-auth"]]["secret"]["secretName"] == names.pooler_name("orders")
    assert volumes[mounts["/etc/pgbouncer-ca"]]["configMap"]["name"] == names.configmap_name("orders")
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    other = dp.deployment(make_db({"instances": 3, "mode": "statement"}), ca=True)
    assert other["spec"]["template"]["metadata"]["annotations"] != spec["template"]["metadata"]["annotations"]
    assert dp.deployment(make_db({"instances": 3, "image": "localhost/pgb:1.24"}), ca=True)[
        "spec"]["template"]["spec"]["containers"][0]["image"] == "localhost/pgb:1.24"


def test_the_service_selects_the_pooler_pods_not_the_database() -> None:
    db = make_db({})
    svc = dp.service(db)
    assert svc["spec"]["selector"] == dp.selector(db)
    assert svc["spec"]["selector"]["app.kubernetes.io/component"] == "pooler"


def test_the_children_come_with_spec_pooler_and_go_without_it() -> None:
    with_pooler = d.children(Inputs(make_db({}), {}, ca_cert="CA"))
    kinds = {(o["kind"], o["metadata"]["name"]) for o in with_pooler}
    pooler = names.pooler_name("orders")
    assert {("Deployment", pooler), ("Service", pooler), ("ConfigMap", pooler),
            ("PodDisruptionBudget", pooler)} <= kinds  # two pods by default: a drain takes one at a time
    observed = {plan.key_of(o): o for o in with_pooler}
    without = d.children(Inputs(make_db(), {}, ca_cert="CA"))
    removed = {r.key for r in plan.removals(without, observed)}
    assert removed == {("Deployment", pooler), ("Service", pooler), ("ConfigMap", pooler),
                       ("PodDisruptionBudget", pooler)}
    assert plan.removals(with_pooler, observed) == []
    one = d.children(Inputs(make_db({"instances": 1}), {}, ca_cert="CA"))
    assert {r.key for r in plan.removals(one, observed)} == {("PodDisruptionBudget", pooler)}


def deployment_status(generation: int, observed: int, ready: int, updated: int) -> dict[str, Any]:
    return {"metadata": {"generation": generation},
            "status": {"observedGeneration": observed, "readyReplicas": ready, "updatedReplicas": updated}}


def test_pooler_ready_needs_the_role_and_every_pod_of_the_current_template() -> None:
    db = make_db({"instances": 2})

    def reason(dep: dict[str, Any] | None, applied: bool = True) -> str | None:
        cond = dp.condition(db, dep, applied=applied, had=False)
        return None if cond is None else f"{cond.status}/{cond.reason}"

    assert reason(deployment_status(3, 3, 2, 2), applied=False) == "False/PoolerSetupPending"
    assert reason(None) == "False/PoolerNotReady"
    assert reason(deployment_status(3, 3, 1, 2)) == "False/PoolerNotReady"
    assert reason(deployment_status(3, 3, 2, 1)) == "False/PoolerNotReady"  # rolling: an old pod still serves
    assert reason(deployment_status(4, 3, 2, 2)) == "False/PoolerNotReady"  # the new template not seen yet
    assert reason(deployment_status(3, 3, 2, 2)) == "True/PoolerReady"
    gone = make_db()
    assert dp.condition(gone, None, applied=True, had=False) is None  # never asked: no condition
    cond = dp.condition(gone, None, applied=True, had=True)
    assert cond is not None and (cond.status, cond.reason) == ("False", "NotRequested")


def test_with_tls_the_pooler_serves_the_servers_certificate_and_requires_it_when_the_spec_does() -> None:
    prefer = parsed(make_db({}))["pgbouncer"]
    assert prefer["client_tls_sslmode"] == "prefer"
    assert prefer["client_tls_cert_file"] == "/etc/sampledb-tls/tls.crt"
    assert prefer["client_tls_key_file"] == "/etc/sampledb-tls/tls.key"
    assert parsed(make_db({}, tls={"required": True}))["pgbouncer"]["client_tls_sslmode"] == "require"
    assert "client_tls_sslmode" not in parsed(make_db({}, tls={"enabled": False}), ca=False)["pgbouncer"]
    pod = dp.deployment(make_db({}, tls={"secretName": "mine"}), ca=True)["spec"]["template"]["spec"]
    mounts = {m["mountPath"]: m["name"] for m in pod["containers"][0]["volumeMounts"]}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts["/etc/sampledb-tls"]]["secret"]["secretName"] == "mine"


def test_the_certificate_names_the_poolers_service_only_with_a_pooler() -> None:
    from sampledb_operator.decide.children import tls

    assert "orders-pooler.shop.svc" in tls.dns_names("orders", "shop", pooler=True)
    assert not any("pooler" in n for n in tls.dns_names("orders", "shop"))


def test_a_new_certificate_rolls_the_pooler_pods() -> None:
    db = make_db({})
    one = dp.children(db, ca=True, certificate="aaaa")[1]["spec"]["template"]["metadata"]["annotations"]
    two = dp.children(db, ca=True, certificate="bbbb")[1]["spec"]["template"]["metadata"]["annotations"]
    assert one[dp.CERTIFICATE_ANNOTATION] == "aaaa" and one != two
    plain = dp.children(make_db({}, tls={"enabled": False}), ca=False, certificate="aaaa")[1]
    assert dp.CERTIFICATE_ANNOTATION not in plain["spec"]["template"]["metadata"]["annotations"]


def test_the_pooler_pods_run_its_exporter_with_the_roles_password_from_the_secret_not_in_arguments() -> None:
    from sampledb_operator.decide.children import exporter
    from sampledb_operator.model.monitoring import DEFAULT_POOLER_EXPORTER_IMAGE, POOLER_EXPORTER_PORT

    for tls_on, sslmode in ((True, "require"), (False, "disable")):
        db = make_db({}, tls={"enabled": tls_on})
        _pgbouncer, sidecar = dp.deployment(db, ca=tls_on)["spec"]["template"]["spec"]["containers"]
        assert sidecar["image"] == DEFAULT_POOLER_EXPORTER_IMAGE and "command" not in sidecar
        assert sidecar["ports"] == [{"name": exporter.PORT_NAME, "containerPort": POOLER_EXPORTER_PORT,
                                     "protocol": "TCP"}]
        [url] = [a.split("=", 1)[1] for a in sidecar["args"] if a.startswith("--pgBouncer.connectionString=")]
        assert url == (f"postgres://{POOLER_ROLE}@127.0.0.1:5432/pgbouncer?sslmode={sslmode}&connect_timeout=5")
        assert sidecar["env"] == [{"name": "PGPASSWORD", "valueFrom": {"secretKeyRef": {
            "name": names.pooler_name("orders"), "key": dp.PASSWORD_KEY}}}]
        assert f"admin_users = {POOLER_ROLE}\n" in dp.ini(db, ca=tls_on)  # PAUSE/RESUME (decide/replicas/pooler_pause)
        assert f"stats_users = {POOLER_ROLE}\n" in dp.ini(db, ca=tls_on)
    off = dp.deployment(make_db({}, monitoring={"enabled": False, "poolerImage": "example.org/e:1"}), ca=True)
    assert [c["name"] for c in off["spec"]["template"]["spec"]["containers"]] == ["pgbouncer"]


def test_the_pooler_containers_resources_come_from_the_spec_or_the_defaults() -> None:
    def resources(pooler: dict[str, Any]) -> Any:
        return dp.deployment(make_db(pooler), ca=True)["spec"]["template"]["spec"]["containers"][0]["resources"]

    assert resources({}) == {"requests": {"cpu": "50m", "memory": "32Mi"}}
    assert resources({"resources": {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}}) \
        == {"requests": {"cpu": "100m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
    assert resources({"resources": {"limits": {"cpu": "1"}}}) == {"limits": {"cpu": "1"}}


def test_the_read_only_pooler_needs_standbys_and_neither_service_selects_the_others_pods() -> None:
    one = make_db({"readOnlyInstances": 2})
    assert not dp.read_only_wanted(one)  # no standbys: no -ro Service to send it to
    assert {o["metadata"]["name"] for o in dp.children(one, ca=True)} == {names.pooler_name("orders")}
    db = make_db({"instances": 1, "readOnlyInstances": 2}, replicas=3)
    kinds = {(o["kind"], o["metadata"]["name"]) for o in dp.children(db, ca=True)}
    ro = names.read_only_pooler_name("orders")
    assert {("ConfigMap", ro), ("Deployment", ro), ("Service", ro), ("PodDisruptionBudget", ro)} <= kinds
    assert ("PodDisruptionBudget", names.pooler_name("orders")) not in kinds  # one read-write pod: no budget
    rw_pods = dp.deployment(db, ca=True)["spec"]["template"]["metadata"]["labels"]
    ro_pods = dp.deployment(db, ca=True, read_only=True)["spec"]["template"]["metadata"]["labels"]
    assert dp.service(db)["spec"]["selector"].items() <= rw_pods.items()
    assert not dp.service(db)["spec"]["selector"].items() <= ro_pods.items()
    assert dp.service(db, True)["spec"]["selector"].items() <= ro_pods.items()
    assert not dp.service(db, True)["spec"]["selector"].items() <= rw_pods.items()
    ro_ini = configparser.ConfigParser(interpolation=None)
    ro_ini.read_string(dp.ini(db, ca=True, read_only=True))
    assert ro_ini["databases"]["*"] == f"host={names.replica_service_name('orders')}.shop.svc port=5432"
    assert parsed(db)["databases"]["*"] == "host=orders.shop.svc port=5432"


def test_pooler_ready_waits_for_both_poolers() -> None:
    db = make_db({"instances": 2, "readOnlyInstances": 1}, replicas=2)

    def dep(ready: int) -> dict[str, Any]:
        return {"metadata": {"generation": 1}, "status": {"observedGeneration": 1, "updatedReplicas": ready,
                                                          "readyReplicas": ready}}

    waiting = dp.condition(db, dep(2), applied=True, had=True, read_only=None)
    assert waiting is not None and waiting.reason == dp.NOT_READY and names.read_only_pooler_name("orders") in \
        waiting.message
    ready = dp.condition(db, dep(2), applied=True, had=True, read_only=dep(1))
    assert ready is not None and ready.status == "True" and names.read_only_pooler_name("orders") in ready.message


def test_the_certificate_names_the_read_only_poolers_service_only_when_it_runs() -> None:
    from sampledb_operator.decide.children import tls

    assert "orders-pooler-ro.shop.svc" not in tls.dns_names("orders", "shop", pooler=True)
    assert "orders-pooler-ro.shop.svc" in tls.dns_names("orders", "shop", pooler=True, read_only_pooler=True)
    assert "orders-pooler-ro.shop.svc" not in tls.dns_names("orders", "shop", read_only_pooler=True)
