"""TLS: a broker serving https with a certificate the test generates; clients verify it."""

from __future__ import annotations

import datetime
import ipaddress
from pathlib import Path

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from lakelog.cli import main as lakelog_main
from lakelog.client import Consumer, Producer, TopicPartition
from lakelog.client.admin import AdminClient
from lakelog.client.connection import Connection
from lakelog.errors import InvalidConfigError, LakelogError
from tests.fixtures.roots import RootSpec
from tests.server.security.helpers import StartBroker, eventually


def self_signed(directory: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1/localhost, signed by its own key (PEM files)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "lakelog test broker")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_file, key_file = directory / "broker.crt", directory / "broker.key"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_file, key_file


def test_produce_and_fetch_over_https(
    start_broker: StartBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cert, key = self_signed(tmp_path)
    broker = start_broker(
        RootSpec(str(tmp_path / "root")), ssl_certfile=str(cert), ssl_keyfile=str(key)
    )
    assert broker.url.startswith("https://")

    with AdminClient(broker.url, connection=Connection(broker.url, ssl_cafile=str(cert))) as admin:
        admin.create_topic("secure", partitions=1)
        # the broker advertises its https URL, so discovery keeps the client on TLS
        assert [b.url for b in admin.brokers().brokers] == [broker.url]
    with Producer(broker.url, connection=Connection(broker.url, ssl_cafile=str(cert))) as producer:
        offsets = [producer.send("secure", f"m{i}".encode()).result(60).offset for i in range(3)]
    assert offsets == [0, 1, 2]
    consumer = Consumer(
        broker.url,
        connection=Connection(broker.url, ssl_cafile=str(cert)),
        auto_offset_reset="earliest",
    )
    try:
        consumer.assign([TopicPartition("secure", 0)])
        values: list[bytes | None] = []
        for _ in range(30):
            for batch in consumer.poll(timeout_ms=1000).values():
                values += [r.value for r in batch]
            if len(values) == 3:
                break
        assert values == [b"m0", b"m1", b"m2"]
    finally:
        consumer.close()

    # plain http on the TLS port is refused; a client that does not trust the cert refuses it
    plain = broker.url.replace("https://", "http://")
    with pytest.raises(httpx.TransportError):
        httpx.get(f"{plain}/healthz", timeout=10)
    untrusting = Connection(broker.url, discover=False, request_timeout_ms=10_000)
    with untrusting, pytest.raises(LakelogError, match="CERTIFICATE_VERIFY_FAILED"):
        untrusting.request("GET", "/v1/topics", failover=False)

    # the console tools verify with --ssl-cafile, and without it say why they cannot connect
    code = lakelog_main(
        ["topics", "--bootstrap-server", broker.url, "--ssl-cafile", str(cert), "--list"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and "secure" in out, err
    code = lakelog_main(["topics", "--bootstrap-server", broker.url, "--list"])
    out, err = capsys.readouterr()
    assert code == 1 and f"{broker.url} (TLS certificate not trusted" in err, err


def test_mutual_tls_clients_and_brokers_forwarding_to_each_other(
    start_broker: StartBroker, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """With ssl_ca_certs every caller needs a certificate, brokers calling brokers included:
    a group request sent to the broker that is not the group's coordinator is forwarded."""
    cert, key = self_signed(tmp_path)
    tls = {"ssl_certfile": str(cert), "ssl_keyfile": str(key), "ssl_ca_certs": str(cert)}
    root = RootSpec(str(tmp_path / "root"))
    brokers = [start_broker(root, **tls), start_broker(root, **tls)]
    urls = [b.url for b in brokers]

    def connection(url: str, with_certificate: bool = True) -> Connection:
        mine = str(cert) if with_certificate else None
        return Connection(
            url,
            discover=False,
            request_timeout_ms=10_000,
            ssl_cafile=str(cert),
            ssl_certfile=mine,
            ssl_keyfile=str(key) if with_certificate else None,
        )

    # no client certificate: the handshake is refused; with one, requests go through
    with connection(urls[0], with_certificate=False) as anonymous, pytest.raises(LakelogError):
        anonymous.request("GET", "/v1/topics", failover=False)
    with AdminClient(urls[0], connection=connection(urls[0])) as admin:
        admin.create_topic("mtls", partitions=1)
    with Producer(urls[0], connection=connection(urls[0])) as producer:
        producer.send("mtls", b"x").result(60)

    # an offset commit through whichever broker is not the coordinator: it must forward
    coordinators: list[str] = []

    def coordinator_is_a_broker() -> bool:
        with connection(urls[0]) as probe:
            coordinators.append(probe.request("GET", "/v1/groups/g/coordinator").json()["url"])
        return coordinators[-1] in urls

    eventually(coordinator_is_a_broker, guard_s=60)
    other = next(u for u in urls if u != coordinators[-1])
    commit = {"offsets": [{"topic": "mtls", "partition": 0, "offset": 1}]}
    with connection(other) as conn:

        def committed() -> bool:
            try:
                conn.request("POST", "/v1/groups/g/offsets", json=commit, failover=False)
            except LakelogError as exc:  # registry views may differ for one heartbeat
                if not exc.retriable:
                    raise
                return False
            return True

        eventually(committed, guard_s=60)
        answer = conn.request("GET", "/v1/groups/g/offsets", failover=False).json()
    assert [(o["topic"], o["offset"]) for o in answer["offsets"]] == [("mtls", 1)]

    # the console tools present a client certificate with --ssl-certfile/--ssl-keyfile
    flags = ["--ssl-cafile", str(cert), "--ssl-certfile", str(cert), "--ssl-keyfile", str(key)]
    code = lakelog_main(["topics", "--bootstrap-server", urls[1], *flags, "--list"])
    out, err = capsys.readouterr()
    assert code == 0 and "mtls" in out, err
    config = tmp_path / "client.properties"  # librdkafka's property names work too
    config.write_text(
        f"ssl.cafile={cert}\nssl.certificate.location={cert}\nssl.key.location={key}\n"
    )
    code = lakelog_main(
        ["topics", "--bootstrap-server", urls[0], "--command-config", str(config), "--list"]
    )
    out, err = capsys.readouterr()
    assert code == 0 and "mtls" in out, err
    # a missing key file is named, before any request
    with pytest.raises(InvalidConfigError, match=r"nope\.key"):
        Connection(urls[0], ssl_certfile=str(cert), ssl_keyfile=str(tmp_path / "nope.key"))
