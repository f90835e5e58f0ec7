"""The differential test against the real TIRx (``apache-tvm-tirx==0.1.0a4``, an oracle only):
for every form both support, the same kernel file is compiled by both, with right, wrong and
random layouts on one operand at a time; both must accept and reject the same layouts, and
map every element of each random layout to the same (lane, slot).

Opt-in: runs only when ``TIRX_REFERENCE_PYTHON`` names a python that imports ``tvm_tirx``
(its own venv: its ``tvm_tirx`` would shadow tirx's alias package), e.g.

    TIRX_REFERENCE_PYTHON=/path/to/venv/bin/python pytest -m reference

The oracle runs in a subprocess (tests/reference_oracle.py). Disagreements are decided by the
PTX ISA and recorded in docs/semantics.md ("Where tirx and the real TIRx differ").
"""

from __future__ import annotations

import functools
import itertools
import json
import os
import random
import shutil
import subprocess
from pathlib import Path

import pytest

import tirx
from tirx.layout import S, TileLayout, laneid  # noqa: F401 - layout texts are evaluated here

pytestmark = pytest.mark.reference

ORACLE = Path(__file__).with_name("reference_oracle.py")
REFERENCE = os.environ.get("TIRX_REFERENCE_PYTHON", "")

# The forms the real TIRx's tile.apply patterns take (its tile/patterns/mma.py and ldmatrix.py):
# mma m16n8k8/k16 with f16/bf16 inputs and f32 accumulation, ldmatrix m8n8 x1/x2/x4 b16.
MMA_BOTH = [
    f"mma.sync.aligned.m16n8k{k}.row.col.f32.{t}.{t}.f32" for k in (8, 16) for t in ("f16", "bf16")
]

# Canonical layouts as (extent, stride, on laneid) iters, by operand and word count.
CANONICAL = {
    ("D", 8): [(1, 4, 0), (1, 4, 0), (2, 2, 0), (8, 4, 1), (4, 1, 1), (2, 1, 0)],
    ("A", 8): [(1, 4, 0), (1, 4, 0), (2, 1, 0), (8, 4, 1), (2, 2, 0), (4, 1, 1)],
    ("A", 4): [(1, 2, 0), (1, 2, 0), (2, 1, 0), (8, 4, 1), (4, 1, 1)],
    ("B", 8): [(1, 2, 0), (1, 2, 0), (8, 4, 1), (2, 1, 0), (4, 1, 1)],
    ("B", 4): [(1, 1, 0), (1, 1, 0), (8, 4, 1), (4, 1, 1)],
    ("load", 4): [(4, 1, 0), (8, 4, 1), (4, 1, 1)],
    ("load", 2): [(2, 1, 0), (8, 4, 1), (4, 1, 1)],
    ("load", 1): [(1, 1, 0), (8, 4, 1), (4, 1, 1)],
}


def layout_text(iters) -> str:
    shape = ", ".join(str(e) for e, _, _ in iters)
    strides = ", ".join(f"{s} @ laneid" if lane else str(s) for _, s, lane in iters)
    return f"TileLayout(S[({shape}) : ({strides})])"


def binary(iters):
    """The same layout with every extent split into factors of 2 (outer first)."""
    out = []
    for e, s, lane in iters:
        if e == 1:
            out.append((1, s, lane))
            continue
        bits = e.bit_length() - 1
        out += [(2, s * 2 ** (bits - 1 - j), lane) for j in range(bits)]
    return out


def variants(iters, rng: random.Random, randoms: int = 2) -> dict[str, list]:
    """Right and wrong layouts of one operand: the canonical one and its binary respelling;
    two register slots swapped; two lane bits swapped; ``randoms`` random orders of the slot
    bits (right: any register order is legal) and random permutations of all the binary
    iters' strides (almost always wrong), shapes kept."""
    b = binary(iters)
    out = {"canonical": iters, "binary": b}
    bits = [i for i, (e, _, _) in enumerate(b) if e == 2]
    slot_bits = [i for i in bits if not b[i][2]]
    lane_bits = [i for i in bits if b[i][2]]
    if len(slot_bits) >= 2:
        x, y = slot_bits[:2]
        out["slots swapped"] = _swap(b, x, y)
    if len(lane_bits) >= 2:
        x, y = lane_bits[0], lane_bits[-1]
        out["lanes swapped"] = _swap(b, x, y)
    for r in range(randoms):
        values = [b[i][1:] for i in slot_bits]
        rng.shuffle(values)
        perm = list(b)
        for i, v in zip(slot_bits, values):
            perm[i] = (2, *v)
        out[f"random slot order {r}"] = perm
    for r in range(randoms):
        values = [b[i][1:] for i in bits]
        rng.shuffle(values)
        perm = list(b)
        for i, v in zip(bits, values):
            perm[i] = (2, *v)
        out[f"random strides {r}"] = perm
    return out


