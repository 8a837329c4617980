"""Container images that tests run for real.

On the local cluster they are the images hack/build-images.sh builds offline and imports into the
real node's containerd; against $KUBECONFIG's cluster they are the public images of the same name
(override any of them with the environment variables below, e.g. for a registry mirror).
"""

from __future__ import annotations

import os
from pathlib import Path

BUSYBOX = os.environ.get("SAMPLEDB_TEST_BUSYBOX_IMAGE", "localhost/sampledb/busybox:1.35")
POSTGRES_15 = os.environ.get("SAMPLEDB_TEST_POSTGRES15_IMAGE", "postgres:15")
POSTGRES_18 = os.environ.get("SAMPLEDB_TEST_POSTGRES18_IMAGE", "postgres:18")


def operator_image() -> str:
    """The operator image to install: $SAMPLEDB_TEST_OPERATOR_IMAGE, else the local build of the
    current sources (hack/build-images.sh tags it with its inputs' hash; images.list names it)."""
    if image := os.environ.get("SAMPLEDB_TEST_OPERATOR_IMAGE"):
        return image
    cache = Path(os.environ.get("SAMPLEDB_CACHE", Path.home() / ".cache" / "sampledb-operator"))
    listing = cache / "images" / "images.list"
    for line in listing.read_text().splitlines() if listing.exists() else []:
        for name in line.split()[1:]:
            if name.startswith("localhost/sampledb/sampledb-operator:"):
                return name
    raise AssertionError(f"no operator image in {listing}: run hack/cluster up (it builds one), or set "
                         "SAMPLEDB_TEST_OPERATOR_IMAGE to an image the cluster can pull")
