"""sampledb-operator: a Kubernetes operator that runs PostgreSQL databases declared as SampleDB resources."""

__version__ = "0.1.0"
