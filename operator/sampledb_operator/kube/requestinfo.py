"""What an API request asks of the authorizer: the RBAC verb, group, resource and subresource.

The same reading of a URL path as the API server's RequestInfoFactory (only the parts the operator
uses: /api and /apis resource paths; anything else is ("", "<other>")), so that
sampledb_api_requests_total lists exactly the (verb, resource) pairs an RBAC role must grant.
Pure; no I/O.

Verbs: GET of one object is get, of a collection list, a watch (a stream, or ?watch=true) watch;
POST create, PUT update, PATCH patch, DELETE of one object delete, of a collection deletecollection.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

_VERBS = {"POST": "create", "PUT": "update", "PATCH": "patch"}
_NAMESPACE_SUBRESOURCES = ("status", "finalize")


@dataclass(frozen=True, slots=True)
class RequestInfo:
    verb: str
    group: str
    resource: str
    subresource: str


def request_info(method: str, path: str, query: Mapping[str, object] | None = None, *,
                 stream: bool = False) -> RequestInfo:
    """The RBAC attributes of `method path?query` (the path without its query string)."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, rest = "", parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, rest = parts[1], parts[3:]
    else:
        return RequestInfo(method.lower(), "", "<other>", "")
    if len(rest) >= 3 and rest[0] == "namespaces" and rest[2] not in _NAMESPACE_SUBRESOURCES:
        rest = rest[2:]  # a namespaced resource; otherwise a Namespace itself (or its status)
    if not rest:
        return RequestInfo(method.lower(), group, "<other>", "")
    resource = rest[0]
    named = len(rest) >= 2
    subresource = rest[2] if len(rest) >= 3 else ""
    watch = stream or str((query or {}).get("watch", "")).lower() in ("true", "1")
    method = method.upper()
    if method == "GET":
        verb = "watch" if watch else ("get" if named else "list")
    elif method == "DELETE":
        verb = "delete" if named else "deletecollection"
    else:
        verb = _VERBS.get(method, method.lower())
    return RequestInfo(verb, group, resource, subresource)
