"""binder/ describes the same environment as pyproject.toml, CPU-only, simulator by default."""

from __future__ import annotations

from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

tomllib = pytest.importorskip("tomllib")  # Python 3.11+

ROOT = Path(__file__).resolve().parents[1]


def _binder_requirements() -> dict[str, Requirement]:
    reqs = {}
    for line in (ROOT / "binder" / "requirements.txt").read_text().splitlines():
        line = line.split("#", 1)[0].strip()
        if line and not line.startswith("-"):
            r = Requirement(line)
            reqs[canonicalize_name(r.name)] = r
    return reqs


def _project_dependencies() -> list[Requirement]:
    meta = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    deps = list(meta["dependencies"]) + list(meta["optional-dependencies"]["notebook"])
    return [Requirement(d) for d in deps]


def test_every_project_dependency_is_in_binder_and_compatible():
    binder = _binder_requirements()
    for dep in _project_dependencies():
        name = canonicalize_name(dep.name)
        assert name in binder, f"binder/requirements.txt lacks {dep.name}"
        pins = [s.version for s in binder[name].specifier if s.operator == "=="]
        for version in pins:
            assert dep.specifier.contains(version, prereleases=True), (
                f"binder pins {dep.name}=={version}, but pyproject asks {dep.specifier}"
            )
        if not pins:
            assert str(binder[name].specifier) == str(dep.specifier), dep.name


def test_binder_is_cpu_only_and_defaults_to_the_simulator():
    text = (ROOT / "binder" / "requirements.txt").read_text()
    assert "download.pytorch.org/whl/cpu" in text
    assert "export TIRX_TARGET=sim" in (ROOT / "binder" / "start").read_text()
    assert "pip install --no-deps -e ." in (ROOT / "binder" / "postBuild").read_text()
