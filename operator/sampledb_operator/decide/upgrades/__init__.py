"""Decisions of change over time: PostgreSQL upgrades (minor, major by link or dump), schema migrations, and the
reload of changed parameters. Pure, as all of decide/."""
