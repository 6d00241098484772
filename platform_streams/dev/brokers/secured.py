"""Apache Kafka with TLS, SASL and ACLs on: the secured node the security tests run against.

:class:`SecuredKafkaBroker` is an :class:`~platform_streams.dev.brokers.apache.ApacheKafkaBroker`
(one KRaft node from Maven Central's jars) with three listeners:

* ``SASL_SSL`` (:attr:`bootstrap_servers`): TLS, then SCRAM-SHA-512; users are created
  through the admin API (:meth:`add_scram_user`).
* ``MTLS`` (:attr:`mtls_bootstrap_servers`): TLS with a client certificate required; the
  principal is the certificate's CN (``ssl.principal.mapping.rules``), e.g. ``User:orders``.
* ``CONTROLLER``: mutual TLS as well, the node's own certificate (``User:broker``).

``StandardAuthorizer`` is on with no ACL meaning no access; the super users are the node
itself and ``User:admin``, whose certificate :meth:`client_config` uses for setup (users,
ACLs, the readiness check). Certificates come from a throw-away certificate authority that
:class:`CertificateAuthority` makes with ``openssl`` (PEM files for librdkafka) and
``keytool`` (the node's PKCS12 truststore): nothing is downloaded, and every file lives in
the node's data directory (mode 0700), removed by :meth:`stop`.
"""

from __future__ import annotations

import secrets
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from platform_streams.dev.brokers.apache import ApacheKafkaBroker
from platform_streams.dev.brokers.local import find_free_port, hostport
from platform_streams.errors import BrokerError
from platform_streams.kafka.acl_admin import Acl, SecurityAdmin

__all__ = ["CertificateAuthority", "SecuredKafkaBroker", "TlsIdentity"]

SCRAM_MECHANISM = "SCRAM-SHA-512"
_SUPER_USER = "admin"
_NODE_PRINCIPAL = "broker"
_DAYS = "2"


@dataclass(frozen=True)
class TlsIdentity:
    """A client's PEM certificate and unencrypted key, signed by ``ca``."""

    name: str
    cert: Path
    key: Path
    ca: Path

    def client_config(self) -> dict[str, str]:
        """librdkafka's settings for mutual TLS as this identity."""
        return {
            "security.protocol": "SSL",
            "ssl.ca.location": str(self.ca),
            "ssl.certificate.location": str(self.cert),
            "ssl.key.location": str(self.key),
        }


def _run(cmd: list[str], what: str) -> None:
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except FileNotFoundError as exc:
        raise BrokerError(f"{what} needs {cmd[0]} on PATH (openssl; keytool comes with the JDK)") from exc
    if done.returncode != 0:
        raise BrokerError(f"{what} failed ({cmd[0]} exit {done.returncode}): {done.stderr.strip()[-500:]}")


