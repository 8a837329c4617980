"""Pods run for real: real containers, logs, exec, DNS, Services, volumes, exit codes, PostgreSQL.

On the local cluster these pods land on the real node (kubelet + containerd + runc, images built
offline by hack/build-images.sh); against $KUBECONFIG's cluster, on its nodes. Every assertion is
something only a running container produces: its output, its exit code, a file it wrote, an
answer over the network.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import shutil
import socket
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from tests.support import images
from tests.support.kube import kubeconfig, kubectl, kubectl_argv, kubectl_json, wait_until
from tests.support.pod_security import BUSYBOX_UID, POSTGRES_UID, restricted

pytestmark = pytest.mark.cluster

PG_PASSWORD = "test-" + secrets.token_hex(8)  # a throw-away password of a throw-away server


def apply(namespace: str, *objects: dict[str, Any]) -> None:
    kubectl("apply", "-n", namespace, "-f", "-", input=yaml.safe_dump_all(objects))


def pod(name: str, command: list[str], *, image: str = images.BUSYBOX, restart: str = "Never",
        **spec: Any) -> dict[str, Any]:
    uid = BUSYBOX_UID if image == images.BUSYBOX else POSTGRES_UID  # restricted: never root
    return {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
        "spec": restricted({"restartPolicy": restart, "terminationGracePeriodSeconds": 1,
                            "containers": [{"name": "main", "image": image, "command": command}], **spec}, uid),
    }


def phase(namespace: str, name: str) -> str:
    return str(kubectl_json("get", "pod", name, "-n", namespace).get("status", {}).get("phase", ""))


def wait_phase(namespace: str, name: str, *phases: str, timeout: float = 90) -> str:
    return wait_until(lambda: (p := phase(namespace, name)) in phases and p, timeout=timeout,
                      what=f"pod {name} in {phases}")


def wait_ready_pod(namespace: str, name: str, timeout: float = 120) -> None:
    """Wait for the pod to exist (a StatefulSet's controller may not have made it yet), then to be Ready."""
    kubectl("wait", "--for=create", "--for=condition=Ready", f"pod/{name}", "-n", namespace,
            f"--timeout={int(timeout)}s", timeout=timeout + 10)


def test_the_cluster_has_a_ready_node_that_runs_containers(cluster: object) -> None:
    nodes = kubectl_json("get", "nodes")["items"]
    real = [n for n in nodes if "kwok.x-k8s.io/node" not in n["metadata"].get("annotations", {})]
    assert real, "no node that runs containers"
    ready = [n for n in real
             if any(c["type"] == "Ready" and c["status"] == "True" for c in n["status"]["conditions"])]
    assert ready, f"no real node is Ready: {[n['metadata']['name'] for n in real]}"
    assert all(n["status"]["nodeInfo"]["containerRuntimeVersion"] for n in ready)


def test_a_pod_runs_and_kubectl_logs_shows_its_output(real_namespace: str) -> None:
    token = secrets.token_hex(6)
    apply(real_namespace, pod("hello", ["sh", "-c", f"echo hello-{token}; uname -s"]))
    assert wait_phase(real_namespace, "hello", "Succeeded", "Failed") == "Succeeded"
    out = kubectl("logs", "hello", "-n", real_namespace).stdout.split()
    assert out == [f"hello-{token}", "Linux"]


def test_kubectl_exec_runs_a_command_in_the_container(real_namespace: str) -> None:
    apply(real_namespace, pod("sleeper", ["sleep", "3600"]))
    wait_ready_pod(real_namespace, "sleeper")
    out = kubectl("exec", "sleeper", "-n", real_namespace, "--", "sh", "-c",
                  "echo $((6*7)) > /tmp/x; cat /tmp/x; hostname")
    assert out.stdout.split() == ["42", "sleeper"]


def web_service(namespace: str, body: str) -> str:
    """A busybox httpd pod answering `body` behind the Service `web` (port 80); its ClusterIP."""
    serve = f"mkdir -p /tmp/www && echo {body} > /tmp/www/index.html && exec httpd -f -p 8080 -h /tmp/www"
    server = pod("web", ["sh", "-c", serve], restart="Always")
    server["spec"]["containers"][0]["readinessProbe"] = {"tcpSocket": {"port": 8080}, "periodSeconds": 1}
    service = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "web"},
               "spec": {"selector": {"app": "web"}, "ports": [{"port": 80, "targetPort": 8080}]}}
    apply(namespace, server, service)
    wait_ready_pod(namespace, "web")
    return str(kubectl_json("get", "service", "web", "-n", namespace)["spec"]["clusterIP"])


