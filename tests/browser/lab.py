"""A throwaway JupyterLab server on 127.0.0.1 for browser tests (recipe in ENV.md).

The server gets its own config, settings and workspace directories under a temporary folder
(announcements off, every notebook cell kept in the DOM) and serves a copy of the notebooks so
running them never touches the repository. It runs in its own process group, killed at exit.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
]


@dataclass
class Lab:
    url: str
    token: str
    root: Path
    log: Path

    def notebook_url(self, name: str) -> str:
        return f"{self.url}/lab/tree/{name}?token={self.token}&reset"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _write_json(path: Path, data) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data))


@contextlib.contextmanager
def jupyter_lab(tmp: Path, notebooks: list[Path], timeout: float = 60.0, theme: str | None = None):
    """Start JupyterLab serving copies of ``notebooks``; yield a :class:`Lab`. ``theme``: the
    theme to start in (``"JupyterLab Dark"``; default: JupyterLab's light one)."""
    root = tmp / "root"
    root.mkdir(parents=True, exist_ok=True)
    for nb in notebooks:
        shutil.copy(nb, root / nb.name)
    config = tmp / "config"
    _write_json(
        config / "labconfig" / "page_config.json",
        {"disabledExtensions": {"@jupyterlab/apputils-extension:announcements": True}},
    )
    settings = tmp / "settings"
    _write_json(
        settings / "@jupyterlab" / "notebook-extension" / "tracker.jupyterlab-settings",
        {"windowingMode": "none"},
    )
    _write_json(
        settings / "@jupyterlab" / "apputils-extension" / "notification.jupyterlab-settings",
        {"fetchNews": "false", "checkForUpdates": False},
    )
    if theme is not None:
        _write_json(
            settings / "@jupyterlab" / "apputils-extension" / "themes.jupyterlab-settings",
            {"theme": theme},
        )
    port, token = _free_port(), secrets.token_hex(16)
    env = dict(os.environ, JUPYTER_CONFIG_DIR=str(config), JUPYTER_RUNTIME_DIR=str(tmp / "run"),
               MPLBACKEND="Agg", PYTHONUNBUFFERED="1")  # fmt: skip
    log = tmp / "jupyter.log"
    cmd = [
        sys.executable, "-m", "jupyterlab", "--no-browser", "--allow-root",
        "--ip=127.0.0.1", f"--port={port}", f"--IdentityProvider.token={token}",
        "--LabApp.expose_app_in_browser=True", f"--ServerApp.root_dir={root}",
        f"--LabApp.user_settings_dir={settings}", f"--LabApp.workspaces_dir={tmp / 'ws'}",
        "--ServerApp.open_browser=False",
    ]  # fmt: skip
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            cmd, cwd=root, env=env, stdout=out, stderr=subprocess.STDOUT, start_new_session=True
        )
    url = f"http://127.0.0.1:{port}"

    def stop(sig=signal.SIGTERM):
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, sig)

    atexit.register(stop, signal.SIGKILL)  # even if the test run itself is interrupted
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(f"{url}/api/status?token={token}", timeout=2) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"JupyterLab did not start:\n{log.read_text()[-3000:]}")
            time.sleep(0.2)
        yield Lab(url, token, root, log)
    finally:
        stop()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            stop(signal.SIGKILL)
            proc.wait(timeout=10)
        atexit.unregister(stop)