class CertificateAuthority:
    """A self-signed CA in ``directory`` that issues EC (P-256) certificates with ``openssl``."""

    def __init__(self, directory: Path, name: str = "platform-streams-test-ca") -> None:
        self.directory = directory
        directory.mkdir(parents=True, exist_ok=True, mode=0o700)
        self.cert = directory / f"{name}.crt"
        self._key = directory / f"{name}.key"
        _run(
            ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(self._key), "-out", str(self.cert), "-days", _DAYS,
             "-subj", f"/CN={name}"],
            "making the test certificate authority",
        )  # fmt: skip

    def issue(self, name: str, *, hosts: tuple[str, ...] = (), expired: bool = False) -> TlsIdentity:
        """A certificate for ``CN=name`` (client and server use), with ``hosts`` as SANs;
        ``expired``: valid from two days ago until yesterday."""
        key, csr, cert = (self.directory / f"{name}.{ext}" for ext in ("key", "csr", "crt"))
        ext = self.directory / f"{name}.ext"
        lines = ["basicConstraints=CA:FALSE", "extendedKeyUsage=serverAuth,clientAuth"]
        if hosts:
            sans = ",".join(f"IP:{h}" if h.replace(".", "").isdigit() else f"DNS:{h}" for h in hosts)
            lines.append(f"subjectAltName={sans}")
        ext.write_text("\n".join(lines) + "\n")
        _run(
            ["openssl", "req", "-new", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1",
             "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", f"/CN={name}"],
            f"making the key of {name}",
        )  # fmt: skip
        if expired:
            self._sign_in_the_past(csr, ext, cert)
        else:
            _run(
                ["openssl", "x509", "-req", "-in", str(csr), "-CA", str(self.cert), "-CAkey", str(self._key),
                 "-set_serial", str(secrets.randbits(63)), "-days", _DAYS, "-out", str(cert),
                 "-extfile", str(ext)],
                f"signing the certificate of {name}",
            )  # fmt: skip
        key.chmod(0o600)
        return TlsIdentity(name, cert, key, self.cert)

    def _sign_in_the_past(self, csr: Path, ext: Path, cert: Path) -> None:
        """Sign with explicit dates: ``openssl x509`` (3.0) only counts days from now,
        ``openssl ca`` takes -startdate/-enddate (and wants a small database)."""
        db = self.directory / "ca-db"
        db.mkdir(exist_ok=True, mode=0o700)
        (db / "index.txt").touch()
        (db / "serial").write_text(f"{secrets.randbits(63):016X}\n")
        conf = db / "ca.cnf"
        conf.write_text(
            f"[ca]\ndefault_ca=c\n[c]\ndatabase={db / 'index.txt'}\nnew_certs_dir={db}\n"
            f"serial={db / 'serial'}\ndefault_md=sha256\npolicy=p\nunique_subject=no\n"
            "[p]\ncommonName=supplied\n"
        )
        now = time.time()
        start, end = (time.strftime("%Y%m%d%H%M%SZ", time.gmtime(now - d * 86400)) for d in (2, 1))
        _run(
            ["openssl", "ca", "-batch", "-notext", "-config", str(conf), "-cert", str(self.cert),
             "-keyfile", str(self._key), "-in", str(csr), "-out", str(cert), "-startdate", start,
             "-enddate", end, "-extfile", str(ext)],
            f"signing the expired certificate of {csr.stem}",
        )  # fmt: skip

    def pkcs12_keystore(self, identity: TlsIdentity, password: str) -> Path:
        """``identity``'s key and chain as a PKCS12 keystore (for the JVM)."""
        path = self.directory / f"{identity.name}.p12"
        _run(
            ["openssl", "pkcs12", "-export", "-in", str(identity.cert), "-inkey", str(identity.key),
             "-certfile", str(self.cert), "-name", identity.name, "-out", str(path),
             "-passout", f"pass:{password}"],
            f"making the keystore of {identity.name}",
        )  # fmt: skip
        return path

    def pkcs12_truststore(self, password: str) -> Path:
        """This CA as a PKCS12 truststore: keytool marks the entry trusted, which Java needs."""
        path = self.directory / "truststore.p12"
        path.unlink(missing_ok=True)
        _run(
            ["keytool", "-importcert", "-noprompt", "-alias", "ca", "-file", str(self.cert),
             "-keystore", str(path), "-storetype", "PKCS12", "-storepass", password],
            "making the truststore",
        )  # fmt: skip
        return path


