"""``python -m lakelog.cli`` (same as the ``lakelog`` command)."""

import sys

from lakelog.cli import main

sys.exit(main())
