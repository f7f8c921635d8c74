"""Replace a file in one step, so that no reader ever sees half of it.

node_exporter's textfile collector reads ``*.prom`` whenever it is scraped, and a CI job may pick up
junit.xml while a re-render is still writing: both must see the old file or the new one, never a torn one.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path


def write_atomic(path: Path, data: bytes, mode: int = 0o644) -> Path:
    """Write ``data`` to a temporary file beside ``path`` and rename it over ``path``.

    The temporary name starts with a dot and ends in ``.tmp`` so that collectors matching ``*.prom`` skip
    it; it lives in the same folder because a rename is only atomic within one file system.
    """
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path
