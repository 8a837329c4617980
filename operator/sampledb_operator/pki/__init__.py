"""X.509 for the databases' TLS: the operator's certificate authorities and the servers' certificates."""
