"""The client's TLS: an ssl.SSLContext from the CA and client certificate material kube.kubeconfig reads.

Role: trust the API server (its CA, else the system's CAs) and present the client certificate, from
files or from inline bytes (kubeconfig `*-data` fields, an exec plugin's clientCertificateData).

Invariants:
- every problem is a KubeconfigError whose message starts with the label(s) of the Material(s) at fault
  ("system CA certificates" when the system's CAs cannot be loaded);
- inline certificate/key bytes reach ssl.SSLContext.load_cert_chain through files in a private
  temporary directory (mode 0700, files 0600) that is removed before tls_context returns; material
  given as a path is read where it is, never copied;
- `insecure` turns off both hostname checking and certificate verification.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import ssl
import tempfile
from collections.abc import Iterator

from sampledb_operator.kube.kubeconfig import KubeconfigError, Material


def tls_context(
    ca: Material | None, certificate: Material | None, key: Material | None, *, insecure: bool = False
) -> ssl.SSLContext:
    """An ssl.SSLContext trusting `ca` (else the system's CAs) and presenting the client certificate, if any.

    Inline certificate/key bytes are written to a private temporary directory for load_cert_chain
    and removed right after; `insecure` turns verification off.
    """
    try:
        if ca is None:
            context = ssl.create_default_context()
        elif ca.data is not None:  # PEM text, or DER bytes
            context = ssl.create_default_context(cadata=ca.data.decode("ascii") if b"-----BEGIN" in ca.data
                                                 else ca.data)
        else:
            context = ssl.create_default_context(cafile=ca.path)
    except (ssl.SSLError, OSError, ValueError) as exc:
        raise KubeconfigError(f"{ca.label if ca else 'system CA certificates'}: {exc}") from exc
    if certificate is not None:
        try:
            with _files(certificate, key) as (cert_path, key_path):
                context.load_cert_chain(cert_path, keyfile=key_path)
        except (ssl.SSLError, OSError, ValueError) as exc:
            labels = certificate.label + (f", {key.label}" if key else "")
            raise KubeconfigError(f"{labels}: cannot load the client certificate: {exc}") from exc
    if insecure:
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    return context


@contextlib.contextmanager
def _files(certificate: Material, key: Material | None) -> Iterator[tuple[str, str | None]]:
    """Paths for the certificate and key: their own files, or private copies of inline data."""
    if certificate.data is None and (key is None or key.data is None):
        yield str(certificate.path), key.path if key else None
        return
    directory = tempfile.mkdtemp(prefix="sampledb-kube-")  # mode 0700
    try:
        os.chmod(directory, 0o700)
        cert_path = _private_copy(directory, "client.crt", certificate)
        yield cert_path, _private_copy(directory, "client.key", key) if key else None
    finally:
        shutil.rmtree(directory, ignore_errors=True)


def _private_copy(directory: str, name: str, material: Material) -> str:
    if material.data is None:
        return str(material.path)
    path = os.path.join(directory, name)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "wb") as handle:
        handle.write(material.data)
    return path
