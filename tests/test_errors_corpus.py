"""Misuse gets a TirxError that shows the user's own line with a caret.

Each case is a kernel body with one mistake, the error class it must raise, and a fragment of
the line the message must quote.
"""

from __future__ import annotations

import pytest

import tirx
from tests.helpers import caret_line, define

HEAD = """
@T.function
def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((8, 16), "float16"),
      Out: T.Tensor((16, 8), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16", layout="default", align=16)
    ar = T.alloc_local((4,), "uint32")
    br = T.alloc_local((2,), "uint32")
    dr = T.alloc_local((4,), "float32")
"""

LOAD = "TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])"
AW = 'a.view("uint32").rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4)'
LDX4 = 'T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"]'
MMA = 'T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]'
A_MMA = "TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])"
B_MMA = "TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])"
D_MMA = "TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])"
SYN, LAY, CON = tirx.TirxSyntaxError, tirx.LayoutError, tirx.ContractError

CASES = [
    # --- statements outside the language
    ("return-stmt", "    return\n", SYN, "return"),
    ("with-stmt", "    with open('x') as f:\n        pass\n", SYN, "with open"),
    ("try-stmt", "    try:\n        pass\n    except Exception:\n        pass\n", SYN, "try:"),
    ("import", "    import math\n", SYN, "import math"),
    ("nested-def", "    def f():\n        pass\n", SYN, "def f"),
    ("assert", "    assert n > 0\n", SYN, "assert n"),
    ("tuple-unpack", "    x, y = 1, 2\n", SYN, "x, y"),
    ("chained-assign", "    x = y = lane\n", SYN, "x = y"),
    ("for-else", "    for i in range(4):\n        pass\n    else:\n        pass\n", SYN, "for i"),
    ("global-stmt", "    global g\n", SYN, "global g"),
    ("del-stmt", "    del lane\n", SYN, "del lane"),
    # --- expressions
    ("unknown-name", "    x = lane + undefined_thing\n", SYN, "undefined_thing"),
    ("call-print", "    print(lane)\n", SYN, "print(lane)"),
    ("lambda", "    f = lambda q: q\n", SYN, "lambda"),
    ("list-comp", "    xs = [i for i in range(3)]\n", SYN, "for i in range"),
    ("dropped-value", "    lane + 1\n", SYN, "lane + 1"),
    ("unknown-attr-T", "    x = T.cuda.no_such_thing()\n", SYN, "no_such_thing"),
    ("bad-dim", '    x = T.cuda.thread_idx("w")\n', SYN, "thread_idx"),
    ("float-bitop", "    x = T.float32(1) & 3\n", SYN, "& 3"),
    ("private-attr", "    x = a.__class__\n", SYN, "__class__"),
    # --- loops
    ("zero-step", "    for i in range(0, 8, 0):\n        pass\n", SYN, "range(0, 8, 0)"),
    ("dynamic-unroll", "    for i in T.unroll(n):\n        pass\n", SYN, "T.unroll(n)"),
    ("loop-over-list", "    for i in [1, 2]:\n        pass\n", SYN, "[1, 2]"),
    ("dynamic-step", "    for i in range(0, 8, n):\n        pass\n", SYN, "range(0, 8, n)"),
    # --- tensors and views
    ("region-dynamic-extent", "    x = a[0:n, 0]\n", SYN, "a[0:n, 0]"),
    ("index-out-of-range", "    a[16, 0] = A[0, 0]\n", SYN, "a[16, 0]"),
    ("region-assign", "    a[0:2, 0] = A[0, 0]\n", SYN, "a[0:2, 0]"),
    ("view-size", "    v = a.view(3, 5)\n", LAY, "a.view(3, 5)"),
    ("view-dtype-odd", '    v = a[:, 0:3].view("uint32")\n', LAY, 'view("uint32")'),
    (
        "too-many-slots",
        "    v = ar.view(4, 8, 4, layout=TileLayout(S[(4, 8, 4) : (2, 4 @ laneid, 1 @ laneid)]))\n",
        LAY,
        "ar.view(4, 8, 4",
    ),
    ("lane-view-index", f"    x = ar.view(4, 8, 4, layout={LOAD})[0, 0, 0]\n", SYN, "[0, 0, 0]"),
    ("rearrange-bad", '    v = a.rearrange("(x y) z -> x y", x=4)\n', LAY, "rearrange"),
    ("rearrange-two-unknown", '    v = a.rearrange("(x y) z -> x y z")\n', LAY, "rearrange"),
    ("unknown-axis", "    L = TileLayout(S[(4, 8) : (1, 4 @ nolane)])\n", SYN, "nolane"),
    (
        "shared-thread-layout",
        f'    s = T.alloc_shared((4, 8, 4), "uint32", layout={LOAD})\n',
        LAY,
        "T.alloc_shared",
    ),
    ("bad-dtype", '    s = T.alloc_local((4,), "float17")\n', SYN, "float17"),
    # --- tile operations
    (
        "unknown-instr",
        f'    T.cuda.tile.apply(T.ptx["ldmatrix.sync.x3"], ar, {AW})\n',
        CON,
        "T.cuda.tile.apply",
    ),
    (
        "bad-scope",
        f'    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout={LOAD}), {AW}, scope="cta")\n',
        SYN,
        "scope",
    ),
    (
        "wrong-lane",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout="
        f"TileLayout(S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)])), {AW})\n",
        CON,
        "ar.view(4, 8, 4",
    ),
    (
        "slot-collision",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout="
        f"TileLayout(S[(4, 8, 4) : (0, 4 @ laneid, 1 @ laneid)])), {AW})\n",
        CON,
        "ar.view(4, 8, 4",
    ),
    (
        "operand-shape",
        f"    T.cuda.tile.apply({LDX4}, ar.view(2, 8, 8, layout=TileLayout(S[(2, 8, 2, 4) : (1, 4 @ laneid, 2, 1 @ laneid)])), {AW})\n",
        CON,
        "ar.view(2, 8, 8",
    ),
    (
        "operand-dtype",
        f"    T.cuda.tile.apply({LDX4}, dr.view(4, layout=TileLayout(S[4])), {AW})\n",
        CON,
        "dr.view",
    ),
    (
        "shared-from-global",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout={LOAD}), "
        f'A.view("uint32").rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4))\n',
        CON,
        "A.view",
    ),
    (
        "misaligned-rows",
        '    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x2.shared.b16"], '
        "br.view(2, 8, 4, layout=TileLayout(S[(2, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])), "
        'a.view("uint32")[0:16, 2:6].rearrange("(g r) w -> g r w", g=2))\n',
        CON,
        "a.view",
    ),
    (
        "not-contiguous-rows",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout={LOAD}), "
        f'a.view("uint32").rearrange("(g r) (c w) -> (c g) w r", g=2, c=2, w=4).view(4, 8, 4))\n',
        CON,
        "a.view",
    ),
    ("registers-in-shared", f"    T.cuda.tile.apply({LDX4}, {AW}, {AW})\n", CON, "a.view"),
    (
        "mma-repeat-mismatch",
        f"    T.cuda.tile.apply({MMA}, dr.view(1, 1, 16, 8, layout={D_MMA}), "
        f"ar.view(1, 1, 16, 8, layout={A_MMA}), "
        f"br.view(1, 2, 8, 8, layout=TileLayout(S[(1, 2, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])), "
        f"T.float32(0))\n",
        LAY,
        "br.view(1, 2, 8, 8",
    ),
    (
        "mma-operand-count",
        f"    T.cuda.tile.apply({MMA}, dr.view(1, 1, 16, 8, layout={D_MMA}))\n",
        CON,
        "T.cuda.tile.apply",
    ),
    (
        "mma-mixed-types",
        '    T.cuda.tile.apply(T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.bf16.f32"], dr, ar, br, 0.0)\n',
        CON,
        "T.cuda.tile.apply",
    ),
    (
        "stmatrix-on-sm80",
        f'    T.cuda.tile.apply(T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"], {AW}, '
        f"ar.view(4, 8, 4, layout={LOAD}))\n",
        CON,
        "T.cuda.tile.apply",
    ),
    ("tile-op-not-instruction", "    T.cuda.tile.apply(3, ar)\n", SYN, "3"),
]


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_misuse_reports_the_line(case, tmp_path):
    _, body, cls, fragment = case
    with pytest.raises(tirx.TirxError) as info:
        k = define(HEAD + body, tmp_path, "k")
        tirx.compile(k, target="cuda -arch=sm_80")
    err = info.value
    assert isinstance(err, cls), f"{type(err).__name__}: {err}"
    quoted = caret_line(str(err))
    assert fragment in quoted, f"expected {fragment!r} in the quoted line {quoted!r}\n{err}"
    assert str(tmp_path) in str(err), "the message names the user's file"


def test_corpus_is_large_enough():
    assert len(CASES) >= 30


def test_missing_device_entry(tmp_path):
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(
            """
            @T.function
            def k(A: T.Tensor((4,), "float32")):
                A[0] = 1.0
            """,
            tmp_path,
        )
    assert "T.device_entry" in str(info.value)
    assert caret_line(str(info.value)).startswith("A[0] = 1.0")


def test_parameter_needs_annotation(tmp_path):
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(
            """
            @T.function
            def k(A):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            """,
            tmp_path,
        )
    assert "annotation" in str(info.value)


def test_calling_a_kernel_directly_says_compile(tmp_path):
    k = define(HEAD + "    pass\n", tmp_path, "k")
    with pytest.raises(tirx.TirxSyntaxError, match="tirx.compile"):
        k(1, 2, 3, 4)


def test_intrinsics_outside_kernels_explain_themselves():
    with pytest.raises(tirx.TirxSyntaxError, match="inside a @T.function"):
        tirx.T.cuda.lane_id()