def _swap(b, x, y):
    out = list(b)
    out[x], out[y] = (2, *b[y][1:]), (2, *b[x][1:])
    return out


SOURCE = """\
from tvm_tirx.script import tirx as T
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.tirx.layout import S, TileLayout

a_load_layout = {a_load}
b_load_layout = {b_load}
a_mma_layout = {A}
b_mma_layout = {B}
d_mma_layout = {D}


@T.function
def kernel(
    A: T.Tensor((16, {k}), "{el}"),
    B: T.Tensor((8, {k}), "{el}"),
    Out: T.Tensor((16, 8), "float32"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, {k}), "{el}", layout="default", align=16)
    b = T.alloc_shared((8, {k}), "{el}", layout="default", align=16)
    for q in range({qa}):
        index = lane + 32 * q
        a[index // {k}, index % {k}] = A[index // {k}, index % {k}]
    for q in range({qb}):
        index = lane + 32 * q
        b[index // {k}, index % {k}] = B[index // {k}, index % {k}]
    T.cuda.cta_sync()
    a_words = a.view("uint32").rearrange(
        "(group row) (chunk word) -> (chunk group) row word", group=2, chunk={chunks}, word=4
    )
    b_words = b.view("uint32").rearrange("row (chunk word) -> chunk row word", chunk={chunks})
    ar = T.alloc_local(({na},), "uint32", layout="default")
    br = T.alloc_local(({nb},), "uint32", layout="default")
    dr = T.alloc_local((4,), "float32", layout="default")
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x{na}.shared.b16"],
        ar.view({na}, 8, 4, layout=a_load_layout), a_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x{nb}.shared.b16"],
        br.view({nb}, 8, 4, layout=b_load_layout), b_words, scope="warp",
    )
    T.cuda.tile.apply(
        T.ptx["{mma}"],
        dr.view(1, 1, 16, 8, layout=d_mma_layout),
        ar.view(1, 1, 16, {w}, layout=a_mma_layout),
        br.view(1, 1, 8, {w}, layout=b_mma_layout),
        T.float32(0), scope="warp",
    )
    for r in range(4):
        Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]
"""


def kernel_source(mma: str, **override) -> str:
    c = tirx.instruction_contract(mma)
    k, w = c.param("k"), c.operand("A").atom[1]
    na, nb = w // 2, w // 4
    layouts = {
        "a_load": CANONICAL[("load", na)], "b_load": CANONICAL[("load", nb)],
        "A": CANONICAL[("A", w)], "B": CANONICAL[("B", w)], "D": CANONICAL[("D", 8)],
    }  # fmt: skip
    layouts.update(override)
    el = {"f16": "float16", "bf16": "bfloat16"}[c.param("ab_type")]
    return SOURCE.format(
        k=k, w=w, na=na, nb=nb, qa=k // 2, qb=k // 4, chunks=w // 4, el=el, mma=mma,
        **{name: layout_text(iters) for name, iters in layouts.items()},
    )  # fmt: skip


