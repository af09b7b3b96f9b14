"""How a broker calls brokers over TLS: forwarded group requests, and the loopback
connections of its REST Proxy consumer instances.

A broker serving https must verify its peers and, when brokers require client
certificates (``ssl_ca_certs``: mutual TLS), present one itself, or every
forwarded request fails its handshake. It trusts ``peer_ssl_cafile``,
``ssl_ca_certs`` and its own certificate (a cluster sharing one self-signed
certificate needs nothing more), on top of the system CAs, and presents its own
certificate and key as the client certificate.
"""

from __future__ import annotations

import ssl

from lakelog.client.connection import ssl_context
from server.settings import BrokerSettings


def peer_tls_context(settings: BrokerSettings) -> ssl.SSLContext | bool:
    """The ``verify`` argument of the broker's HTTP clients (True: system CAs only)."""
    files = (settings.peer_ssl_cafile, settings.ssl_ca_certs, settings.ssl_certfile)
    trusted = list(dict.fromkeys(f for f in files if f))
    if not trusted:
        return True
    # Brokers that require client certificates get this broker's own.
    mutual = bool(settings.ssl_ca_certs and settings.ssl_certfile)
    return ssl_context(
        trusted,
        settings.ssl_certfile if mutual else None,
        settings.ssl_keyfile if mutual else None,
        trust_system=True,
        purpose=" for calling other brokers",
    )
