"""`make node-chaos` (tests/nodechaos/__main__.py)."""
