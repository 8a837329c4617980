"""Decode rate of watch-event lines: stdlib json vs orjson (when importable).

Builds 10,000 watch-event lines carrying realistic StatefulSet objects (a PostgreSQL pod
template with env, probes, volume claim templates, status and managedFields, ~6 KB each) and
times the operator's own path, kube.api.decode_watch_line (json.loads + managedFields strip),
and the same with orjson.loads swapped in. Prints one markdown table row per decoder:

    | decoder | events | bytes/event | events/s | MB/s |

Usage: .venv/bin/python bench/bench_watch_decode.py [--events N] [--repeat R]
"""

from __future__ import annotations

import argparse
import json
import time
from collections.abc import Callable
from typing import Any

from sampledb_operator.kube.api import WatchEvent, decode_watch_line, strip_managed_fields


def statefulset(i: int) -> dict[str, Any]:
    name = f"db-{i:05d}"
    labels = {"app.kubernetes.io/name": "sampledb", "app.kubernetes.io/instance": name,
              "app.kubernetes.io/managed-by": "sampledb-operator", "sampledb.io/role": "database"}
    env: list[dict[str, Any]] = [{"name": f"PG_SETTING_{k}", "value": f"value-{k}-{i}"} for k in range(12)]
    env.append({"name": "POSTGRES_PASSWORD",
                "valueFrom": {"secretKeyRef": {"name": f"{name}-credentials", "key": "password"}}})
    probe: dict[str, Any] = {"exec": {"command": ["pg_isready", "-U", "postgres", "-h", "127.0.0.1"]},
                             "periodSeconds": 10, "timeoutSeconds": 5, "failureThreshold": 3}
    managed = [{"manager": "sampledb-operator", "operation": "Apply", "apiVersion": "apps/v1",
                "time": "2024-05-06T07:08:09Z", "fieldsType": "FieldsV1",
                "fieldsV1": {f"f:spec{k}": {"f:template": {"f:spec": {"f:containers": {f"k:{k}": {}}}}}
                             for k in range(25)}}]
    return {
        "kind": "StatefulSet", "apiVersion": "apps/v1",
        "metadata": {"name": name, "namespace": f"team-{i % 50}", "uid": f"0000-{i:08d}",
                     "resourceVersion": str(100000 + i), "generation": 3, "labels": labels,
                     "creationTimestamp": "2024-05-06T07:08:09Z", "managedFields": managed,
                     "ownerReferences": [{"apiVersion": "sampledb.io/v1alpha1", "kind": "SampleDB",
                                          "name": name, "uid": f"1111-{i:08d}", "controller": True,
                                          "blockOwnerDeletion": True}]},
        "spec": {
            "replicas": 1, "serviceName": f"{name}-headless", "podManagementPolicy": "OrderedReady",
            "selector": {"matchLabels": labels},
            "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
            "template": {"metadata": {"labels": labels,
                                      "annotations": {"sampledb.io/config-hash": "ab" * 16}},
                         "spec": {"securityContext": {"runAsUser": 999, "fsGroup": 999},
                                  "containers": [container(env, probe)]}},
            "volumeClaimTemplates": [{"metadata": {"name": "data"},
                                      "spec": {"accessModes": ["ReadWriteOnce"],
                                               "resources": {"requests": {"storage": "10Gi"}}}}],
        },
        "status": {"replicas": 1, "readyReplicas": 1, "currentReplicas": 1, "updatedReplicas": 1,
                   "availableReplicas": 1, "observedGeneration": 3, "currentRevision": f"{name}-5d8f",
                   "updateRevision": f"{name}-5d8f", "collisionCount": 0},
    }


def container(env: list[dict[str, Any]], probe: dict[str, Any]) -> dict[str, Any]:
    return {"name": "postgres", "image": "postgres:16.3",
            "ports": [{"containerPort": 5432, "name": "postgres"}],
            "env": env, "readinessProbe": probe, "livenessProbe": probe,
            "resources": {"requests": {"cpu": "250m", "memory": "512Mi"}, "limits": {"memory": "1Gi"}},
            "volumeMounts": [{"name": "data", "mountPath": "/var/lib/postgresql/data"}]}


def make_lines(n: int) -> list[bytes]:
    return [json.dumps({"type": "MODIFIED", "object": statefulset(i)}).encode() + b"\n" for i in range(n)]


def orjson_decoder() -> Callable[[bytes], WatchEvent] | None:
    try:
        import orjson  # type: ignore[import-not-found]
    except ImportError:
        return None

    def decode(line: bytes) -> WatchEvent:
        decoded = orjson.loads(line)
        return WatchEvent(decoded["type"], strip_managed_fields(decoded["object"]))

    return decode


def measure(decode: Callable[[bytes], WatchEvent], lines: list[bytes], repeat: int) -> float:
    """Best events/s over `repeat` passes."""
    best = float("inf")
    for _ in range(repeat):
        started = time.perf_counter()
        for line in lines:
            decode(line)
        best = min(best, time.perf_counter() - started)
    return len(lines) / best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    lines = make_lines(args.events)
    size = sum(map(len, lines)) / len(lines)
    decoders: list[tuple[str, Callable[[bytes], WatchEvent] | None]] = [
        ("json (stdlib, kube.api.decode_watch_line)", decode_watch_line),
        ("orjson", orjson_decoder()),
    ]
    print("| decoder | events | bytes/event | events/s | MB/s |")
    print("|---|---:|---:|---:|---:|")
    for name, decode in decoders:
        if decode is None:
            print(f"| {name} | - | - | not installed | - |")
            continue
        rate = measure(decode, lines, args.repeat)
        print(f"| {name} | {len(lines)} | {size:.0f} | {rate:,.0f} | {rate * size / 1e6:.1f} |")


if __name__ == "__main__":
    main()
