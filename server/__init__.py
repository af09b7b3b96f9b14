"""The brokers: native ``/v1`` API, Confluent REST Proxy v2/v3, group coordinator.

Installed by the ``broker`` extra (``pip install 'lakelog[broker]'``); without
it, importing this package raises ``MissingDependencyError`` naming the extra.
"""

from lakelog.extras import require_extra

require_extra("broker", "the lakelog broker (server/)")
