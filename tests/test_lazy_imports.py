"""The construct families load lazily (docs/architecture.md, "What loads when").

A kernel that uses no warp collective, atomic, math intrinsic, bit cast, fp8 value or
vectorized loop imports none of those families' modules, in the parser, the lowering, the
codegen or the simulator; a kernel that uses one imports that family's modules. Each check runs
in a fresh interpreter, since a module imported once stays in ``sys.modules``.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

# Every module a family keeps to itself: the modules of its folder (tirx/catalog.py), and the
# language forms' and dtypes' own modules of the stage packages.
FORM_MODULES = [
    "tirx.script.storage",
    "tirx.transform.vectorize",
    "tirx.backend.cuda.bitcast",
    "tirx.backend.cuda.vector",
    "tirx.backend.cuda.fp8",
    "tirx.sim.fp8",
    "tirx.sim.reinterpret",
    "tirx.sim.pointer_alignment",
]
FAMILY_FOLDER_MODULES = sorted(
    f"tirx.families.{p.parent.name}.{p.stem}"
    for p in (ROOT / "tirx" / "families").glob("*/*.py")
    if p.stem != "__init__"
)
ALL_FAMILY_MODULES = FORM_MODULES + FAMILY_FOLDER_MODULES
# the seed kernel's own families: their contracts and simulator semantics load, no others
SEED_FAMILIES = ("tirx.families.mma.", "tirx.families.ldmatrix.")

HEADER = """\
from tirx import T


@T.function
"""

# one small kernel per family, and the modules each one must import (one per stage it reaches)
KERNELS = {
    "exp": (
        """\
