"""Container images that tests run for real.

On the local cluster they are the images hack/build-images.sh builds offline and imports into the
real node's containerd; against $KUBECONFIG's cluster they are the public images of the same name
(override any of them with the environment variables below, e.g. for a registry mirror).
"""

from __future__ import annotations

import os

BUSYBOX = os.environ.get("SAMPLEDB_TEST_BUSYBOX_IMAGE", "localhost/sampledb/busybox:1.35")
POSTGRES_15 = os.environ.get("SAMPLEDB_TEST_POSTGRES15_IMAGE", "postgres:15")
POSTGRES_18 = os.environ.get("SAMPLEDB_TEST_POSTGRES18_IMAGE", "postgres:18")
OPERATOR = os.environ.get("SAMPLEDB_TEST_OPERATOR_IMAGE", "localhost/sampledb/sampledb-operator:dev")
