"""Decisions of backups and recovery: logical backups and their files, schedules and retention, verifications,
WAL archiving and base backups to the object store, archive verification, restores. Pure, as all of decide/."""
