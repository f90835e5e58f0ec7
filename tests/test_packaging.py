"""What ``pip install .`` and a wheel carry, checked on a wheel built here from the checkout's
files: every folder of modules (found, not listed, by pyproject.toml's ``packages.find``), the
``tvm_tirx`` alias as a top-level package, the C launcher's source, and the launcher itself
where a C compiler exists (the build goes on without one). What an installed copy must offer
is in tests/test_installed.py; .ci/run installs the wheel into a fresh venv and runs that."""

from __future__ import annotations

import importlib.metadata
import os
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ("tirx", "widgets")  # the folders whose packages the wheel carries
ALIAS = Path("tirx/compat/tvm_tirx")  # installs as the top-level package tvm_tirx
LAUNCH_C = "tirx/backend/cuda/_launch.c"


def _source_files() -> list[Path]:
    """The checkout's files as a fresh clone would have them (tracked, plus new files git does
    not ignore), so that build outputs lying in the tree cannot hide a packaging mistake."""
    if shutil.which("git") and (ROOT / ".git").exists():
        out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                             capture_output=True, check=True)  # fmt: skip
        names = [n for n in out.stdout.decode().split("\0") if n]
        return [Path(n) for n in names if (ROOT / n).is_file()]
    skip = {".venv", "build", "dist", "__pycache__", ".git", ".pytest_cache", ".ruff_cache"}
    return [
        p.relative_to(ROOT)
        for p in ROOT.rglob("*")
        if p.is_file() and not skip & set(p.relative_to(ROOT).parts) and p.suffix != ".so"
    ]


def _module_folders() -> list[Path]:
    """Every folder under tirx/ and widgets/ that holds Python modules (relative to ROOT)."""
    folders = {f.parent for f in _source_files() if f.suffix == ".py" and f.parts[0] in SHIPPED}
    return sorted(folders)


def test_every_folder_of_modules_is_a_package():
    """``packages.find`` takes the folders with an ``__init__.py`` (namespaces are off, so no
    stray folder of scripts or data is shipped as a package); a new folder of modules without
    one would silently stay out of the wheel."""
    missing = [str(d) for d in _module_folders() if not (ROOT / d / "__init__.py").is_file()]
    assert not missing, (
        f"these folders hold modules but no __init__.py, so a wheel would leave them out: "
        f"{', '.join(missing)}; add an (empty) __init__.py"
    )


def _setuptools_ok() -> bool:
    try:
        version = importlib.metadata.version("setuptools")
    except importlib.metadata.PackageNotFoundError:
        return False
    return int(version.split(".")[0]) >= 68  # pyproject.toml's build requirement


def _build_wheel(tmp: Path, env: dict | None = None) -> zipfile.ZipFile:
    src = tmp / "src"
    for rel in _source_files():
        (src / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / rel, src / rel)
    cmd = [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp / "dist")]
    if _setuptools_ok():  # build with this environment's setuptools: no download
        cmd.append("--no-build-isolation")
    done = subprocess.run([*cmd, str(src)], capture_output=True, text=True, timeout=600,
                          env={**os.environ, **(env or {})})  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (wheel,) = (tmp / "dist").glob("tirx-*.whl")
    return zipfile.ZipFile(wheel)


@pytest.fixture(scope="module")
def wheel(tmp_path_factory) -> zipfile.ZipFile:
    return _build_wheel(tmp_path_factory.mktemp("wheel"))


def _installed_path(folder: Path) -> str:
    return "tvm_tirx" if folder == ALIAS else folder.as_posix()


def test_the_wheel_holds_every_module_of_every_package(wheel):
    names = set(wheel.namelist())
    folders = _module_folders()
    assert Path("tirx/isa") in folders and ALIAS in folders  # the ones once left out
    for rel in _source_files():
        if rel.suffix == ".py" and rel.parts[0] in SHIPPED:
            shipped = f"{_installed_path(rel.parent)}/{rel.name}"
            assert shipped in names, f"{rel} is not in the wheel (as {shipped})"
    assert not any(n.startswith(("tests/", "benchmarks/", "notebooks/")) for n in names)
    assert not any(n.startswith("tirx/compat/") for n in names)  # the alias ships once


def test_the_wheel_carries_the_grid_front_end(wheel):
    """The views' clickable grid draws itself with widgets/cellgrid.js (package data)."""
    assert wheel.read("widgets/cellgrid.js") == (ROOT / "widgets/cellgrid.js").read_bytes()


def test_the_wheel_carries_the_launcher_and_its_source(wheel):
    names = wheel.namelist()
    assert LAUNCH_C in names
    assert wheel.read(LAUNCH_C) == (ROOT / LAUNCH_C).read_bytes()
    built = [n for n in names if n.startswith("tirx/backend/cuda/_launch.") and n.endswith(".so")]
    compiler = (sysconfig.get_config_var("CC") or "cc").split()[0]
    headers = Path(sysconfig.get_paths()["include"], "Python.h").is_file()
    if shutil.which(compiler) and headers:
        assert len(built) == 1, names  # built where a compiler and Python's headers exist
    entry_points = next(n for n in names if n.endswith(".dist-info/entry_points.txt"))
    assert "tirx = tirx.cli:main" in wheel.read(entry_points).decode()


def test_without_a_c_compiler_the_wheel_builds_without_the_launcher(tmp_path):
    """setup.py marks the extension optional: no compiler means the Python launcher only."""
    wheel = _build_wheel(tmp_path, env={"CC": "/bin/false"})
    names = wheel.namelist()
    assert not [n for n in names if n.endswith(".so")]
    assert LAUNCH_C in names and "tirx/isa/__init__.py" in names
