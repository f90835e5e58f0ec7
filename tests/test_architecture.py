"""The layering rules of DESIGN.md, checked from the imports in the source."""

from __future__ import annotations

import ast
import os
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


# the stage-neutral leaves every package may use
NEUTRAL = ["tirx.errors", "tirx.dtypes", "tirx.catalog", "tirx.frozen", "tirx.collector"]
RULES = {
    # package: tirx modules it may import (besides itself)
    "layout": ["tirx.errors", "tirx.frozen"],
    "ir": ["tirx.layout", *NEUTRAL],
    "isa": ["tirx.ir", "tirx.layout", *NEUTRAL],
    "transform": ["tirx.ir", "tirx.layout", "tirx.isa", *NEUTRAL],
    "sim": ["tirx.ir", "tirx.config", *NEUTRAL],
    "backend/cuda": [
        "tirx.ir",
        "tirx.config",
        "tirx.executable",
        "tirx.files",
        "tirx.backend.cuda",
        # a saved kernel's loading (stored.py): the file format, its signature and target
        "tirx.artifact",
        "tirx.signature",
        "tirx.target",
        "tirx.layout",
        *NEUTRAL,
    ],
    "script": ["tirx.ir", "tirx.layout", "tirx.script", *NEUTRAL],
    # a family uses the stage machinery its stages need (never another family: see below)
    "families": [
        "tirx.ir",
        "tirx.layout",
        "tirx.isa",
        "tirx.script",
        "tirx.sim",
        "tirx.backend.cuda",
        "tirx.config",
        *NEUTRAL,
    ],
}
# The top-level modules, each with the tirx modules it may import (besides tirx itself for the
# package __init__): the leaves import nothing of tirx; the front end no backend.
TOP_LEVEL = {
    "catalog.py": ["tirx.frozen"],
    "collector.py": [],
    "errors.py": ["tirx.frozen"],
    "files.py": [],
    "frozen.py": [],
    "version.py": [],
    "config.py": ["tirx.errors"],
    "dtypes.py": ["tirx.errors", "tirx.frozen"],
    "fingerprints.py": ["tirx.files", "tirx.layout", "tirx.script", *NEUTRAL],
    "frontend_format.py": ["tirx.files"],
    "frontend_cache.py": [
        "tirx.config",
        "tirx.files",
        "tirx.frontend_format",
        "tirx.version",
        "tirx.fingerprints",
        "tirx.ir",
        "tirx.isa",
        "tirx.script",
        *NEUTRAL,
    ],
    # a target asks the driver for the GPU's arch, and NVRTC which archs it compiles for
    "target.py": [
        "tirx.config",
        "tirx.backend.cuda.driver",
        "tirx.backend.cuda.libnvrtc",
        *NEUTRAL,
    ],  # fmt: skip
    "executable.py": [
        "tirx.ir",
        "tirx.target",
        "tirx.sim",
        "tirx.config",
        "tirx.backend.cuda",
        "tirx.signature",
        "tirx.artifact",
        *NEUTRAL,
    ],
    "signature.py": ["tirx.ir", *NEUTRAL],
    "timing.py": [*NEUTRAL],
    "tuning.py": ["tirx.timing", "tirx.tuning_store", "tirx.signature", "tirx.compile", *NEUTRAL],
    "tuning_store.py": ["tirx.config", "tirx.files", "tirx.version", *NEUTRAL],
    "torch_ops.py": [
        "tirx.signature",
        "tirx.compile",
        "tirx.executable",
        "tirx.script",
        *NEUTRAL,
    ],
    # the file format only: loading is the CUDA backend's (backend/cuda/stored.py)
    "artifact.py": ["tirx.files", "tirx.version", "tirx.backend.cuda.abi", *NEUTRAL],
    "profile_runner.py": ["tirx.ir", "tirx.target", "tirx.backend.cuda", *NEUTRAL],
    "compile.py": [
        "tirx.frontend_cache",
        "tirx.executable",
        "tirx.ir",
        "tirx.isa",
        "tirx.script",
        "tirx.target",
        "tirx.transform",
        "tirx.backend.cuda",
        *NEUTRAL,
    ],
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


@pytest.mark.parametrize("name", sorted(TOP_LEVEL))
def test_top_level_modules_follow_the_layers(name):
    path = PKG / name
    bad = [d for d in _tirx_deps(path) if d != "tirx" and not _allowed(d, TOP_LEVEL[name])]
    assert not bad, f"tirx/{name} imports " + ", ".join(sorted(bad))


def test_every_top_level_module_has_a_rule():
    known = set(TOP_LEVEL) | {
        "__init__.py",
        "__main__.py",
        "cli.py",
        "cli_run.py",
        "cli_load.py",
        "demo.py",
    }
    assert {p.name for p in PKG.glob("*.py")} <= known


def test_backends_do_not_import_each_other():
    for path in _files("sim"):
        assert not any(d.startswith("tirx.backend") for d in _tirx_deps(path)), path
    for path in _files("backend"):
        assert not any(d.startswith("tirx.sim") for d in _tirx_deps(path)), path


FORBIDDEN_IN_CORE = ("widgets", "ipywidgets", "anywidget", "matplotlib", "IPython")
# The command line sits above both layers: `tirx layout` draws with the notebook layer's
# functions, imported inside that command only (checked below: never at module level).
ABOVE_THE_LAYERS = {"tirx/cli.py": {"widgets"}}


def _top_level_imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    body = [n for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return {a.name if isinstance(n, ast.Import) else n.module or "" for n in body for a in n.names}


def test_core_never_imports_the_notebook_layer():
    bad = []
    for path in _files(""):
        if "compat" in path.parts:
            continue
        rel = path.relative_to(ROOT).as_posix()
        allowed = ABOVE_THE_LAYERS.get(rel, set())
        for name in _imports(path):
            if name.split(".")[0] in set(FORBIDDEN_IN_CORE) - allowed:
                bad.append(f"{rel} imports {name}")
        for name in _top_level_imports(path):
            if name.split(".")[0] in allowed:
                bad.append(f"{rel} imports {name} at module level (only inside its command)")
    # the one sanctioned door: %load_ext tirx loads widgets.magic by name, at call time
    assert not bad, "\n".join(bad)


def test_widgets_use_only_public_tirx_names():
    public = {"tirx", "tirx.layout", "tirx.errors", "tirx.isa"}
    bad = []
    for path in sorted((ROOT / "widgets").rglob("*.py")):
        for dep in {i for i in _imports(path) if i == "tirx" or i.startswith("tirx.")}:
            head = dep.rsplit(".", 1)[0] if dep.count(".") >= 1 else dep
            if dep not in public and head not in public:
                bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


@pytest.mark.parametrize("module", ["tirx", "tirx.cli"])
def test_importing_tirx_is_light(module):
    # typing and difflib too: what needs them (rare annotations, an error's suggestions)
    # imports them when it runs
    code = (
        f"import sys, {module}\n"
        "heavy = [m for m in ('torch', 'cuda', 'cuda.bindings', 'matplotlib', 'IPython',"
        " 'ipywidgets', 'numpy', 'widgets', 'typing', 'difflib') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"import {module} pulled in: {out.stdout.strip()}"


def test_a_cold_compile_for_a_named_arch_stays_light(tmp_path):
    """Defining the seed and compiling it to a CUBIN in a fresh process imports no numpy,
    torch or CUDA bindings (numpy's import alone is several times tirx's own share of a cold
    compile, benchmarks/compile.py): the front end's constant folding rounds with struct."""
    code = (
        "import sys, tirx\n"
        "from tirx.examples.warp_matmul import warp_matmul\n"
        "assert tirx.compile(warp_matmul, target='cuda -arch=sm_90').cubin\n"
        "heavy = [m for m in ('torch', 'cuda.bindings', 'matplotlib', 'numpy', 'widgets',"
        " 'difflib') if m in sys.modules]\n"
        "print(','.join(heavy))\n"
    )
    env = {**os.environ, "TIRX_CACHE_DIR": str(tmp_path)}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env=env)  # fmt: skip
    assert out.stdout.strip() == "", f"a cold compile pulled in: {out.stdout.strip()}"


def test_modules_stay_small():
    big = [
        f"{p.relative_to(ROOT)}: {n} lines"
        for p in _files("")
        if (n := len(p.read_text().splitlines())) > 600
    ]
    assert not big, "split these modules:\n" + "\n".join(big)


# ------------------------------------------------------------------------------ families

from tirx import catalog  # noqa: E402

STAGE_PACKAGES = ("ir", "layout", "script", "transform", "isa", "backend", "sim")


def _module_of(path: Path) -> str:
    return _module_name(path)


def _family_files(folder: str):
    return sorted((PKG / "families" / folder).glob("*.py"))


def test_stage_packages_reach_families_only_through_the_catalog():
    # the catalog's stage(row, name) is the one door (an importlib call, no import statement)
    bad = [
        f"{path.relative_to(ROOT)} imports {dep}"
        for sub in STAGE_PACKAGES
        for path in _files(sub)
        for dep in _tirx_deps(path)
        if dep.startswith("tirx.families")
    ]
    assert not bad, "\n".join(bad)


def test_no_family_imports_another_family():
    bad = []
    for row in catalog.ROWS:
        own = f"tirx.families.{row.folder}"
        for path in _family_files(row.folder):
            for dep in _tirx_deps(path):
                if dep.startswith("tirx.families.") and not _allowed(dep, [own]):
                    bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


def test_a_familys_simulator_never_reads_the_contracts():
    # the simulator is an independent reading of the ISA: no sim*.py imports tirx.isa or a
    # contract module (isa*.py) of its family (tests/test_independence.py shows the effect)
    bad = []
    for row in catalog.ROWS:
        for path in _family_files(row.folder):
            if not path.name.startswith("sim"):
                continue
            for dep in _tirx_deps(path):
                tail = dep.split(".")
                contract = len(tail) > 3 and tail[3].startswith("isa")
                if dep.startswith("tirx.isa") or (dep.startswith("tirx.families.") and contract):
                    bad.append(f"{path.relative_to(ROOT)} imports {dep}")
    assert not bad, "\n".join(bad)


def test_the_cuda_side_never_reads_the_contracts():
    bad = [
        f"{path.relative_to(ROOT)} imports {dep}"
        for row in catalog.ROWS
        for path in _family_files(row.folder)
        if path.name.startswith("cuda")
        for dep in _tirx_deps(path)
        if dep.startswith("tirx.isa") or ".isa" in dep
    ]
    assert not bad, "\n".join(bad)


def test_every_family_folder_is_a_catalog_row_with_its_stages():
    folders = {
        p.name for p in (PKG / "families").iterdir() if p.is_dir() and p.name != "__pycache__"
    }
    assert folders == {row.folder for row in catalog.ROWS}
    for row in catalog.ROWS:
        names = {p.stem for p in _family_files(row.folder)}
        assert "__init__" in names, row.folder
        stages = {n for n in names if n in catalog.STAGES}
        assert stages == set(row.stages), f"{row.folder}: files {sorted(stages)}, row {row.stages}"
        for name in names - {"__init__"} - stages:  # files by role: <stage>_<role>.py
            assert name.split("_")[0] in row.stages, f"{row.folder}/{name}.py: no stage prefix"


def _stage(row, name):
    return catalog.stage(row, name) if name in row.stages else None


# the families' node classes of the script level only (lowering replaces them)
SCRIPT_LEVEL = {"ElemAtomic", "ElemSharedAddress"}


@pytest.mark.parametrize("row", catalog.ROWS, ids=lambda r: r.folder)
def test_each_familys_modules_define_what_the_stages_call(row):
    from tirx.ir import nodes as ir

    isa = _stage(row, "isa")
    if row.ptx:
        assert isa is not None and {s.family.value for s in isa.SPECS} == set(row.ptx)
        assert hasattr(_stage(row, "sim"), "compile_call"), f"{row.folder}: no sim compile_call"
    if row.keys:
        assert hasattr(_stage(row, "script"), "parse_call"), f"{row.folder}: no parse_call"
    for node in row.nodes:
        own = catalog.node_class(node)  # a class of the family's nodes.py, else the core's
        cls = own or getattr(ir, node)
        stmt = issubclass(cls, ir.Stmt)
        if own is not None:  # the printer and the lowering find their rules there
            printed = ("visit_" if stmt else "leave_") + node
            assert hasattr(_stage(row, "script"), printed), f"{row.folder}: no {printed}"
            lower = _stage(row, "lower")
            rules = ("enter_" + node, "leave_" + node)
            named = (*getattr(lower, "REBUILT", ()), *getattr(lower, "KEPT", ()))
            assert any(hasattr(lower, r) for r in rules) or node in named, f"{row.folder}: {node}"
        sim_rule = ("compile_" if stmt else "eval_") + node
        if node not in SCRIPT_LEVEL:
            assert hasattr(_stage(row, "sim"), sim_rule), f"{row.folder}: no sim {sim_rule}"
        if node in SCRIPT_LEVEL:  # lowered away: the family's lowering rule replaces it
            rules = ("enter_" + node, "leave_" + node)
            assert any(hasattr(_stage(row, "lower"), r) for r in rules), f"{row.folder}: {node}"
            continue
        cuda_rule = ("visit_" if stmt else "leave_") + node  # it reaches codegen
        assert hasattr(_stage(row, "cuda"), cuda_rule), f"{row.folder}: no {cuda_rule}"


# ------------------------------------------------------------------------ import hygiene


def _private_uses(path: Path):
    """``from X import _name`` and ``module._name`` of another tirx/widgets module."""
    tree = ast.parse(path.read_text())
    mod = _module_name(path)
    package = mod if path.name == "__init__.py" else mod.rsplit(".", 1)[0]
    modules = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parts = parts[: len(parts) - node.level + 1]
                base = ".".join(parts + ([node.module] if node.module else []))
            for a in node.names:
                full = f"{base}.{a.name}"
                if _python_module(full):
                    modules[a.asname or a.name] = full
                elif a.name.startswith("_") and not a.name.startswith("__"):
                    yield f"from {base} import {a.name}"
        elif isinstance(node, ast.Import):
            for a in node.names:
                if _python_module(a.name):
                    modules[a.asname or a.name.split(".")[0]] = a.name
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in modules
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            yield f"{node.value.id}.{node.attr} ({modules[node.value.id]})"


def _python_module(name: str) -> bool:
    """Whether ``name`` is a module of the tree (a C extension counts: its source is there)."""
    rel = ROOT / Path(*name.split("."))
    return (
        any(rel.with_suffix(s).is_file() for s in (".py", ".c")) or (rel / "__init__.py").is_file()
    )


def test_no_private_name_is_imported_across_modules():
    bad = [
        f"{path.relative_to(ROOT)}: {use}"
        for path in [*_files(""), *sorted((ROOT / "widgets").rglob("*.py"))]
        for use in _private_uses(path)
    ]
    assert not bad, "\n".join(bad)


def _import_graph() -> dict[str, set[str]]:
    """Module -> the tirx/widgets modules it imports, at module level or in a function."""
    paths = {_module_name(p): p for p in [*_files(""), *sorted((ROOT / "widgets").rglob("*.py"))]}

    def target(name: str):
        while name and name not in paths:
            name = name.rsplit(".", 1)[0] if "." in name else ""
        return name or None

    graph = {}
    for mod, path in paths.items():
        deps = set()
        for name in _imports(path):
            found = target(name)
            if found and found != mod:
                deps.add(found)
        graph[mod] = deps
    return graph


def _cycles(graph) -> list[frozenset[str]]:
    """The strongly connected components of more than one module (iterative Tarjan)."""
    index, low, on, stack, out, counter = {}, {}, set(), [], [], [0]
    for root in graph:
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = counter[0]
        counter[0] += 1
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = counter[0]
                    counter[0] += 1
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(graph.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = set()
                while True:
                    w = stack.pop()
                    on.discard(w)
                    comp.add(w)
                    if w == v:
                        break
                if len(comp) > 1:
                    out.append(frozenset(comp))
    return out


# The cycles that stay, each explained in docs/architecture.md ("Import cycles"): the IR's node
# classes live in nodes.py and the expression-node module that nodes.py gathers (the visitor's
# closed set of core classes), with nodes.py's operators folding through build.py; and an axis
# term's ``+``, which builds a layout spec.
EXPLAINED_CYCLES = {
    frozenset(
        {
            "tirx.ir.nodes",
            "tirx.ir.build",
            "tirx.ir.expr_nodes",
        }
    ),
    frozenset({"tirx.layout.axes", "tirx.layout.spec"}),
}


def test_at_most_the_two_explained_import_cycles_remain():
    cycles = set(_cycles(_import_graph()))
    assert cycles <= EXPLAINED_CYCLES, "\n".join(
        " <-> ".join(sorted(c)) for c in cycles - EXPLAINED_CYCLES
    )
    doc = (ROOT / "docs" / "architecture.md").read_text()
    for cycle in EXPLAINED_CYCLES:
        for mod in cycle:
            assert mod.split(".", 1)[1].replace(".", "/") + ".py" in doc, mod


def test_the_vocabulary_does_not_import_the_parser():
    # T and @T.macro are vocabulary: the parser imports them, never the other way round
    parser = {"parser", "statements", "evaluator", "calls", "expansion", "forms", "loops"}
    for name in ("namespace", "macros"):
        deps = _tirx_deps(PKG / "script" / f"{name}.py")
        bad = [d for d in deps if d.startswith("tirx.script.") and d.split(".")[2] in parser]
        assert not bad, f"tirx/script/{name}.py imports {bad}"


def test_a_family_statement_node_is_a_leaf_of_the_stage_walkers_without_naming_it():
    """A new family's statement node (its catalog row's ``nodes``) needs no entry in the index
    pass or the shared-row check: both take every family statement as a leaf whose addresses
    its family's lowering wrote and which no Assign sets."""
    from tirx.ir import assignments
    from tirx.ir import nodes as ir
    from tirx.transform import inline_indices

    classes = [catalog.node_class(name) or getattr(ir, name) for name in catalog.node_names()]
    statements = [cls for cls in classes if issubclass(cls, ir.Stmt)]
    assert {c.__name__ for c in statements} >= {"Atomic", "Assume", "HalfConversion"}
    for cls in statements:
        assert inline_indices._is_plain(cls), cls.__name__
        assert assignments._Assignments._default(None, cls) is not None, cls.__name__
    assert assignments._Assignments._default(None, ir.Assign) is None  # a core node: its own rule


def test_a_family_statement_that_holds_statements_is_no_leaf(monkeypatch):
    """A family statement with a statement inside (a body) is not taken as a leaf: the index
    pass and the shared-row check need their own rule for it, and meet it as unknown."""
    import dataclasses

    from tirx.ir import assignments, visitor
    from tirx.ir import nodes as ir
    from tirx.transform import inline_indices

    module = catalog.stage("thread_ops", "nodes")
    fields = [("body", "Stmt"), ("span", "Span | None", dataclasses.field(default=None))]
    guarded = dataclasses.make_dataclass("Guarded", fields, bases=(ir.Stmt,), frozen=True)
    guarded.__module__ = module.__name__
    monkeypatch.setattr(module, "Guarded", guarded, raising=False)
    thread_ops = next(r for r in catalog.ROWS if r.folder == "thread_ops")
    monkeypatch.setitem(catalog._BY_NODE, "Guarded", thread_ops)  # as if its row named it
    assert visitor.is_node_class(guarded)
    assert not visitor.leaf_statement(guarded) and not inline_indices._is_plain(guarded)
    assert assignments._Assignments._default(None, guarded) is None
    from tirx.families.thread_ops.nodes import NanoSleep

    assert visitor.leaf_statement(NanoSleep) and inline_indices._is_plain(NanoSleep)


def test_the_docs_table_of_families_is_the_catalogs():
    """docs/architecture.md's table of families has one line per catalog row, with the row's
    stages (the table is written by hand; this keeps it the catalog's)."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    lines = {}
    for line in text.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if line.startswith("| `") and len(cells) == 4 and cells[0].strip("`") in _FOLDERS:
            lines[cells[0].strip("`")] = tuple(x.strip() for x in cells[3].split(","))
    assert set(lines) == set(_FOLDERS)
    for row in catalog.ROWS:
        assert set(lines[row.folder]) == set(row.stages), row.folder


_FOLDERS = {row.folder for row in catalog.ROWS}
