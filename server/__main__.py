"""``python -m server``: start a broker (same as ``lakelog broker start``)."""

import sys

from server.cli import main

if __name__ == "__main__":  # not when a spawned helper process imports this module
    sys.exit(main())
