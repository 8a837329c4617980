"""Decisions of what the operator declares inside PostgreSQL: roles and databases. Pure, as all of decide/."""
