"""sampledb-operator: a Kubernetes operator that runs PostgreSQL databases declared as SampleDB resources."""

from importlib.metadata import PackageNotFoundError, version

try:
    # The single source is pyproject.toml's `version`, read from the installed package's metadata.
    __version__ = version("sampledb-operator")
except PackageNotFoundError:  # imported from a source tree that was never installed
    __version__ = "0+unknown"
