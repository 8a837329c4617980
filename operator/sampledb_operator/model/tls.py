"""TLS for client and replication connections (spec.tls).

Pure data, no I/O. By default the operator runs a certificate authority per database and issues the server's
certificate from it (decide/children/tls.py says when; reconcilers/tls.py does it); `secretName` brings a certificate
from a
Secret of type kubernetes.io/tls with `ca.crt` (cert-manager's Certificate writes one), which the operator then only
reads. `required` refuses every connection over TCP that is not encrypted.
"""

from __future__ import annotations

from pydantic import Field

from sampledb_operator.model.schema import Rule, SpecModel, SubdomainName


class TLSSpec(SpecModel):
    """Encrypted connections to the database."""

    cel_rules = (
        Rule("!(has(self.required) && self.required) || !has(self.enabled) || self.enabled",
             "required needs enabled: a server without TLS cannot refuse unencrypted connections",
             field_path=".required"),
        Rule("!has(self.secretName) || !has(self.enabled) || self.enabled",
             "secretName needs enabled", field_path=".secretName"),
    )

    enabled: bool = Field(
        default=True,
        description="Serve TLS on the database's port (clients choose: libpq's default sslmode=prefer encrypts)."
        " Turning it off or on restarts the instances.")
    required: bool = Field(
        default=False,
        description="Refuse every connection over TCP that is not encrypted (pg_hba hostssl only). Needs enabled.")
    secret_name: SubdomainName | None = Field(
        default=None,
        description="A Secret of type kubernetes.io/tls in the database's namespace with tls.crt, tls.key and"
        " ca.crt (as cert-manager writes it) to serve instead of the operator's own certificate. Its names must"
        " cover the database's Services. A change of its content is loaded without a restart.")
