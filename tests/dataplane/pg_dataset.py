"""A representative data set for backup/restore/upgrade tests, and a fingerprint to compare copies.

The data set has several tables (>= 100k rows in total), non-ASCII text (Japanese, emoji,
combining marks), NULLs, bytea, a sequence, an index, a view and large objects. ``fingerprint``
captures everything the tests compare: per-table row count and md5 over rows ordered by key,
large-object contents, sequence state, view output and index/view presence.
"""

from __future__ import annotations

from typing import Any

import psycopg

TABLES = ("customers", "orders", "documents")

SCHEMA_SQL = """
CREATE SEQUENCE invoice_no START 1000 INCREMENT 7;
CREATE TABLE customers (
    id integer PRIMARY KEY,
    name text NOT NULL,
    note text,
    created timestamptz NOT NULL DEFAULT '2024-01-01T00:00:00Z'
);
CREATE TABLE orders (
    id bigint PRIMARY KEY,
    customer_id integer NOT NULL REFERENCES customers(id),
    amount numeric(12, 2),
    invoice bigint NOT NULL DEFAULT nextval('invoice_no'),
    payload bytea
);
CREATE INDEX orders_customer_idx ON orders (customer_id);
CREATE TABLE documents (
    id integer PRIMARY KEY,
    title text NOT NULL,
    body oid
);
CREATE VIEW customer_totals AS
    SELECT c.id, c.name, count(o.id) AS orders, sum(o.amount) AS total
    FROM customers c LEFT JOIN orders o ON o.customer_id = c.id GROUP BY c.id, c.name;
"""

DATA_SQL = """
INSERT INTO customers (id, name, note)
SELECT g,
       (ARRAY['山田太郎', 'Zoë', 'José', 'e' || chr(769) || 'cole', '🎉 party', 'plain'])[1 + g % 6]
           || ' #' || g,
       CASE WHEN g % 5 = 0 THEN NULL ELSE 'note ✓ ' || md5(g::text) END
FROM generate_series(1, 20000) AS g;
INSERT INTO orders (id, customer_id, amount, payload)
SELECT g, 1 + g % 20000,
       CASE WHEN g % 11 = 0 THEN NULL ELSE (g % 100000) / 100.0 END,
       CASE WHEN g % 3 = 0 THEN NULL ELSE decode(md5(g::text), 'hex') || '\\x00ff'::bytea END
FROM generate_series(1, 90000) AS g;
INSERT INTO documents (id, title, body)
SELECT g, 'ドキュメント ' || g,
       lo_from_bytea(0, convert_to(repeat('中身 🐘 ' || g || E'\\n', 50 * g), 'UTF8'))
FROM generate_series(1, 5) AS g;
INSERT INTO documents (id, title, body)
SELECT g, 'binary ' || g,
       lo_from_bytea(0, decode(string_agg(md5(g::text || i::text), ''), 'hex'))
FROM generate_series(6, 8) AS g, generate_series(1, 4000) AS i GROUP BY g;
INSERT INTO documents (id, title, body) VALUES (9, 'no body', NULL);
"""

MIN_ROWS = 100_000


def load(conn: psycopg.Connection[Any]) -> None:
    """Create the data set in the connected (empty) database."""
    with conn.transaction():
        conn.execute(SCHEMA_SQL)
        conn.execute(DATA_SQL)
    conn.execute("ANALYZE")


def fingerprint(conn: psycopg.Connection[Any]) -> dict[str, Any]:
    """Everything the tests compare between an original and a copy."""
    out: dict[str, Any] = {}
    for table in TABLES:
        row = conn.execute(f"SELECT count(*), md5(string_agg(t::text, '|' ORDER BY t.id)) FROM {table} t").fetchone()
        out[f"table:{table}"] = row
    out["large_objects"] = conn.execute(
        "SELECT m.oid::bigint, md5(lo_get(m.oid)), length(lo_get(m.oid)) FROM pg_largeobject_metadata m ORDER BY m.oid"
    ).fetchall()
    out["sequence"] = conn.execute("SELECT last_value, is_called FROM invoice_no").fetchone()
    out["view"] = conn.execute("SELECT md5(string_agg(v::text, '|' ORDER BY v.id)) FROM customer_totals v").fetchone()
    out["index"] = conn.execute("SELECT indexdef FROM pg_indexes WHERE indexname = 'orders_customer_idx'").fetchone()
    out["encoding"] = conn.execute(
        "SELECT pg_encoding_to_char(encoding), datcollate FROM pg_database WHERE datname = current_database()"
    ).fetchone()
    return out


def total_rows(print_: dict[str, Any]) -> int:
    return sum(int(v[0]) for k, v in print_.items() if k.startswith("table:"))
