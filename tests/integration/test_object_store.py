"""The object store beside the cluster speaks real S3 over TLS, as barman-cloud will use it.

On the local cluster it is hack/cluster's component `s3` (versitygw over a directory, its certificate
signed by the cluster CA); against $KUBECONFIG's cluster, the store the SAMPLEDB_S3_* variables name.
Every request goes through boto3 (barman-cloud's S3 client) with the certificate verified against
the CA file: objects are written, read, listed and deleted; a wrong secret key is refused; the store
keeps its objects when it is stopped and started again; a pod on a real node reaches it over TLS
verified with the same CA.
"""

from __future__ import annotations

import secrets
import subprocess
from typing import Any
from urllib.parse import urlsplit

import boto3
import pytest
import yaml
from botocore.config import Config
from botocore.exceptions import ClientError, ConnectionClosedError, EndpointConnectionError, SSLError
from tests.support import images
from tests.support.cluster import (
    CLUSTER_SCRIPT,
    Cluster,
    ObjectStore,
    current_object_store,
    start_local_component,
    stop_local_component,
)
from tests.support.kube import kubectl, kubectl_json, wait_until
from tests.support.pod_security import restricted

pytestmark = pytest.mark.cluster

PREFIX = "test-object-store"
OPERATOR_UID = 65532  # the operator image's user (Dockerfile)


@pytest.fixture(scope="module")
def store(cluster: Cluster) -> ObjectStore:
    found = current_object_store(cluster)
    if found is None:
        if cluster.local:
            pytest.fail("`hack/cluster env` prints no SAMPLEDB_S3_* variables: the local cluster has no object store")
        pytest.skip("no object store for this cluster: set the SAMPLEDB_S3_* variables")
    return found


def s3_client(store: ObjectStore, *, secret_key: str | None = None, verify: str | bool | None = None) -> Any:
    """A boto3 S3 client for the store: path-style, the certificate checked against the store's CA
    file (or `verify`), one attempt per request (a refusal must show, not be retried away)."""
    config = Config(s3={"addressing_style": "path"}, retries={"total_max_attempts": 1},
                    connect_timeout=5, read_timeout=30)
    return boto3.session.Session().client(
        "s3", endpoint_url=store.endpoint, region_name="us-east-1",
        aws_access_key_id=store.access_key, aws_secret_access_key=secret_key or store.secret_key,
        verify=store.ca_file if verify is None else verify, config=config)


def keys(client: Any, bucket: str, prefix: str) -> list[str]:
    listing = client.list_objects_v2(Bucket=bucket, Prefix=prefix)
    return [o["Key"] for o in listing.get("Contents", [])]


def error_code(exc: ClientError) -> tuple[int, str]:
    return exc.response["ResponseMetadata"]["HTTPStatusCode"], exc.response["Error"]["Code"]


def test_an_object_is_written_read_listed_and_deleted_over_tls_verified_with_the_ca(store: ObjectStore) -> None:
    s3 = s3_client(store)
    prefix = f"{PREFIX}/{secrets.token_hex(6)}/"
    body = secrets.token_bytes(64 * 1024)  # binary, bigger than one TCP segment
    s3.put_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000001", Body=body)
    s3.put_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000002", Body=b"second")

    got = s3.get_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000001")
    assert got["Body"].read() == body
    assert got["ContentLength"] == len(body)
    assert keys(s3, store.bucket, prefix) == [f"{prefix}wal/000000010000000000000001",
                                              f"{prefix}wal/000000010000000000000002"]
    assert store.bucket in [b["Name"] for b in s3.list_buckets()["Buckets"]]

    s3.delete_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000001")
    assert keys(s3, store.bucket, prefix) == [f"{prefix}wal/000000010000000000000002"]
    with pytest.raises(ClientError) as gone:
        s3.get_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000001")
    assert error_code(gone.value) == (404, "NoSuchKey")
    s3.delete_object(Bucket=store.bucket, Key=f"{prefix}wal/000000010000000000000002")
    assert keys(s3, store.bucket, prefix) == []


def test_a_wrong_secret_key_is_refused_and_changes_nothing(store: ObjectStore) -> None:
    s3, wrong = s3_client(store), s3_client(store, secret_key=secrets.token_hex(20))
    prefix = f"{PREFIX}/{secrets.token_hex(6)}/"
    s3.put_object(Bucket=store.bucket, Key=f"{prefix}kept", Body=b"kept")
    for refused in (lambda: wrong.list_objects_v2(Bucket=store.bucket, Prefix=prefix),
                    lambda: wrong.get_object(Bucket=store.bucket, Key=f"{prefix}kept"),
                    lambda: wrong.delete_object(Bucket=store.bucket, Key=f"{prefix}kept")):
        with pytest.raises(ClientError) as exc:
            refused()
        assert error_code(exc.value) == (403, "SignatureDoesNotMatch")

    def refused_write() -> tuple[int, str] | None:
        """The store answers a refused PUT without reading its body and closes the connection: the
        client often sees the connection end before it reads the 403 (an SSL EOF). Only an answer
        counts; a connection ended unanswered is tried again."""
        try:
            wrong.put_object(Bucket=store.bucket, Key=f"{prefix}refused", Body=b"not allowed")
        except ClientError as exc:
            return error_code(exc)
        except (SSLError, ConnectionClosedError):
            return None
        return (200, "written")

    assert wait_until(refused_write, timeout=30, what="an answer to a PUT signed with a wrong secret key") \
        == (403, "SignatureDoesNotMatch")
    assert keys(s3, store.bucket, prefix) == [f"{prefix}kept"]
    assert s3.get_object(Bucket=store.bucket, Key=f"{prefix}kept")["Body"].read() == b"kept"
    s3.delete_object(Bucket=store.bucket, Key=f"{prefix}kept")


