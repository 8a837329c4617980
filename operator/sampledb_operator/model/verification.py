"""Backup verification: the request annotation, the Verified condition of a SampleDBBackup and its reasons.

Invariants: these are the only definitions of the names; a verification's outcome is one of
`VerifyReason`, with `verified` True exactly for VERIFIED and RESTORE_ONLY.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Final

VERIFY_ANNOTATION: Final = "sampledb.io/verify"
"""On a SampleDBBackup: a request for a one-off verification. Any non-empty value other than the one
the latest verification answered (status.verification.request) starts one, e.g. a timestamp."""
VERIFIED_CONDITION: Final = "Verified"
"""The condition a SampleDBBackup carries once a verification has started."""
VERIFICATION_FAILED_HEALTH: Final = "VerificationFailed"
"""BackupHealthy's reason on the SampleDB while a backup's latest verification failed."""
REQUEST_ANNOTATION: Final = "sampledb.io/verify-request"
"""On a verify Job: the request it answers (empty for spec.backup.verify's automatic one)."""


class VerifyReason(StrEnum):
    """Reasons of the Verified condition."""

    VERIFYING = "Verifying"  # Unknown: the verify Job runs
    VERIFIED = "Verified"  # True: intact, restores, every table matches the recorded statistics
    RESTORE_ONLY = "RestoreOnly"  # True: intact and restores; no statistics recorded, data not compared
    CHECKSUM_MISMATCH = "ChecksumMismatch"  # False: a file is damaged, truncated or missing
    RESTORE_FAILED = "RestoreFailed"  # False: pg_restore failed
    DATA_MISMATCH = "DataMismatch"  # False: restored tables differ from the recorded statistics
    VERIFICATION_FAILED = "VerificationFailed"  # False: the Job failed otherwise (deadline, config, internal)
    NOT_VERIFIABLE = "NotVerifiable"  # False: the backup has no location (nothing to verify)


SUCCESS_REASONS: Final = frozenset({VerifyReason.VERIFIED, VerifyReason.RESTORE_ONLY})