class SecuredKafkaBroker(ApacheKafkaBroker):
    """One Apache Kafka node with SASL_SSL (SCRAM-SHA-512), mTLS and ACLs; see the module docstring."""

    def __init__(self, host: str = "127.0.0.1", **kwargs: Any) -> None:
        super().__init__(host, **kwargs)
        self.mtls_port: int | None = None
        self.ca: CertificateAuthority | None = None
        self._admin_identity: TlsIdentity | None = None

    def _config(self, log_dir: Path) -> dict[str, str]:
        base = super()._config(log_dir)
        host, port, cport = self._host, self.port, self._controller_port
        assert cport is not None
        self.mtls_port = self.mtls_port or find_free_port(host)
        ca, store_password = self._make_certificates(log_dir.parent / "tls"), secrets.token_hex(16)
        node = ca.issue(_NODE_PRINCIPAL, hosts=(host, "localhost"))
        keystore, truststore = ca.pkcs12_keystore(node, store_password), ca.pkcs12_truststore(store_password)
        clients = f"SASL_SSL://{hostport(host, port)},MTLS://{hostport(host, self.mtls_port)}"
        secured = {
            "listeners": f"{clients},CONTROLLER://{hostport(host, cport)}",
            "advertised.listeners": clients,
            "listener.security.protocol.map": "SASL_SSL:SASL_SSL,MTLS:SSL,CONTROLLER:SSL",
            "inter.broker.listener.name": "MTLS",
            "sasl.enabled.mechanisms": SCRAM_MECHANISM,
            "listener.name.sasl_ssl.scram-sha-512.sasl.jaas.config": (
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"
            ),
            "ssl.keystore.type": "PKCS12",
            "ssl.keystore.location": str(keystore),
            "ssl.keystore.password": store_password,
            "ssl.key.password": store_password,
            "ssl.truststore.type": "PKCS12",
            "ssl.truststore.location": str(truststore),
            "ssl.truststore.password": store_password,
            "listener.name.mtls.ssl.client.auth": "required",
            "listener.name.controller.ssl.client.auth": "required",
            # User:orders rather than User:CN=orders: the same names as the SCRAM users
            "ssl.principal.mapping.rules": "RULE:^CN=([^,]+)$/$1/,DEFAULT",
            "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
            "super.users": f"User:{_SUPER_USER};User:{_NODE_PRINCIPAL}",
        }
        return {**base, **secured, **self._extra}

    def _make_certificates(self, directory: Path) -> CertificateAuthority:
        if self.ca is None or self.ca.directory != directory:
            self.ca = CertificateAuthority(directory)
            self._admin_identity = self.ca.issue(_SUPER_USER)
        return self.ca

    # ------------------------------------------------------------------ clients

    @property
    def mtls_bootstrap_servers(self) -> str:
        if self.mtls_port is None:
            raise BrokerError("the secured broker has not been started")
        return hostport(self._host, self.mtls_port)

    @property
    def ca_location(self) -> str:
        if self.ca is None:
            raise BrokerError("the secured broker has not been started")
        return str(self.ca.cert)

    def client_config(self) -> dict[str, str]:
        """The super user's settings (mutual TLS as ``User:admin``): for setup only."""
        if self._admin_identity is None:
            raise BrokerError("the secured broker has not been started")
        return {"bootstrap.servers": self.mtls_bootstrap_servers, **self._admin_identity.client_config()}

    def sasl_config(self, user: str, password: str) -> dict[str, str]:
        """librdkafka's settings for SCRAM-SHA-512 over TLS as ``user``."""
        return {
            "bootstrap.servers": self.bootstrap_servers,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_MECHANISM,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": self.ca_location,
        }

    def mtls_config(self, identity: TlsIdentity) -> dict[str, str]:
        """librdkafka's settings for mutual TLS as ``identity`` (see :meth:`issue_certificate`)."""
        return {"bootstrap.servers": self.mtls_bootstrap_servers, **identity.client_config()}

    def issue_certificate(self, name: str) -> TlsIdentity:
        """A client certificate for ``User:name`` on the mTLS listener."""
        if self.ca is None:
            raise BrokerError("the secured broker has not been started")
        return self.ca.issue(name)

    def add_scram_user(self, user: str, password: str) -> None:
        """Create (or re-key) the SCRAM-SHA-512 user ``user``."""
        self.security_admin().upsert_scram_user(user, password, SCRAM_MECHANISM)

    def security_admin(self) -> SecurityAdmin:
        """A :class:`SecurityAdmin` as the super user (ACLs, users)."""
        return SecurityAdmin(self.client_config())

    def grant(self, acls: list[Acl]) -> None:
        """Create ``acls`` and wait until the node's authorizer has them: KRaft applies an ACL
        when the node replays the metadata record, a moment after CreateAcls returns."""
        admin = self.security_admin()
        admin.create_acls(acls)
        self._wait_for(admin, set(acls), present=True)

    def revoke(self, acls: list[Acl]) -> None:
        admin = self.security_admin()
        admin.delete_acls(acls)
        self._wait_for(admin, set(acls), present=False)

    @staticmethod
    def _wait_for(admin: SecurityAdmin, acls: set[Acl], *, present: bool, timeout_s: float = 60.0) -> None:
        deadline = time.monotonic() + timeout_s
        principals = {acl.principal for acl in acls}
        while True:
            have = {acl for p in principals for acl in admin.describe_acls(p)}
            if (acls <= have) if present else not (acls & have):
                return
            if time.monotonic() > deadline:
                raise BrokerError(f"ACLs not {'applied' if present else 'removed'} after {timeout_s:.0f}s")
            time.sleep(0.1)
