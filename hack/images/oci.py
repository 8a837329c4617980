#!/usr/bin/env python3
"""Write an OCI image archive (an oci-layout tar) from layer tarballs, without a registry or daemon.

    oci.py --out IMAGE.tar --name REF [--name REF...] --layer ROOTFS.tar [--layer MORE.tar...]
           [--env K=V...] [--entrypoint JSON] [--cmd JSON] [--user U] [--workdir D]
           [--label K=V...] [--port N/tcp...] [--stop-signal SIG]

The archive holds: oci-layout, index.json (one manifest descriptor per --name, annotated with
`io.containerd.image.name` and `org.opencontainers.image.ref.name`, so `ctr images import` names
the image), the image config, the manifest, and the layers as uncompressed tar blobs (importing
skips a decompression; the archives live in a local cache, never on a network).

Deterministic: the same inputs give the same digests (created is fixed, JSON keys are sorted),
so a rebuilt image with unchanged content is recognised by containerd as the one it has.
Standard library only (it runs before the project's virtualenv exists).
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import tarfile
from pathlib import Path

CREATED = "1970-01-01T00:00:00Z"
CHUNK = 1 << 20


def sha256_file(path: Path) -> tuple[str, int]:
    h = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        while chunk := f.read(CHUNK):
            h.update(chunk)
            size += len(chunk)
    return "sha256:" + h.hexdigest(), size


def blob(data: bytes) -> tuple[str, int, bytes]:
    return "sha256:" + hashlib.sha256(data).hexdigest(), len(data), data


def dumps(obj: object) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def add_bytes(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build(args: argparse.Namespace) -> dict[str, str]:
    layers = [Path(p) for p in args.layer]
    layer_descs = []
    for layer in layers:
        digest, size = sha256_file(layer)
        layer_descs.append((layer, digest, size))
    config: dict[str, object] = {}
    if args.env:
        config["Env"] = args.env
    if args.entrypoint:
        config["Entrypoint"] = json.loads(args.entrypoint)
    if args.cmd:
        config["Cmd"] = json.loads(args.cmd)
    if args.user:
        config["User"] = args.user
    if args.workdir:
        config["WorkingDir"] = args.workdir
    if args.label:
        config["Labels"] = dict(kv.split("=", 1) for kv in args.label)
    if args.port:
        config["ExposedPorts"] = {p: {} for p in args.port}
    if args.stop_signal:
        config["StopSignal"] = args.stop_signal
    image_config = {
        "architecture": "amd64",
        "os": "linux",
        "created": CREATED,
        "config": config,
        "rootfs": {"type": "layers", "diff_ids": [d for _, d, _ in layer_descs]},
        "history": [{"created": CREATED, "created_by": f"hack/images/oci.py layer {p.name}"} for p in layers],
    }
    cfg_digest, cfg_size, cfg_bytes = blob(dumps(image_config))
    manifest = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.manifest.v1+json",
        "config": {"mediaType": "application/vnd.oci.image.config.v1+json", "digest": cfg_digest,
                   "size": cfg_size},
        "layers": [{"mediaType": "application/vnd.oci.image.layer.v1.tar", "digest": d, "size": s}
                   for _, d, s in layer_descs],
    }
    man_digest, man_size, man_bytes = blob(dumps(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {"mediaType": "application/vnd.oci.image.manifest.v1+json", "digest": man_digest,
             "size": man_size, "annotations": {"io.containerd.image.name": name,
                                               "org.opencontainers.image.ref.name": name.rsplit(":", 1)[-1]}}
            for name in args.name
        ],
    }
    out = Path(args.out)
    tmp = out.with_name(out.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.PAX_FORMAT) as tar:
        add_bytes(tar, "oci-layout", dumps({"imageLayoutVersion": "1.0.0"}))
        add_bytes(tar, "index.json", dumps(index))
        add_bytes(tar, f"blobs/sha256/{cfg_digest[7:]}", cfg_bytes)
        add_bytes(tar, f"blobs/sha256/{man_digest[7:]}", man_bytes)
        seen: set[str] = set()
        for layer, digest, _ in layer_descs:
            if digest in seen:
                continue
            seen.add(digest)
            info = tar.gettarinfo(str(layer), arcname=f"blobs/sha256/{digest[7:]}")
            info.uid = info.gid = 0
            info.uname = info.gname = ""
            info.mode = 0o644
            with layer.open("rb") as f:
                tar.addfile(info, f)
    os.replace(tmp, out)
    return {"manifest": man_digest, "config": cfg_digest}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True)
    p.add_argument("--name", action="append", required=True, help="full image reference, e.g. docker.io/library/x:1")
    p.add_argument("--layer", action="append", required=True, help="an uncompressed layer tarball, base first")
    p.add_argument("--env", action="append", default=[])
    p.add_argument("--entrypoint")
    p.add_argument("--cmd")
    p.add_argument("--user")
    p.add_argument("--workdir")
    p.add_argument("--label", action="append", default=[])
    p.add_argument("--port", action="append", default=[])
    p.add_argument("--stop-signal")
    print(json.dumps(build(p.parse_args())))


if __name__ == "__main__":
    main()