def kernel(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    B[tid] = T.exp(A[tid])
""",
        ["tirx.families.math.script", "tirx.families.math.cuda", "tirx.families.math.sim"],
    ),
    "warp_sum": (
        """\
def kernel(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    B[tid] = T.cuda.warp_sum(A[tid])
""",
        [
            "tirx.families.warp_collectives.script",
            "tirx.families.warp_collectives.lower",
            "tirx.families.warp_collectives.cuda",
        ],
    ),
    "atomic_add": (
        """\
def kernel(A: T.Tensor((32,), "int32"), B: T.Tensor((1,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    T.cuda.atomic_add(B.ptr_to([0]), A[T.cuda.lane_id()])
""",
        [
            "tirx.families.cta_ops.script",
            "tirx.families.cta_ops.lower",
            "tirx.families.cta_ops.cuda",
        ],
    ),
    "clock64": (
        """\
def kernel(B: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    T.cuda.nano_sleep(100)
    t = T.cuda.clock64()
    T.cuda.trap_when_assert_failed(t > T.uint64(0))
    B[T.cuda.lane_id()] = T.int32(t)
""",
        [
            "tirx.families.thread_ops.script",
            "tirx.families.thread_ops.cuda",
            "tirx.families.thread_ops.sim",
        ],
    ),
    "vectorized": (
        """\
def kernel(A: T.Tensor((32, 4), "float32"), B: T.Tensor((32, 4), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    for v in T.vectorized(4):
        B[tid, v] = A[tid, v]
""",
        ["tirx.transform.vectorize", "tirx.backend.cuda.vector", "tirx.sim.pointer_alignment"],
    ),
    "fp8": (
        """\
def kernel(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float8_e4m3fn")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    B[tid] = T.cast(A[tid], "float8_e4m3fn")
""",
        ["tirx.backend.cuda.fp8", "tirx.sim.fp8"],
    ),
}

# What the child does with a kernel: lower and generate CUDA (no NVRTC: codegen only), then
# compile it for the simulator and run it; it prints the family modules it has imported.
CHILD = """\
import json, sys

import torch

import tirx
from tirx.backend.cuda.codegen import generate
from tirx.transform.lower import lower_function

sys.path.insert(0, sys.argv[1])
from {module} import {name} as kernel

generate(lower_function(kernel.ir, arch=90))
exe = tirx.compile(kernel, target="sim")
args = []
for p in kernel.ir.params:
    args.append(torch.zeros(p.shape, dtype=getattr(torch, p.dtype.torch_name)))
exe(*args)
print(json.dumps(sorted(m for m in {modules!r} if m in sys.modules)))
"""


def _imported(tmp_path: Path, module: str, name: str) -> list[str]:
    code = CHILD.format(module=module, name=name, modules=ALL_FAMILY_MODULES)
    env = {"TIRX_CACHE_DIR": str(tmp_path / "cache"), "PYTHONPATH": str(ROOT)}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)],
        capture_output=True,
        text=True,
        env={**_base_env(), **env},
        check=False,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def _base_env() -> dict:
    import os

    return {k: v for k, v in os.environ.items() if k not in ("TIRX_CACHE", "TIRX_TARGET")}


def test_the_seed_kernel_loads_only_its_own_families(tmp_path):
    imported = _imported(tmp_path, "tirx.examples.warp_matmul", "warp_matmul")
    stray = [m for m in imported if not m.startswith(SEED_FAMILIES)]
    assert stray == [], f"the seed kernel imported {stray}"
    # its two families, both stages it reaches: the contracts and the simulator's semantics
    for family in SEED_FAMILIES:
        assert {family + "isa", family + "sim"} <= set(imported), imported


@pytest.mark.parametrize("family", sorted(KERNELS))
def test_a_construct_loads_its_family(tmp_path, family):
    source, expected = KERNELS[family]
    (tmp_path / f"lazy_{family}.py").write_text(HEADER + textwrap.dedent(source))
    imported = set(_imported(tmp_path, f"lazy_{family}", "kernel"))
    missing = set(expected) - imported
    assert not missing, f"a kernel using {family} did not import {sorted(missing)}"
    # and nothing of the families it does not use
    others = {m for f, (_, mods) in KERNELS.items() if f != family for m in mods}
    stray = (imported - set(expected)) & others
    assert not stray, f"a kernel using {family} imported {sorted(stray)}"


def test_the_catalogs_call_names_agree_with_the_families_parsers():
    from tirx import catalog
    from tirx.families.cta_ops import script as cta_ops
    from tirx.families.math import script as math
    from tirx.families.thread_ops import script as thread_ops
    from tirx.families.warp_collectives import script as warp

    rows = {row.folder: row for row in catalog.ROWS}
    assert rows["math"].t_names == math.MATH_NAMES
    assert rows["math"].cuda_names == math.CUDA_NAMES
    assert frozenset(rows["math"].keys) == frozenset(math.FORMS)
    assert rows["warp_collectives"].t_names == warp.T_NAMES
    assert rows["warp_collectives"].cuda_names == warp.CUDA_NAMES
    assert frozenset(rows["warp_collectives"].keys) == warp.KEYS
    assert rows["cta_ops"].t_names == cta_ops.T_NAMES
    assert rows["cta_ops"].cuda_names == cta_ops.CUDA_NAMES
    assert frozenset(rows["cta_ops"].keys) == cta_ops.KEYS
    assert rows["thread_ops"].cuda_names == thread_ops.CUDA_NAMES
    assert frozenset(rows["thread_ops"].keys) == thread_ops.KEYS


def test_a_family_rule_is_found_by_its_node_class_and_an_unknown_class_raises():
    """The passes find a family's rules through the catalog (no hand-kept tables); a node class
    of no family that a pass has no rule for is an internal error, never a silent pass."""
    from tirx.backend.cuda import codegen
    from tirx.ir import nodes as ir
    from tirx.ir.visitor import UnknownNodeError, Visitor

    rule = codegen._CExprs._named_rule(
        codegen._CExprs.__new__(codegen._CExprs), "leave_MathCall", catalog_row("math")
    )
    assert callable(rule)

    class Broken(Visitor):
        pass_name = "a broken pass"
        stage = "cuda"

    with pytest.raises(UnknownNodeError):
        Broken().visit(ir.as_expr(1))


def catalog_row(folder):
    from tirx import catalog

    return next(r for r in catalog.ROWS if r.folder == folder)