def test_a_service_name_resolves_from_a_pod_and_its_cluster_ip_answers(real_namespace: str) -> None:
    token = secrets.token_hex(6)
    cluster_ip = web_service(real_namespace, token)
    fqdn = f"web.{real_namespace}.svc.cluster.local"
    # A Debian image (glibc's resolver, bash's /dev/tcp): static busybox cannot resolve names.
    get = "exec 3<>/dev/tcp/{host}/80; printf 'GET / HTTP/1.0\\r\\n\\r\\n' >&3; tail -n 1 <&3"
    script = f"getent hosts {fqdn}; {get.format(host='web')}; {get.format(host=cluster_ip)}"
    apply(real_namespace, pod("client", ["bash", "-c", script], image=images.POSTGRES_15))
    assert wait_phase(real_namespace, "client", "Succeeded", "Failed") == "Succeeded", \
        kubectl("logs", "client", "-n", real_namespace, check=False).stdout
    lines = kubectl("logs", "client", "-n", real_namespace).stdout.split("\n")
    assert cluster_ip in lines[0]
    assert lines[1:3] == [token, token]


@pytest.mark.local_only  # this machine is a node only of the local cluster
def test_a_cluster_ip_answers_from_the_host(real_namespace: str) -> None:
    token = secrets.token_hex(6)
    cluster_ip = web_service(real_namespace, token)

    def answer() -> str | None:
        with contextlib.suppress(OSError), socket.create_connection((cluster_ip, 80), timeout=3) as s:
            s.sendall(b"GET / HTTP/1.0\r\n\r\n")
            data = b""
            while chunk := s.recv(4096):
                data += chunk
            return data.decode(errors="replace")
        return None

    body = wait_until(answer, timeout=30, what="the ClusterIP to answer from the host")
    assert body.rstrip().endswith(token)


def test_a_statefulset_pod_finds_its_file_on_the_pvc_after_it_is_recreated(real_namespace: str) -> None:
    token = secrets.token_hex(6)
    script = (f"if [ ! -f /data/token ]; then echo {token} > /data/token; echo wrote; else echo found; fi; "
              "cat /data/token; exec sleep 3600")
    sts = {
        "apiVersion": "apps/v1", "kind": "StatefulSet", "metadata": {"name": "keeper"},
        "spec": {
            "serviceName": "keeper", "replicas": 1, "selector": {"matchLabels": {"app": "keeper"}},
            "template": {"metadata": {"labels": {"app": "keeper"}},
                         "spec": restricted({
                             "terminationGracePeriodSeconds": 1,
                             "containers": [{"name": "main", "image": images.BUSYBOX, "command": ["sh", "-c", script],
                                             "volumeMounts": [{"name": "data", "mountPath": "/data"}]}]},
                             BUSYBOX_UID)},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                      "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "64Mi"}}}}],
        },
    }
    apply(real_namespace, sts)
    wait_ready_pod(real_namespace, "keeper-0")
    first_uid = kubectl_json("get", "pod", "keeper-0", "-n", real_namespace)["metadata"]["uid"]
    assert kubectl("logs", "keeper-0", "-n", real_namespace).stdout.split() == ["wrote", token]

    kubectl("delete", "pod", "keeper-0", "-n", real_namespace, "--wait=true", timeout=90)

    def recreated() -> bool:
        p = kubectl_json("get", "pods", "-n", real_namespace, "-l", "app=keeper")["items"]
        return bool(p) and p[0]["metadata"]["uid"] != first_uid and p[0]["status"].get("phase") == "Running"

    wait_until(recreated, timeout=90, what="a new keeper-0")
    wait_ready_pod(real_namespace, "keeper-0")
    assert kubectl("logs", "keeper-0", "-n", real_namespace).stdout.split() == ["found", token]


def job(name: str, exit_code: int) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1", "kind": "Job", "metadata": {"name": name},
        "spec": {"backoffLimit": 0, "template": {"spec": restricted({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": images.BUSYBOX, "command": ["sh", "-c", f"exit {exit_code}"]}],
        }, BUSYBOX_UID)}},
    }


def test_a_jobs_real_exit_code_decides_complete_or_failed(real_namespace: str) -> None:
    apply(real_namespace, job("passes", 0), job("fails", 3))

    def finished(name: str) -> str | None:
        for c in kubectl_json("get", "job", name, "-n", real_namespace).get("status", {}).get("conditions", []):
            if c["type"] in ("Complete", "Failed") and c["status"] == "True":
                return str(c["type"])
        return None

    assert wait_until(lambda: finished("passes"), timeout=90, what="job passes to finish") == "Complete"
    assert wait_until(lambda: finished("fails"), timeout=90, what="job fails to finish") == "Failed"
    pods = kubectl_json("get", "pods", "-n", real_namespace, "-l", "job-name=fails")["items"]
    codes = [s["state"]["terminated"]["exitCode"] for p in pods for s in p["status"]["containerStatuses"]]
    assert codes == [3]


