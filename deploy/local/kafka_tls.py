"""A local certificate authority and the broker's certificate, made with `openssl` once.

The CA's certificate (`ca.pem`) is what a SASL_SSL client trusts (`ssl_ca_location`); the
broker's certificate names the listener's address, so clients verify the host as they would in
production. Keys stay in the git-ignored stack folder, readable by their owner only.
"""

from __future__ import annotations

import ipaddress
import shutil
import subprocess
from pathlib import Path

CA_DAYS = 3650
BROKER_DAYS = 825


class LocalCertificates:
    def __init__(self, folder: Path, host: str) -> None:
        self.folder = folder
        self.host = host
        self.ca_key = folder / "ca.key"
        self.ca_certificate = folder / "ca.pem"
        self.keystore = folder / "broker-keystore.pem"
        """The broker's private key and certificate chain, as Kafka's PEM keystore reads it."""

    def ensure(self) -> None:
        if self.keystore.exists() and self.ca_certificate.exists():
            return
        if shutil.which("openssl") is None:
            raise RuntimeError("openssl is required to make the local broker's certificate")
        self.folder.mkdir(parents=True, exist_ok=True)
        self.folder.chmod(0o700)
        self._make_ca()
        self._make_broker_keystore()

    def _openssl(self, *args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    def _make_ca(self) -> None:
        self._openssl(
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-sha256",
            "-days", str(CA_DAYS), "-subj", "/CN=streamrec local CA",
            "-addext", "basicConstraints=critical,CA:TRUE",
            "-addext", "keyUsage=critical,keyCertSign,cRLSign",
            "-keyout", str(self.ca_key), "-out", str(self.ca_certificate),
        )
        self.ca_key.chmod(0o600)

    def _subject_alt_names(self) -> str:
        try:
            ipaddress.ip_address(self.host)
            names = [f"IP:{self.host}"]
        except ValueError:
            names = [f"DNS:{self.host}"]
        return ",".join([*names, "DNS:localhost"])

    def _make_broker_keystore(self) -> None:
        key, request, certificate = (
            self.folder / n for n in ("broker.key", "broker.csr", "broker.pem")
        )
        extensions = self.folder / "broker.ext"
        extensions.write_text(
            f"subjectAltName={self._subject_alt_names()}\n"
            "extendedKeyUsage=serverAuth\n"
            "keyUsage=critical,digitalSignature,keyEncipherment\n"
        )
        self._openssl(
            "req", "-newkey", "rsa:2048", "-nodes", "-subj", f"/CN={self.host}",
            "-keyout", str(key), "-out", str(request),
        )
        self._openssl(
            "x509", "-req", "-sha256", "-days", str(BROKER_DAYS), "-in", str(request),
            "-CA", str(self.ca_certificate), "-CAkey", str(self.ca_key), "-CAcreateserial",
            "-extfile", str(extensions), "-out", str(certificate),
        )
        self.keystore.touch(mode=0o600)
        self.keystore.write_text(
            key.read_text() + certificate.read_text() + self.ca_certificate.read_text()
        )
        key.unlink()
        request.unlink()
        extensions.unlink()

    def server_properties(self) -> list[str]:
        """The TLS side of the broker's SASL_SSL listener."""
        return [
            "ssl.keystore.type=PEM",
            f"ssl.keystore.location={self.keystore.resolve()}",
            "ssl.client.auth=none",
        ]
