"""The operator's own connections to PostgreSQL: a few short SQL calls per instance (state, promotion,
replication slots). Only this package imports the driver (psycopg)."""
