"""Authentication, ACL enforcement, quotas and their admin API for the broker's HTTP app.

``install_security(app, broker)`` wires it all into ``server.app.create_app``;
route handlers use ``authorize`` (ACL checks on resources named in bodies)
and ``record_quota`` (byte quotas they measure themselves).
"""

from __future__ import annotations

from fastapi import FastAPI

from server.broker import Broker
from server.security.enforce import authorize, enforce, identity_of
from server.security.state import BrokerSecurity
from server.security.throttle import ThrottleMiddleware, record_quota


def install_security(app: FastAPI, broker: Broker) -> BrokerSecurity:
    """Create the broker's security state and its throttling middleware.

    The caller adds ``Depends(enforce)`` to every router it includes (the
    ACL/quota admin routes are ``server.security.admin_routes.router``) and
    starts/stops the returned object in the app's lifespan.
    """
    security = BrokerSecurity(broker.settings, broker.storage, broker.metrics)
    app.state.security = security
    app.add_middleware(ThrottleMiddleware, security=security)
    return security


__all__ = [
    "BrokerSecurity",
    "authorize",
    "enforce",
    "identity_of",
    "install_security",
    "record_quota",
]
