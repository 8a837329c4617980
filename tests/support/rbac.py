"""The shipped RBAC and admission policy, moved to test namespaces, and what they grant.

`relocated()` takes a rendering of manifests/ (kustomize) and keeps the objects that give or confine
the operator's identity (ServiceAccount, Roles, bindings, the ValidatingAdmissionPolicy and its
binding), moved to a test's namespaces and renamed where cluster-scoped, so that a test neither
collides with another nor leaves grants behind; the policy then names the test's ServiceAccount.
`granted()` expands the rules into (group, resource[/subresource], verb) triples; `requests()` reads
the operator's sampledb_api_requests_total into the same triples.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml
from prometheus_client.parser import text_string_to_metric_families
from tests.support.kube import kubectl, kubectl_json

OPERATOR_NS = "sampledb-system"
SA = "sampledb-operator"
USERNAME = f"system:serviceaccount:{OPERATOR_NS}:{SA}"
RBAC_KINDS = {"ServiceAccount", "Role", "RoleBinding", "ClusterRole", "ClusterRoleBinding"}
POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}
CLUSTER_SCOPED = {"ClusterRole", "ClusterRoleBinding", *POLICY_KINDS}

Triple = tuple[str, str, str]  # (API group, resource or resource/subresource, verb)


def render(path: Path | str) -> list[dict[str, Any]]:
    """`kubectl kustomize <path>`, parsed."""
    return [d for d in yaml.safe_load_all(kubectl("kustomize", str(path)).stdout) if d]


def relocated(objs: list[dict[str, Any]], operator_ns: str, watched: dict[str, str],
              suffix: str) -> list[dict[str, Any]]:
    """The RBAC and policy objects of a rendering, in the test's namespaces, cluster-scoped names + suffix."""
    text = json.dumps([o for o in objs if o["kind"] in RBAC_KINDS | POLICY_KINDS])
    text = text.replace(USERNAME, f"system:serviceaccount:{operator_ns}:{SA}")
    out = json.loads(text)
    for o in out:
        meta = o["metadata"]
        if meta.get("namespace") == OPERATOR_NS:
            meta["namespace"] = operator_ns
        elif meta.get("namespace") in watched:
            meta["namespace"] = watched[meta["namespace"]]
        if o["kind"] in CLUSTER_SCOPED:
            meta["name"] += suffix
        if o["kind"] in {"RoleBinding", "ClusterRoleBinding"}:
            if o["roleRef"]["kind"] == "ClusterRole":
                o["roleRef"]["name"] += suffix
            for s in o["subjects"]:
                s["namespace"] = operator_ns
        if o["kind"] == "ValidatingAdmissionPolicyBinding":
            o["spec"]["policyName"] += suffix
    return out


def cluster_scoped(objs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [o for o in objs if o["kind"] in CLUSTER_SCOPED]


CLUSTER_KINDS = "clusterroles,clusterrolebindings,validatingadmissionpolicies,validatingadmissionpolicybindings"


def delete_suffixed(suffix: str) -> None:
    """Delete every cluster-scoped RBAC or policy object of the operator whose name ends in `suffix`
    (a test's relocated copies, whatever step the test reached)."""
    names = kubectl("get", CLUSTER_KINDS, "-o", "name", check=False).stdout.split()
    mine = [n for n in names if n.split("/", 1)[1].startswith("sampledb-operator") and n.endswith(suffix)]
    if mine:
        kubectl("delete", "--ignore-not-found", *mine, check=False)


def delete_objects(objs: list[dict[str, Any]]) -> None:
    for o in objs:
        kind = o["kind"].lower() + (f".{o['apiVersion'].split('/')[0]}" if "/" in o["apiVersion"] else "")
        kubectl("delete", kind, o["metadata"]["name"], "--ignore-not-found", check=False)


def granted(objs: list[dict[str, Any]], *, role_kinds: tuple[str, ...] = ("ClusterRole", "Role")) -> set[Triple]:
    """Every (group, resource, verb) the roles among `objs` grant (no wildcards are shipped)."""
    out: set[Triple] = set()
    for o in objs:
        if o["kind"] not in role_kinds:
            continue
        for rule in o.get("rules", []):
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        assert "*" not in (group, resource, verb), f"wildcard in {o['metadata']['name']}: {rule}"
                        out.add((group, resource, verb))
    return out


REFUSED = {"401", "403", "<error>"}


def requests(metrics_text: str) -> dict[Triple, dict[str, float]]:
    """sampledb_api_requests_total as {(group, resource[/sub], verb): {code: count}}. A server-side
    apply answered 201 created its object, which RBAC authorizes as `create` too: counted as both."""
    out: dict[Triple, dict[str, float]] = {}
    for family in text_string_to_metric_families(metrics_text):
        for s in family.samples:
            if s.name != "sampledb_api_requests_total" or not s.value:
                continue
            lab = s.labels
            resource = lab["resource"] + (f"/{lab['subresource']}" if lab["subresource"] else "")
            verbs = [lab["verb"], "create"] if (lab["verb"], lab["code"]) == ("patch", "201") else [lab["verb"]]
            for verb in verbs:
                codes = out.setdefault((lab["group"], resource, verb), {})
                codes[lab["code"]] = codes.get(lab["code"], 0) + s.value
    return out


def used(reqs: dict[Triple, dict[str, float]]) -> set[Triple]:
    """The triples the API server authorized at least once (any answer but 401/403 or none)."""
    return {t for t, codes in reqs.items() if set(codes) - REFUSED}


def refused(reqs: dict[Triple, dict[str, float]]) -> dict[Triple, float]:
    return {t: codes["403"] for t, codes in reqs.items() if codes.get("403")}


def token_kubeconfig(path: Path, namespace: str, sa: str = SA) -> str:
    """A kubeconfig for the test cluster that authenticates as a ServiceAccount (TokenRequest API)."""
    token = kubectl("create", "token", sa, "-n", namespace, "--duration=1h").stdout.strip()
    current = kubectl_json("config", "view", "--raw", "--minify", "--flatten")
    cluster = current["clusters"][0]
    path.write_text(yaml.safe_dump({
        "apiVersion": "v1", "kind": "Config", "clusters": [cluster],
        "users": [{"name": "operator", "user": {"token": token}}],
        "contexts": [{"name": "operator", "context": {"cluster": cluster["name"], "user": "operator"}}],
        "current-context": "operator",
    }))
    return str(path)


def can_i(verb: str, resource: str, namespace: str, operator_ns: str) -> bool:
    out = kubectl("auth", "can-i", verb, resource, "-n", namespace,
                  f"--as=system:serviceaccount:{operator_ns}:{SA}", check=False)
    return out.stdout.strip() == "yes"