def cases():
    """(id, source) of every kernel compared, and (id, layout iters, view shape) maps."""
    rng = random.Random(12)
    kernels, maps = [], []
    for mma in MMA_BOTH:
        c = tirx.instruction_contract(mma)
        w = c.operand("A").atom[1]
        for operand, key, shape in (
            ("D", ("D", 8), (1, 1, 16, 8)),
            ("A", ("A", w), (1, 1, 16, w)),
            ("B", ("B", w), (1, 1, 8, w)),
            ("a_load", ("load", w // 2), (w // 2, 8, 4)),
            ("b_load", ("load", w // 4), (w // 4, 8, 4)),
        ):
            if operand.endswith("load") and "bf16" in mma:
                continue  # the loads do not depend on the element type
            for name, iters in variants(CANONICAL[key], rng).items():
                case = f"{mma.split('.')[3]}.{c.param('ab_type')} {operand} {name}"
                kernels.append((case, kernel_source(mma, **{operand: iters})))
                maps.append((case, iters, shape))
    return kernels, maps


@functools.cache
def oracle(payload: str) -> list:
    env = dict(os.environ)
    nvcc = shutil.which("nvcc")
    if nvcc and "CUDA_PATH" not in env:
        env["CUDA_PATH"] = str(Path(nvcc).resolve().parents[1])
    out = subprocess.run(
        [REFERENCE, str(ORACLE)], input=payload, capture_output=True, text=True, env=env,
        timeout=600, check=False,
    )  # fmt: skip
    if out.returncode:
        pytest.fail(f"the reference oracle failed:\n{out.stderr[-3000:]}")
    return json.loads(out.stdout)


def _need_reference():
    if not REFERENCE:
        pytest.skip("set TIRX_REFERENCE_PYTHON to a python with apache-tvm-tirx==0.1.0a4")
    probe = subprocess.run([REFERENCE, "-c", "import tvm_tirx"], capture_output=True, check=False)
    if probe.returncode:
        pytest.skip(f"{REFERENCE} cannot import tvm_tirx")


def _ours(source: str, tmp_path: Path, name: str) -> tuple[bool, str]:
    import importlib.util

    path = tmp_path / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
        tirx.compile(module.kernel, target="sim")
    except tirx.TirxError as e:
        return False, f"{type(e).__name__}: {e.message}"
    return True, ""


# Where the two disagree, the decision (by the PTX ISA) and its record in docs/semantics.md.
DECIDED: dict[str, str] = {}


def test_both_accept_and_reject_the_same_layouts(tmp_path):
    _need_reference()
    kernels, _ = cases()
    payload = json.dumps([{"kind": "compile", "source": src} for _, src in kernels])
    theirs = oracle(payload)
    disagree = []
    for i, ((case, src), their) in enumerate(zip(kernels, theirs)):
        ok, why = _ours(src, tmp_path, f"ours_{i}")
        if ok != their["ok"] and case not in DECIDED:
            disagree.append(f"{case}: tirx {'accepts' if ok else why}; TIRx "
                            f"{'accepts' if their['ok'] else their['error']}")  # fmt: skip
    verdicts = {(ok["ok"]) for ok in theirs}
    assert verdicts == {True, False}, "the cases must include accepted and rejected layouts"
    assert not disagree, "\n".join(disagree)


def test_random_layouts_map_elements_to_the_same_lane_and_slot():
    _need_reference()
    _, maps = cases()
    payload = json.dumps(
        [{"kind": "map", "layout": layout_text(it), "shape": list(sh)} for _, it, sh in maps]
    )
    theirs = oracle(payload)
    for (case, iters, shape), their in zip(maps, theirs):
        layout = eval(layout_text(iters))
        ours = []
        for coord in itertools.product(*(range(e) for e in shape)):
            point = layout.apply(*coord, shape=shape)
            ours.append([point.get("laneid", -1), point.get("m", 0)])
        assert ours == their["map"], case


TMA_STORE = """\
from tvm_tirx.script import tirx as T

STORE = "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group"
REDUCE = "cp.reduce.async.bulk.tensor.2d.global.shared::cta.{op}.tile.bulk_group"


@T.function
def kernel(C: T.Tensor((128, 128), "{dtype}")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((32, 32), "{dtype}", layout="default", align=1024)
    for i in range(8):
        e = tid * 8 + i
        s[e // 32, e % 32] = C[e // 32, e % 32]
    T.ptx["fence.proxy.async.shared::cta"]()
    T.cuda.cta_sync()
    if tid == 0:
        T.cuda.tile.apply(T.ptx[STORE], C[:, :], s[:, :], box=(32, 32), coords=(tid * 2, 32), scope="thread")
        T.cuda.tile.apply(T.ptx[REDUCE], C[:, :], s[:, :], box=(32, 32), coords=(64, 32), scope="thread")
        T.ptx["cp.async.bulk.commit_group"]()
        T.ptx["cp.async.bulk.wait_group.read"](0)
"""


def test_both_compile_the_tensor_store_and_reduction_tile_forms(tmp_path):
    # the real TIRx's tile form of cp.async.bulk.tensor (shared to global) and
    # cp.reduce.async.bulk.tensor: the same kernel file, accepted by both (.add of f32 and s32;
    # .min of f32 is not an ISA combination: tirx refuses it at dst, the real TIRx does not
    # check the map's type)
    _need_reference()
    sources = {
        (op, dtype): TMA_STORE.replace("{op}", op).replace("{dtype}", dtype)
        for op, dtype in (("add", "float32"), ("add", "int32"), ("min", "float32"))
    }
    theirs = oracle(json.dumps([{"kind": "compile", "source": s} for s in sources.values()]))
    for i, ((op, dtype), src) in enumerate(sources.items()):
        ok, why = _ours(src, tmp_path, f"tma_{i}")
        assert theirs[i]["ok"], theirs[i]["error"]
        assert ok == ((op, dtype) != ("min", "float32")), why
