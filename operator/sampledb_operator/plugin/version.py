"""The plugin's version: its installed distribution's.

The plugin is installed two ways: with the operator (the distribution `sampledb-operator`, whose
version the package's `__version__` reads) or alone (the distribution `kubectl-sampledb` that
hack/build-plugin.sh builds from the same source tree, with the same version). Both are asked, the
operator's first; from a source tree that was never installed it is the package's "0+unknown".
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

from sampledb_operator import __version__ as _package_version

DISTRIBUTION = "kubectl-sampledb"  # the plugin's own distribution (hack/build-plugin.sh)


def installed_version() -> str:
    if _package_version != "0+unknown":
        return _package_version
    try:
        return version(DISTRIBUTION)
    except PackageNotFoundError:
        return _package_version


__version__ = installed_version()
