"""PEM files a libpq client reads (sslrootcert, sslcert, sslkey): written private (0600), as libpq wants a key."""

from __future__ import annotations

import os
from pathlib import Path


def write_pem_files(folder: Path, texts: dict[str, str]) -> dict[str, str]:
    """Each text in `folder` under its key's name, mode 0600; the paths by key."""
    folder.mkdir(parents=True, exist_ok=True)
    out = {}
    for key, text in texts.items():
        path = folder / key
        path.write_text(text)
        os.chmod(path, 0o600)
        out[key] = str(path)
    return out
