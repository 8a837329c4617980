"""The chaos suite (issue #14): `make chaos` (python -m tests.chaos) and its short version in make test."""
