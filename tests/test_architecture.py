"""The layering rules of DESIGN.md, checked from the imports in the source."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PKG = ROOT / "tirx"


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Absolute names of everything a module imports (relative imports resolved)."""
    tree = ast.parse(path.read_text())
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    out = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                name = ".".join(base + ([node.module] if node.module else []))
            else:
                name = node.module or ""
            out.update(f"{name}.{a.name}" for a in node.names)
    return out


def _files(sub: str):
    return sorted((PKG / sub).rglob("*.py")) if sub else sorted(PKG.rglob("*.py"))


def _tirx_deps(path: Path) -> set[str]:
    return {i for i in _imports(path) if i == "tirx" or i.startswith("tirx.")}


def _allowed(dep: str, prefixes) -> bool:
    return any(dep == p or dep.startswith(p + ".") for p in prefixes)


RULES = {
    # package: tirx modules it may import (besides itself)
    "layout": ["tirx.errors"],
    "ir": ["tirx.layout", "tirx.dtypes", "tirx.errors"],
    "transform": ["tirx.ir", "tirx.layout", "tirx.dtypes", "tirx.errors"],
    "sim": ["tirx.ir", "tirx.dtypes", "tirx.errors", "tirx.config"],
    "backend/cuda": [
        "tirx.ir",
        "tirx.dtypes",
        "tirx.errors",
        "tirx.config",
        "tirx.executable",
        "tirx.backend.cuda",
    ],
    "script": ["tirx.ir", "tirx.layout", "tirx.dtypes", "tirx.errors", "tirx.script"],
}


@pytest.mark.parametrize("sub", sorted(RULES))
def test_package_imports_follow_the_layers(sub):
    own = "tirx." + sub.replace("/", ".")
    bad = []
    for path in _files(sub):
        for dep in _tirx_deps(path):
            if not _allowed(dep, RULES[sub] + [own]):
                bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


def test_backends_do_not_import_each_other():
    for path in _files("sim"):
        assert not any(d.startswith("tirx.backend") for d in _tirx_deps(path)), path
    for path in _files("backend"):
        assert not any(d.startswith("tirx.sim") for d in _tirx_deps(path)), path


FORBIDDEN_IN_CORE = ("widgets", "ipywidgets", "matplotlib", "IPython")


def test_core_never_imports_the_notebook_layer():
    bad = []
    for path in _files(""):
        if "compat" in path.parts:
            continue
        for name in _imports(path):
            if name.split(".")[0] in FORBIDDEN_IN_CORE:
                bad.append(f"{path.relative_to(ROOT)} imports {name}")
    # the one sanctioned door: %load_ext tirx loads widgets.magic by name, at call time
    assert not bad, "\n".join(bad)


def test_widgets_use_only_public_tirx_names():
    public = {"tirx", "tirx.layout", "tirx.errors"}
    bad = []
    for path in sorted((ROOT / "widgets").rglob("*.py")):
        for dep in {i for i in _imports(path) if i == "tirx" or i.startswith("tirx.")}:
            head = dep.rsplit(".", 1)[0] if dep.count(".") >= 1 else dep
            if dep not in public and head not in public:
                bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


def test_importing_tirx_is_light():
    code = (
        "import sys, tirx\n"
        "heavy = [m for m in ('torch', 'cuda', 'cuda.bindings', 'matplotlib', 'IPython',"
        " 'ipywidgets', 'numpy') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import tirx pulled in: {out.stdout.strip()}"


def test_modules_stay_small():
    big = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in _files("")
        if (n := len(p.read_text().splitlines())) > 600
    ]
    assert not big, "split these modules:\n" + "\n".join(big)
