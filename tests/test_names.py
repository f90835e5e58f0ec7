"""docs/tirx-names.md (written by docs/name_status.py from the real TIRx): what it calls
supported is what tirx's ``T`` and ``T.cuda`` have, and (under the ``reference`` marker, with
the real package's python) the committed file is what the script writes now."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tirx import T

ROOT = Path(__file__).resolve().parent.parent
TABLE = ROOT / "docs" / "tirx-names.md"
SCRIPT = ROOT / "docs" / "name_status.py"


def _rows():
    """(namespace title, name, status) for every row of the generated tables."""
    section, out = None, []
    for line in TABLE.read_text().splitlines():
        head = re.fullmatch(r"## `(T|T\.cuda)`", line)
        if head:
            section = head.group(1)
            continue
        row = re.fullmatch(r"\| `([^`]+)` \| ([a-z ]+) \| .*\|", line)
        if row and section:
            out.append((section, row.group(1), row.group(2)))
    return out


def test_the_table_lists_both_namespaces():
    rows = _rows()
    assert {s for s, _, _ in rows} == {"T", "T.cuda"}
    assert len(rows) > 500  # the real TIRx 0.1.0a4 has 489 + 121 public names
    assert {st for _, _, st in rows} == {"supported", "not yet", "not planned"}


def test_supported_means_tirx_has_it():
    spaces = {"T": T, "T.cuda": T.cuda}
    wrong = [
        f"{s}.{name}: the table says {st!r}, tirx {'has' if hasattr(spaces[s], name) else 'lacks'} it"
        for s, name, st in _rows()
        if (st == "supported") != hasattr(spaces[s], name)
    ]
    assert not wrong, "docs/tirx-names.md is stale (run make names):\n" + "\n".join(wrong)


@pytest.mark.reference
def test_the_committed_table_is_current():
    ref = os.environ.get("TIRX_REFERENCE_PYTHON", "")
    if not ref:
        pytest.skip("set TIRX_REFERENCE_PYTHON to a python with apache-tvm-tirx==0.1.0a4")
    done = subprocess.run([ref, str(SCRIPT), "--check"], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr + done.stdout
