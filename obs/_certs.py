"""A self-signed certificate for localhost (tests and ``python -m obs receive --tls``)."""

from __future__ import annotations

__all__ = ["make_self_signed_cert", "read_bytes"]

import datetime as _dt
import importlib
import os
import shutil
import subprocess
from typing import Any


def read_bytes(path: str) -> bytes:
    """The whole file."""
    with open(path, "rb") as f:
        return f.read()


def make_self_signed_cert(directory: str | os.PathLike[str]) -> tuple[str, str]:
    """Write a self-signed cert for localhost / 127.0.0.1 into `directory`.

    Returns (cert path, key path), both PEM; the cert is its own CA, so clients pass the
    cert path as the root certificate. Uses the `openssl` binary when present, else the
    `cryptography` package.
    """
    os.makedirs(directory, exist_ok=True)
    cert = os.path.join(directory, "cert.pem")
    key = os.path.join(directory, "key.pem")
    openssl = shutil.which("openssl")
    if openssl is not None:
        args = "req -x509 -nodes -days 2 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1"
        subprocess.run(
            [
                openssl,
                *args.split(),
                *("-keyout", key, "-out", cert, "-subj", "/CN=localhost"),
                *("-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1"),
                *("-addext", "basicConstraints=critical,CA:TRUE"),
            ],
            check=True,
            capture_output=True,
        )
        return cert, key
    try:
        _cryptography_cert(cert, key)
    except ImportError as exc:
        msg = "make_self_signed_cert needs the openssl binary or the cryptography package"
        raise RuntimeError(msg) from exc
    return cert, key


def _cryptography_cert(cert_path: str, key_path: str) -> None:
    """The same certificate as the openssl branch, made with the cryptography package."""
    import ipaddress  # noqa: PLC0415 - only this fallback needs it

    x509: Any = importlib.import_module("cryptography.x509")
    oid: Any = importlib.import_module("cryptography.x509.oid")
    hashes: Any = importlib.import_module("cryptography.hazmat.primitives.hashes")
    ser: Any = importlib.import_module("cryptography.hazmat.primitives.serialization")
    ec: Any = importlib.import_module("cryptography.hazmat.primitives.asymmetric.ec")
    private_key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(oid.NameOID.COMMON_NAME, "localhost")])
    now = _dt.datetime.now(_dt.timezone.utc)
    san = x509.SubjectAlternativeName(
        [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    )
    certificate = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(private_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - _dt.timedelta(minutes=5))
        .not_valid_after(now + _dt.timedelta(days=2))
        .add_extension(san, critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(private_key, hashes.SHA256())
    )
    with open(key_path, "wb") as f:
        f.write(
            private_key.private_bytes(ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption())
        )
    with open(cert_path, "wb") as f:
        f.write(certificate.public_bytes(ser.Encoding.PEM))
