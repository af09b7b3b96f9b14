"""``python -m lakelog.cli`` (same as the ``lakelog`` command)."""

import sys

from lakelog.cli import main

if __name__ == "__main__":  # not when another process imports this module as its main
    sys.exit(main())
