"""``python -m bench NAME [--rounds N] [--json]``; ``python -m bench --list``."""

import sys

from bench.harness import main

sys.exit(main())
