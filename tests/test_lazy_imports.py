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

# (stage, module) of every module that a construct family keeps to itself
FAMILY_MODULES = {
    "script": [
        "tirx.script.intrinsics",
        "tirx.script.warp_ops",
        "tirx.script.cta_ops",
        "tirx.script.storage",
    ],
    "lowering": ["tirx.transform.vectorize", "tirx.transform.warp_ops", "tirx.transform.cta_ops"],
    "codegen": [
        "tirx.backend.cuda.bitcast",
        "tirx.backend.cuda.vector",
        "tirx.backend.cuda.intrinsics",
        "tirx.backend.cuda.fp8",
        "tirx.backend.cuda.warp_ops",
        "tirx.backend.cuda.cta_codegen",
    ],
    "sim": [
        "tirx.sim.intrinsics",
        "tirx.sim.fp8",
        "tirx.sim.reinterpret",
        "tirx.sim.pointer_alignment",
        "tirx.sim.cta",
    ],
}
ALL_FAMILY_MODULES = [m for mods in FAMILY_MODULES.values() for m in mods]

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
        ["tirx.script.intrinsics", "tirx.backend.cuda.intrinsics", "tirx.sim.intrinsics"],
    ),
    "warp_sum": (
        """\
def kernel(A: T.Tensor((32,), "float32"), B: T.Tensor((32,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tid = T.cuda.lane_id()
    B[tid] = T.cuda.warp_sum(A[tid])
""",
        ["tirx.script.warp_ops", "tirx.transform.warp_ops", "tirx.backend.cuda.warp_ops"],
    ),
    "atomic_add": (
        """\
def kernel(A: T.Tensor((32,), "int32"), B: T.Tensor((1,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    T.cuda.atomic_add(B.ptr_to([0]), A[T.cuda.lane_id()])
""",
        ["tirx.script.cta_ops", "tirx.transform.cta_ops", "tirx.backend.cuda.cta_codegen"],
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


def test_the_seed_kernel_loads_no_construct_family(tmp_path):
    imported = _imported(tmp_path, "tirx.examples.warp_matmul", "warp_matmul")
    assert imported == [], f"the seed kernel imported {imported}"


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


def test_the_call_families_names_agree_with_their_modules():
    from tirx.script import cta_ops, families, intrinsics, warp_ops

    by_parser = {f.parser.split(":")[0]: f for f in families.FAMILIES}
    assert by_parser["intrinsics"].t_names == intrinsics.MATH_NAMES
    assert by_parser["intrinsics"].cuda_names == intrinsics.CUDA_NAMES
    assert by_parser["intrinsics"].keys == frozenset(intrinsics.FORMS)
    assert by_parser["warp_ops"].t_names == warp_ops.T_NAMES
    assert by_parser["warp_ops"].cuda_names == warp_ops.CUDA_NAMES
    assert by_parser["warp_ops"].keys == warp_ops.KEYS
    assert by_parser["cta_ops"].t_names == cta_ops.T_NAMES
    assert by_parser["cta_ops"].cuda_names == cta_ops.CUDA_NAMES
    assert by_parser["cta_ops"].keys == cta_ops.KEYS
    # one family per key, and every parser resolves to a function
    keys = [k for f in families.FAMILIES for k in f.keys]
    assert len(keys) == len(set(keys))
    for f in families.FAMILIES:
        module, _, function = f.parser.partition(":")
        assert callable(getattr(sys.modules[f"tirx.script.{module}"], function))


def test_every_lazy_rule_resolves():
    """A misspelt lazy rule would only fail at the first kernel that needs it: resolve them
    all here (the rule is the family's function or method)."""
    from tirx.backend.cuda import codegen
    from tirx.ir.visitor import _Pass

    passes = [codegen._CExprs, codegen._Emitter]
    assert all(issubclass(p, _Pass) and p.lazy_rules for p in passes)
    for p in passes:
        for name in p.lazy_rules:
            rule = p._named_rule(p.__new__(p), name)
            assert callable(rule), (p.__name__, name)


def test_codegen_write_analysis_names_the_cta_statements():
    from tirx.backend.cuda import writes
    from tirx.backend.cuda.cta_codegen import CtaStatements

    assert {c.__name__ for c in CtaStatements.classes} == writes._CTA_STATEMENTS


def test_an_unknown_lazy_rule_module_fails_loudly():
    """A lazy rule is resolved by import, so a wrong module name raises at once (an internal
    error, never a silent fall-through to another class's rule)."""
    from tirx.ir import nodes as ir
    from tirx.ir.visitor import Visitor

    class Broken(Visitor):
        pass_name = "a broken pass"
        lazy_rules = {"leave_Const": "tirx.no_such_module:rule"}

    with pytest.raises(ModuleNotFoundError):
        Broken().visit(ir.as_expr(1))