def postgres_objects(name: str, image: str) -> list[dict[str, Any]]:
    """A single PostgreSQL pod as the operator runs it: uid 999, data on a PVC, a Service."""
    return [
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", "metadata": {"name": f"{name}-data"},
         "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "256Mi"}}}},
        {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name, "labels": {"app": name}},
         "spec": restricted({
             "terminationGracePeriodSeconds": 5,
             "containers": [{
                 "name": "postgres", "image": image, "args": ["postgres", "-c", "shared_buffers=16MB"],
                 "env": [{"name": "POSTGRES_USER", "value": "app"}, {"name": "POSTGRES_DB", "value": "app"},
                         {"name": "POSTGRES_PASSWORD", "value": PG_PASSWORD},
                         {"name": "PGDATA", "value": "/var/lib/postgresql/data/pgdata"}],
                 "ports": [{"name": "postgres", "containerPort": 5432}],
                 "readinessProbe": {"exec": {"command": ["pg_isready", "-h", "127.0.0.1", "-U", "app"]},
                                    "periodSeconds": 1},
                 "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}],
             }],
             "volumes": [{"name": "data", "persistentVolumeClaim": {"claimName": f"{name}-data"}}],
         }, POSTGRES_UID)},
        {"apiVersion": "v1", "kind": "Service", "metadata": {"name": name},
         "spec": {"selector": {"app": name}, "ports": [{"port": 5432, "targetPort": "postgres"}]}},
    ]


@pytest.mark.parametrize(("image", "major"), [(images.POSTGRES_15, "15"), (images.POSTGRES_18, "18")])
def test_postgres_from_the_local_image_accepts_psql_from_another_pod_through_its_service(
        real_namespace: str, image: str, major: str) -> None:
    apply(real_namespace, *postgres_objects("pg", image))
    wait_ready_pod(real_namespace, "pg", timeout=180)
    sql = ("CREATE TABLE t(x int); INSERT INTO t SELECT generate_series(1, 100); "
           "SELECT sum(x) FROM t; SHOW server_version;")
    client = pod("psql", ["psql", "-h", f"pg.{real_namespace}.svc", "-U", "app", "-d", "app", "-qAt", "-c", sql],
                 image=image)
    client["spec"]["containers"][0]["env"] = [{"name": "PGPASSWORD", "value": PG_PASSWORD},
                                              {"name": "PGCONNECT_TIMEOUT", "value": "10"}]
    apply(real_namespace, client)
    assert wait_phase(real_namespace, "psql", "Succeeded", "Failed", timeout=120) == "Succeeded", \
        kubectl("logs", "psql", "-n", real_namespace, check=False).stdout
    out = kubectl("logs", "psql", "-n", real_namespace).stdout.split()
    assert out[0] == "5050"
    assert out[1].split(".")[0] == major


@contextlib.contextmanager
def port_forward(namespace: str, target: str, remote_port: int) -> Iterator[int]:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        local = s.getsockname()[1]
    env = {**os.environ, "KUBECONFIG": kubeconfig()}
    proc = subprocess.Popen([*kubectl_argv(), "port-forward", "-n", namespace, target, f"{local}:{remote_port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    try:
        def listening() -> bool:
            if proc.poll() is not None:
                raise AssertionError(f"kubectl port-forward exited: {proc.stderr.read() if proc.stderr else ''}")
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", local), timeout=1):
                return True
            return False

        wait_until(listening, timeout=30, what="kubectl port-forward to listen")
        yield local
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_kubectl_port_forward_reaches_postgres_from_the_host(real_namespace: str) -> None:
    psql = shutil.which("psql")
    assert psql, "psql (Debian's postgresql-client) is needed on the host; hack/bootstrap.sh installs it"
    apply(real_namespace, *postgres_objects("pg", images.POSTGRES_15))
    wait_ready_pod(real_namespace, "pg", timeout=180)
    with port_forward(real_namespace, "service/pg", 5432) as port:
        env = {**os.environ, "PGPASSWORD": PG_PASSWORD, "PGCONNECT_TIMEOUT": "10"}
        deadline = time.monotonic() + 30
        while True:
            out = subprocess.run([psql, "-h", "127.0.0.1", "-p", str(port), "-U", "app", "-d", "app", "-At",
                                  "-c", "SELECT current_user || ':' || (SELECT count(*) FROM pg_database)"],
                                 capture_output=True, text=True, env=env, timeout=30, check=False)
            if out.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(0.5)  # poll interval while the forward's first connection is set up
    assert out.returncode == 0, out.stderr
    user, _, count = out.stdout.strip().partition(":")
    assert user == "app"
    assert int(count) >= 3  # postgres, template0/1, app