def test_the_certificate_is_not_trusted_without_the_ca_file(store: ObjectStore) -> None:
    """The store's certificate is the cluster CA's, not a public one: TLS is verified for real."""
    with pytest.raises(SSLError, match="CERTIFICATE_VERIFY_FAILED"):
        s3_client(store, verify=True).list_objects_v2(Bucket=store.bucket, Prefix=PREFIX)


def cluster_status() -> str:
    return subprocess.run([str(CLUSTER_SCRIPT), "status"], capture_output=True, text=True, check=True,
                          timeout=300).stdout


@pytest.mark.disruptive  # archiving and backup tests running beside it would lose their store
@pytest.mark.local_only  # stops a component of the local cluster
def test_the_store_refuses_requests_while_stopped_and_keeps_its_objects_when_started_again(
        store: ObjectStore) -> None:
    s3 = s3_client(store)
    key = f"{PREFIX}/{secrets.token_hex(6)}/survives-a-restart"
    body = secrets.token_bytes(4096)
    s3.put_object(Bucket=store.bucket, Key=key, Body=body)

    stop_local_component("s3")
    try:
        assert "s3: stopped" in cluster_status().splitlines()
        with pytest.raises(EndpointConnectionError):
            s3.get_object(Bucket=store.bucket, Key=key)
    finally:
        start_local_component("s3")  # returns once the store answers; never leave it down

    assert "object store: ready" in cluster_status()
    assert s3.get_object(Bucket=store.bucket, Key=key)["Body"].read() == body
    assert keys(s3, store.bucket, key) == [key]
    s3.delete_object(Bucket=store.bucket, Key=key)


def has_real_node() -> bool:
    """A node that runs containers (not one of kwok's fake nodes)."""
    nodes = kubectl_json("get", "nodes")["items"]
    return any("kwok.x-k8s.io/node" not in n["metadata"].get("annotations", {}) for n in nodes)


# Runs in a pod of the operator's image (Python): the store's health endpoint and an anonymous S3
# request, over TLS verified with the CA file mounted from a ConfigMap. (Not busybox: its wget cannot
# verify a certificate, and its built-in TLS client lacks the signature_algorithms extension that
# Go's TLS server requires.)
POD_CLIENT = """
import ssl, sys, urllib.error, urllib.request
url, bucket = sys.argv[1], sys.argv[2]
ctx = ssl.create_default_context(cafile="/ca/ca.crt")
print(urllib.request.urlopen(url + "/health", context=ctx, timeout=10).read().decode())
try:
    urllib.request.urlopen(f"{url}/{bucket}/", context=ctx, timeout=10)
    print("anonymous listing allowed")
except urllib.error.HTTPError as e:
    print(e.code, "AccessDenied" if b"<Code>AccessDenied</Code>" in e.read() else "other")
"""


def test_a_pod_on_a_real_node_reaches_the_store_over_tls_verified_with_the_ca(
        store: ObjectStore, real_namespace: str) -> None:
    """Pods reach the store where the host does: with the real node it listens on the node's bridge
    address, as kube-apiserver does, and its certificate names that address."""
    if not has_real_node():
        pytest.skip("the cluster has no real node (SAMPLEDB_REAL_NODE=0): no pod runs")
    endpoint = urlsplit(store.endpoint)
    url = f"https://{endpoint.hostname}:{endpoint.port or 443}"
    with open(store.ca_file) as f:
        ca = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "s3-ca"}, "data": {"ca.crt": f.read()}}
    pod = {
        "apiVersion": "v1", "kind": "Pod", "metadata": {"name": "s3-client"},
        "spec": restricted({
            "restartPolicy": "Never", "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "main", "image": images.operator_image(),
                            "command": ["python3", "-c", POD_CLIENT, url, store.bucket],
                            "volumeMounts": [{"name": "ca", "mountPath": "/ca", "readOnly": True}]}],
            "volumes": [{"name": "ca", "configMap": {"name": "s3-ca"}}],
        }, OPERATOR_UID),
    }
    kubectl("apply", "-n", real_namespace, "-f", "-", input=yaml.safe_dump_all([ca, pod]))

    def finished() -> str | None:
        phase = kubectl_json("get", "pod", "s3-client", "-n", real_namespace).get("status", {}).get("phase")
        return phase if phase in ("Succeeded", "Failed") else None

    phase = wait_until(finished, timeout=120, what="pod s3-client to finish")
    logs = kubectl("logs", "s3-client", "-n", real_namespace, check=False).stdout
    state = kubectl_json("get", "pod", "s3-client", "-n", real_namespace)["status"].get("containerStatuses")
    assert phase == "Succeeded", (logs, state)
    assert logs.splitlines() == ["OK", "403 AccessDenied"]
