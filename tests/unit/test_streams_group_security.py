"""The streams-group connection's reading of librdkafka's security properties, and its SASL
messages (platform_streams/kafka/streams_group/security.py). The exchange against a broker is
tests/security/test_streams_groups_secured.py; here the mapping and the mechanisms' bytes."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest
from scramp import ScramMechanism

from platform_streams.errors import BrokerError
from platform_streams.kafka.streams_group.security import (
    connection_security,
    sasl_first_message,
    security_properties,
)

SECRET = "s3cret-Value-42"


def test_only_the_connection_security_properties_are_taken() -> None:
    conf = {
        "bootstrap.servers": "b:9092", "group.id": "g", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca.pem", "enable.ssl.certificate.verification": True,
    }  # fmt: skip
    assert security_properties(conf) == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "PLAIN", "ssl.ca.location": "/ca.pem",
        "enable.ssl.certificate.verification": "True",
    }  # fmt: skip


def test_plaintext_is_the_default_and_tls_verifies_the_broker_as_librdkafka_does() -> None:
    assert connection_security(None).tls is None and connection_security({}).mechanism is None
    tls = connection_security({"security.protocol": "ssl"}).tls
    assert tls is not None and tls.verify_mode == ssl.CERT_REQUIRED and tls.check_hostname
    no_names = connection_security(
        {"security.protocol": "SSL", "ssl.endpoint.identification.algorithm": "none"}
    )
    assert no_names.tls is not None and not no_names.tls.check_hostname
    assert no_names.tls.verify_mode == ssl.CERT_REQUIRED
    unverified = connection_security(
        {"security.protocol": "SSL", "enable.ssl.certificate.verification": "false"}
    )
    assert unverified.tls is not None and unverified.tls.verify_mode == ssl.CERT_NONE


@pytest.mark.parametrize(
    ("props", "named"),
    [
        ({"security.protocol": "SASL_TLS"}, "security.protocol"),
        ({"security.protocol": "SSL", "ssl.ca.location": "/nonexistent/ca.pem"}, "ssl.ca.location"),
        ({"security.protocol": "SSL", "ssl.keystore.location": "/k.p12", "ssl.keystore.password": SECRET},
         "ssl.keystore.location"),
        ({"security.protocol": "SSL", "ssl.key.pem": SECRET}, "ssl.key.pem"),
        ({"security.protocol": "SSL", "ssl.certificate.location": "/nonexistent/c.pem",
          "ssl.key.location": "/nonexistent/k.pem", "ssl.key.password": SECRET}, "ssl.certificate.location"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.username": "u", "sasl.password": SECRET}, "GSSAPI"),
        ({"security.protocol": "SASL_SSL", "sasl.mechanisms": "OAUTHBEARER"}, "OAUTHBEARER"),
        ({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.password": SECRET},
         "sasl.username"),
    ],
)  # fmt: skip
def test_what_cannot_be_honoured_is_refused_naming_it_never_a_secret(
    props: dict[str, str], named: str
) -> None:
    with pytest.raises(BrokerError) as refused:
        connection_security(props)
    message = str(refused.value)
    assert named in message and SECRET not in message and "\n" not in message, message


def test_plain_is_one_message() -> None:
    security = connection_security(
        {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "orders",
         "sasl.password": SECRET}
    )  # fmt: skip
    first, step = sasl_first_message(security)
    assert first == b"\x00orders\x00" + SECRET.encode()
    assert step(b"") is None
    assert SECRET not in repr(security)


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_scram_completes_against_a_scram_server_and_rejects_a_forged_signature(mechanism: str) -> None:
    """The server side is scramp's own (RFC 5802), as a Kafka broker's ScramSaslServer is."""
    props = {"security.protocol": "SASL_SSL", "sasl.mechanism": mechanism, "sasl.username": "a=b,c",
             "sasl.password": SECRET}  # fmt: skip
    server_mechanism = ScramMechanism(mechanism)
    salt, stored, server_key, iterations = server_mechanism.make_auth_info(SECRET, iteration_count=4096)
    for forged in (False, True):
        first, step = sasl_first_message(connection_security(props))
        assert first.startswith(b"n,,n=a=3Db=2Cc,r=")  # the SCRAM user name escaping
        server = server_mechanism.make_server(lambda _user: (salt, stored, server_key, iterations))
        server.set_client_first(first.decode())
        final = step(server.get_server_first().encode())
        assert final is not None
        server.set_client_final(final.decode())
        if not forged:
            assert step(server.get_server_final().encode()) is None
            continue
        with pytest.raises(BrokerError) as refused:
            step(b"v=" + b"A" * 40)
        assert mechanism in str(refused.value) and SECRET not in str(refused.value)


def test_an_unreadable_client_certificate_is_named_not_its_key_password(tmp_path: Path) -> None:
    cert, key = tmp_path / "c.pem", tmp_path / "k.pem"
    cert.write_text("not a certificate\n")
    key.write_text("not a key\n")
    with pytest.raises(BrokerError) as refused:
        connection_security(
            {"security.protocol": "SSL", "ssl.certificate.location": str(cert), "ssl.key.location": str(key),
             "ssl.key.password": SECRET}
        )  # fmt: skip
    assert "ssl.certificate.location" in str(refused.value) and SECRET not in str(refused.value)
