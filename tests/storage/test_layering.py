"""storage imports neither protocol nor coordinator (architecture 2.2)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

_PROBE = """
import sys
import storage.base, storage.batch, storage.codec, storage.memory, storage.postgres
import storage.records, storage.schema, storage.sqlite, storage.url, storage.writer
bad = sorted(m for m in sys.modules if m.split(".")[0] in ("protocol", "coordinator"))
print(",".join(bad))
"""


def test_storage_imports_no_sibling_package() -> None:
    out = subprocess.run(
        [sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == ""
