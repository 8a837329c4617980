"""The data-plane scripts that the operator's Jobs run inside a postgres container image.

The scripts are package data (``*.sh`` next to this module). A Job mounts all of them, unchanged,
from one ConfigMap at ``MOUNT_DIR`` (every script sources ``lib.sh`` from its own directory, backup.sh,
restore.sh, archive-wal.sh and recover.sh also ``store-copy.sh``; both are libraries, not entry points) and
runs ``bash MOUNT_DIR/<name>``; the instances also mount ``app-role.sh`` where the image's entrypoint sources it
after initdb (/docker-entrypoint-initdb.d: decide/children/desired_statefulset.py).
Exit codes are ``EXIT_CODES``; the last line of stdout, or the
file named by ``$RESULT_FILE``, is one JSON object with at least ``script``, ``ok``, ``code`` and
``message``.
"""

from importlib import resources
from types import MappingProxyType
from typing import Final

MOUNT_DIR: Final = "/sampledb/scripts"

SCRIPT_NAMES: Final[tuple[str, ...]] = (
    "lib.sh",
    "store-copy.sh",
    "wait-ready.sh",
    "init.sh",
    "backup.sh",
    "restore.sh",
    "migrate.sh",
    "upgrade.sh",
    "thaw.sh",
    "verify.sh",
    "reload.sh",
    "instance.sh",
    "self-fence.sh",
    "archive-wal.sh",
    "base-backup.sh",
    "recover.sh",
    "verify-archive.sh",
    "app-role.sh",
)

EXIT_CODES: Final = MappingProxyType(
    {
        0: "ok",
        1: "internal",
        2: "config",
        3: "drift",
        4: "integrity",
        5: "not-ready",
        6: "sql",
        7: "dump",
        8: "verify",
        9: "connect",
    }
)


def script(name: str) -> str:
    """Return the text of the packaged script ``name`` (one of ``SCRIPT_NAMES``)."""
    if name not in SCRIPT_NAMES:
        raise KeyError(f"unknown data-plane script {name!r}")
    return resources.files(__name__).joinpath(name).read_text(encoding="utf-8")


def all_scripts() -> dict[str, str]:
    """Return every script by name, in name order: the data of the ConfigMap mounted at ``MOUNT_DIR``."""
    return {name: script(name) for name in sorted(SCRIPT_NAMES)}
