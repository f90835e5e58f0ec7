"""The demo notebook runs top to bottom under nbval, and its text tables stay stable.

``--nbval-lax`` executes every cell and compares only the cells marked
``# NBVAL_CHECK_OUTPUT`` (a view printed as its text table) with the outputs stored in the
notebook; widgets and pictures are never compared.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "visualizer_demo.ipynb"


def test_demo_notebook_under_nbval(tmp_path):
    env = dict(os.environ, MPLBACKEND="Agg", JUPYTER_RUNTIME_DIR=str(tmp_path / "run"))
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--nbval-lax",
         "--nbval-cell-timeout=120", str(NOTEBOOK)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "passed" in done.stdout
