"""python -m sampledb_operator.plugin: the same as the console script kubectl-sampledb."""

import sys

from sampledb_operator.plugin.cli import main

sys.exit(main())
