"""``python -m server``: start a broker (same as ``lakelog broker start``)."""

import sys

from server.cli import main

sys.exit(main())
