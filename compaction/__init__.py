"""Spark maintenance jobs: key compaction, retention, segment merging, vacuum, scheduling.

Installed by the ``spark`` extra (``pip install 'lakelog[spark]'``); without
it, importing this package raises ``MissingDependencyError`` naming the extra.
"""

from lakelog.extras import require_extra

require_extra("spark", "compaction/ (the maintenance jobs)")
