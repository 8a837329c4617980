"""`python -m sampledb_operator` runs the command line."""

from sampledb_operator.cli import main

if __name__ == "__main__":
    raise SystemExit(main())
