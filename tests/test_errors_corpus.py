"""Misuse gets a TirxError that shows the user's own line with a caret.

Each case is a kernel body with one mistake, the error class it must raise, and a fragment of
the line the message must quote.
"""

from __future__ import annotations

import pytest

import tirx
from tests.helpers import caret_line, caret_text, define
from tirx import T
from tirx.transform.limits import MachineLimitError

HEAD_TEMPLATE = """
@T.function
def k(A: T.Tensor((16, 16), "float16"), B: T.Tensor((8, 16), "float16"),
      Out: T.Tensor((16, 8), "float32"), n: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig({launch}))
    lane = T.cuda.lane_id()
    a = T.alloc_shared((16, 16), "float16", layout="default", align=16)
    ar = T.alloc_local((4,), "uint32")
    br = T.alloc_local((2,), "uint32")
    dr = T.alloc_local((4,), "float32")
"""
HEAD = HEAD_TEMPLATE.format(launch="grid=1, block=32")

LOAD = "TileLayout(S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])"
AW = 'a.view("uint32").rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4)'
LDX4 = 'T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"]'
MMA = 'T.ptx["mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"]'
A_MMA = "TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)])"
B_MMA = "TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)])"
D_MMA = "TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)])"
MMA16 = 'T.ptx["mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"]'
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
    (
        "f16-accumulator-in-float32",
        f"    T.cuda.tile.apply({MMA16}, dr.view(1, 1, 16, 8, layout={D_MMA}), "
        f"ar.view(1, 1, 16, 8, layout={A_MMA}), br.view(1, 1, 8, 8, layout={B_MMA}), 0.0)\n",
        CON,
        "dr.view(1, 1, 16, 8",
    ),
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
    assert len(MACHINE_CASES) >= 25


LIMIT = MachineLimitError
STMATRIX = 'T.ptx["stmatrix.sync.aligned.m8n8.x4.shared.b16"]'

# What the machine forbids, refused at compile time for both targets. Each case: id, the
# launch configuration (None: grid=1, block=32), the body, the error class, a fragment of the
# quoted line, and a fragment of the message that names the fix.
MACHINE_CASES = [
    # --- launch shapes (CUDA's limits: grid x < 2**31, y, z <= 65535; block <= 1024 threads,
    #     x, y <= 1024, z <= 64)
    ("grid-y", "grid=(1, 70000), block=32", "    pass\n", SYN, "LaunchConfig", "y <= 65535"),
    ("grid-x", "grid=1 << 40, block=32", "    pass\n", SYN, "LaunchConfig", "x <= 2147483647"),
    ("grid-z", "grid=(1, 1, 65536), block=32", "    pass\n", SYN, "LaunchConfig", "z <="),
    ("block-z", "grid=1, block=(1, 1, 128)", "    pass\n", SYN, "LaunchConfig", "z <= 64"),
    ("block-x", "grid=1, block=2048", "    pass\n", SYN, "LaunchConfig", "x <= 1024"),
    ("block-threads", "grid=1, block=(64, 32)", "    pass\n", SYN, "LaunchConfig", "fewer"),
    # --- warp-collective instructions need whole warps
    (
        "ldmatrix-partial-warp",
        "grid=1, block=16",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout={LOAD}), {AW})\n",
        LIMIT,
        "T.cuda.tile.apply",
        "multiple of 32",
    ),
    (
        "mma-partial-warp",
        "grid=1, block=(8, 5)",
        f"    T.cuda.tile.apply({MMA}, dr.view(1, 1, 16, 8, layout={D_MMA}), "
        f"ar.view(1, 1, 16, 8, layout={A_MMA}), br.view(1, 1, 8, 8, layout={B_MMA}), "
        f"T.float32(0))\n",
        LIMIT,
        "T.cuda.tile.apply",
        "block=64",
    ),
    # --- local arrays that no thread can hold (512 KiB of local memory per thread)
    (
        "local-too-big",
        None,
        '    big = T.alloc_local((200000,), "float32")\n',
        LIMIT,
        "T.alloc_local",
        "T.alloc_shared",
    ),
    # --- integers that fit no 64-bit type
    ("int-literal-2**70", None, "    x = lane + 2**70\n", SYN, "lane + 2**70", "64 bits"),
    ("int-literal-2**63", None, "    x = lane + 2**63\n", SYN, "lane + 2**63", "T.uint64("),
    ("int64-overflow", None, "    x = T.int64(2**63)\n", SYN, "T.int64(2**63)", "T.uint64"),
    ("int32-literal", None, "    x = T.int32(2**31)\n", SYN, "T.int32(2**31)", "wider type"),
    ("store-huge", None, "    Out[0, 0] = -(2**64)\n", SYN, "Out[0, 0] = -(2**64)", "64 bits"),
    ("compare-huge", None, "    x = lane < 2**65\n", SYN, "lane < 2**65", "64 bits"),
    # --- integer division by a known zero (undefined on the GPU)
    ("floordiv-zero", None, "    x = lane // 0\n", SYN, "lane // 0", "nonzero"),
    ("mod-zero", None, "    x = lane % (4 - 4)\n", SYN, "lane % (4 - 4)", "nonzero"),
    # --- shifts C leaves undefined
    ("shift-too-far", None, "    x = lane << 32\n", SYN, "lane << 32", "T.int64(x) << 40"),
    ("shift-negative", None, "    x = lane >> -1\n", SYN, "lane >> -1", "shift by 0 to 31"),
    # --- floats where an integer belongs
    ("range-float", None, "    for i in range(1.5):\n        pass\n", SYN, "1.5", "T.int32"),
    (
        "range-float-start",
        None,
        "    for i in range(0.5, 4):\n        pass\n",
        SYN,
        "0.5",
        "T.int32",
    ),
    (
        "range-float-element",
        None,
        "    for i in range(A[0, 0]):\n        pass\n",
        SYN,
        "A[0, 0]",
        "T.int32",
    ),
    ("float-index", None, "    x = A[0, 1.5]\n", SYN, "A[0, 1.5]", "T.int32"),
    ("float-runtime-index", None, "    x = A[0, A[0, 1]]\n", SYN, "A[0, A[0, 1]]", "T.int32"),
    # --- printf: what both targets can print
    ("printf-%s", None, '    T.cuda.printf("%s", lane)\n', SYN, "T.cuda.printf", "%d"),
    (
        "printf-missing-arg",
        None,
        '    T.cuda.printf("%d %d\\n", lane)\n',
        SYN,
        "T.cuda.printf",
        "one value per conversion",
    ),
    (
        "printf-extra-arg",
        None,
        '    T.cuda.printf("lane\\n", lane)\n',
        SYN,
        "T.cuda.printf",
        "one value per conversion",
    ),
    (
        "printf-float-as-int",
        None,
        '    T.cuda.printf("%d", T.float32(1))\n',
        SYN,
        "T.cuda.printf",
        "%f",
    ),
    (
        "printf-int-as-float",
        None,
        '    T.cuda.printf("%f", lane)\n',
        SYN,
        "T.cuda.printf",
        "T.float32",
    ),
    (
        "printf-star-width",
        None,
        '    T.cuda.printf("%*d", lane)\n',
        SYN,
        "T.cuda.printf",
        "one value per conversion",
    ),
    ("printf-bad-conv", None, '    T.cuda.printf("%y", lane)\n', SYN, "T.cuda.printf", "%%"),
    # --- unknown names answered with the closest known ones
    ("typo-T.cuda", None, "    x = T.cuda.laneid()\n", SYN, "T.cuda.laneid", "T.cuda.lane_id"),
    (
        "typo-T",
        None,
        '    s = T.alloc_shard((4,), "float32")\n',
        SYN,
        "T.alloc_shard",
        "T.alloc_shared",
    ),
    ("typo-T.ptx", None, "    T.ptx.bar.sink(1, 64)\n", CON, "T.ptx.bar.sink", "bar.sync"),
    ("typo-tile", None, "    T.cuda.tile.aply(ar)\n", SYN, "T.cuda.tile.aply", "T.cuda.tile.apply"),
    ("typo-method", None, "    v = a.permut(1, 0)\n", SYN, "a.permut", "permute"),
    ("typo-tensor-attr", None, "    x = a.shap\n", SYN, "a.shap", "`shape`"),
    # --- views
    (
        "permute-not-a-permutation",
        None,
        "    v = a.permute(0, 0)\n",
        LAY,
        "a.permute",
        "permute(1, 0)",
    ),
    (
        "negative-stride-below-storage",
        None,
        "    v = ar.view(4, layout=TileLayout(S[4 : -1]))\n",
        LAY,
        "ar.view",
        "offset of at least 3",
    ),
]


@pytest.mark.parametrize("case", MACHINE_CASES, ids=[c[0] for c in MACHINE_CASES])
@pytest.mark.parametrize("target", ["cuda -arch=sm_90", "sim"])
def test_machine_limits_on_both_targets(case, target, tmp_path):
    _, launch, body, cls, fragment, fix = case
    head = HEAD_TEMPLATE.format(launch=launch) if launch else HEAD
    with pytest.raises(tirx.TirxError) as info:
        k = define(head + body, tmp_path, "k")
        tirx.compile(k, target=target)
    err = info.value
    assert isinstance(err, cls), f"{type(err).__name__}: {err}"
    quoted = caret_line(str(err))
    assert fragment in quoted, f"expected {fragment!r} in the quoted line {quoted!r}\n{err}"
    assert str(tmp_path) in str(err), "the message names the user's file"
    assert fix in str(err), f"expected the fix {fix!r} in\n{err}"


# The corrected twin of each machine case compiles for both targets.
FIXED = [
    ("grid-y", "grid=(1, 65535), block=32", "    pass\n"),
    ("grid-x", "grid=(2**31 - 1), block=32", "    pass\n"),
    ("block-z", "grid=1, block=(1, 1, 64)", "    pass\n"),
    ("block-threads", "grid=1, block=(32, 32)", "    pass\n"),
    (
        "ldmatrix-whole-warp",
        "grid=1, block=48 + 16",
        f"    T.cuda.tile.apply({LDX4}, ar.view(4, 8, 4, layout={LOAD}), {AW})\n",
    ),
    ("local-fits", None, '    big = T.alloc_local((2000,), "float32")\n'),
    ("int64-max", None, "    x = lane + (2**63 - 1)\n    y = T.int64(2**63 - 1)\n"),
    ("uint64-max", None, "    x = T.uint64(2**64 - 1)\n"),
    ("int-index", None, "    x = A[0, T.int32(A[0, 1])]\n"),
    ("divide-nonzero", None, "    x = lane // 3 + lane % 5 + lane / 0\n"),
    ("shift-in-range", None, "    x = (lane << 31) + (T.int64(lane) << 40) + (lane >> 0)\n"),
    ("int-range", None, "    for i in range(T.int32(A[0, 0])):\n        pass\n"),
    (
        "printf-ok",
        None,
        '    T.cuda.printf("%d %5.2f %*d %% %x\\n", lane, T.float32(1), 3, lane, n)\n',
    ),
    ("permute", None, "    v = a.permute(1, 0)\n    Out[0, 0] = v[1, 0]\n"),
    ("negative-stride", None, "    v = ar.view(4, layout=TileLayout(S[4 : -1] + 3))\n"),
    (
        "f16-accumulator-in-float16",  # the seed's D layout over float16 registers
        None,
        '    d16 = T.alloc_local((4,), "float16")\n'
        f"    T.cuda.tile.apply({MMA16}, d16.view(1, 1, 16, 8, layout={D_MMA}), "
        f"ar.view(1, 1, 16, 8, layout={A_MMA}), br.view(1, 1, 8, 8, layout={B_MMA}), 0.0)\n",
    ),
]


@pytest.mark.parametrize("case", FIXED, ids=[c[0] for c in FIXED])
@pytest.mark.parametrize("target", ["cuda -arch=sm_90", "sim"])
def test_corrected_twins_compile(case, target, tmp_path):
    _, launch, body = case
    head = HEAD_TEMPLATE.format(launch=launch) if launch else HEAD
    k = define(head + body, tmp_path, "k")
    assert tirx.compile(k, target=target) is not None


# Python outside the kernel language, and builtins it lacks: each named in the user's words
# (never an AST class), the caret under the construct, the fix in the hint, and the twin
# written as the hint says compiles for both targets. (tests/test_refusals.py covers every
# construct of the table; these are the ones users write.)
# (id, bad body, message fragment, caret under, hint fragment, corrected twin)
NAMED = [
    ("f-string", '    T.cuda.printf(f"lane {lane}\\n")\n', "an f-string", 'f"lane', "T.cuda.printf",
     '    T.cuda.printf("lane %d\\n", lane)\n'),
    ("list-comprehension", "    xs = [i * 2 for i in range(4)]\n", "a list comprehension", "[i * 2",
     "T.unroll", "    for i in T.unroll(4):\n        Out[lane % 16, i] = i * 2\n"),
    ("generator", "    g = (i for i in range(4))\n", "a generator expression", "(i for",
     "write a loop", "    for i in range(4):\n        Out[lane % 16, i] = i\n"),
    ("dict-literal", "    d = {0: 1}\n", "a dict literal", "{0: 1}", "outside the kernel",
     "    d = (1,)\n    Out[0, 0] = d[0]\n"),
    ("set-literal", "    s = {1, 2}\n", "a set literal", "{1, 2}", "outside the kernel",
     "    s = (1, 2)\n"),
    ("lambda-named", "    f = lambda q: q * 2\n", "a lambda", "lambda q", "@T.macro",
     "    x = lane * 2\n"),
    ("walrus", "    x = (y := lane + 1) * 2\n", "walrus operator", "y := lane + 1", "line of its own",
     "    y = lane + 1\n    x = y * 2\n"),
    ("starred-args", '    T.cuda.printf("%u %u\\n", *ar)\n', "a starred expression", "*ar",
     "f(a, b)", '    T.cuda.printf("%u %u\\n", ar[0], ar[1])\n'),  # *A.shape (a tuple) spreads
    ("double-star", '    x = T.float32(**{"value": lane})\n', "a dict unpacked into a call",
     "**{", "by name", "    x = T.float32(value=lane)\n"),
    ("print", "    print(lane)\n", "the Python builtin print()", "print", "T.cuda.printf",
     '    T.cuda.printf("%d\\n", lane)\n'),
    ("int-builtin", "    x = int(A[0, 0])\n", "the Python builtin int()", "int", "T.int32(x)",
     "    x = T.int32(A[0, 0])\n"),
    ("sum-builtin", "    x = sum(A.shape)\n", "the Python builtin sum()", "sum", "s += ",
     "    x = A.shape[0] + A.shape[1]\n"),
    ("len-of-scalar", "    x = len(n)\n", "len() of a kernel value", "len(n)", "t.shape[0]",
     "    x = len(A) + A.shape[1]\n"),
    ("math-function", "    x = math.sqrt(T.float32(lane))\n", "cannot call sqrt", "math.sqrt",
     "T.sqrt", "    x = T.sqrt(T.float32(lane))\n"),
    ("pow-run-time", "    x = lane ** 2\n", "the operator `**`", "lane ** 2", "T.pow",
     "    x = lane * lane\n"),
    ("pow-assign", "    y = lane\n    y **= 2\n", "the operator `**`", "y **= 2", "T.pow",
     "    y = lane\n    y *= y\n"),
    ("in-run-time", "    if lane in (1, 2):\n        Out[0, 0] = 1.0\n", "the operator `in`",
     "lane in (1, 2)", "x == 1 or x == 2",
     "    if lane == 1 or lane == 2:\n        Out[0, 0] = 1.0\n"),
    ("raise", '    if n < 0:\n        raise ValueError("n")\n', "raise is not part", "raise",
     "use an if", '    if n < 0:\n        T.cuda.printf("bad n %d\\n", n)\n'),
    ("match", "    match n:\n        case 1:\n            pass\n", "match is not part", "match n",
     "if/elif", "    if n == 1:\n        pass\n"),
    ("class-def", "    class C:\n        pass\n", "a class definition", "class C", "outside",
     "    pass\n"),
    ("bytes", '    x = b"ab"\n', "a bytes literal", 'b"ab"', "numbers", "    x = 1\n"),
    ("misspelt-name", "    x = lnae + 1\n", "name 'lnae' is not defined", "lnae", "`lane`",
     "    x = lane + 1\n"),
]  # fmt: skip


@pytest.mark.parametrize("case", NAMED, ids=[c[0] for c in NAMED])
def test_python_outside_the_language_is_named_in_words(case, tmp_path):
    import math

    _, bad, message, under, fix, twin = case
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(HEAD + bad, tmp_path, "k", math=math)
    err = info.value
    assert message in err.message, str(err)
    assert caret_text(str(err)).startswith(under), str(err)
    assert err.hint and fix in err.hint, str(err)
    assert str(tmp_path) in str(err)
    k = define(HEAD + twin, tmp_path, "k", math=math)
    for target in ("sim", "cuda -arch=sm_90"):
        assert tirx.compile(k, target=target) is not None


def test_an_ellipsis_body_is_a_pass(tmp_path):
    """``...`` where a block needs a statement, as Python programmers write it."""
    k = define(HEAD + "    if n > 0:\n        ...\n", tmp_path, "k")
    tirx.compile(k, target="sim")(
        torch.zeros(16, 16, dtype=torch.float16), torch.zeros(8, 16, dtype=torch.float16),
        torch.zeros(16, 8), 1,
    )  # fmt: skip


def test_float8_scalar_parameter_names_its_line_and_both_fixes(tmp_path):
    bad = """
    @T.function
    def k(Out: T.Tensor((32,), "float32"),
          x: T.float8_e4m3fn):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        Out[T.cuda.lane_id()] = T.float32(x)
    """
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(bad, tmp_path, "k")
    err = info.value
    assert "parameter 'x': fp8 scalars are not a kernel parameter type" in err.message
    assert caret_text(str(err)).startswith("T.float8_e4m3fn")
    assert "x: T.float32 and convert inside with T.float8_e4m3fn(x)" in err.hint
    assert 'x: T.Tensor((1,), "float8_e4m3fn")' in err.hint
    for twin in (
        bad.replace("x: T.float8_e4m3fn", "x: T.float32"),
        bad.replace("x: T.float8_e4m3fn", 'x: T.Tensor((1,), "float8_e4m3fn")').replace(
            "T.float32(x)", "T.float32(x[0])"
        ),
    ):
        k = define(twin, tmp_path, "k")
        for target in ("sim", "cuda -arch=sm_90"):
            assert tirx.compile(k, target=target) is not None


def test_float_tensor_shape_is_refused_at_the_annotation(tmp_path):
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(
            """
            @T.function
            def k(A: T.Tensor((8, 1.5), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            """,
            tmp_path,
        )
    assert caret_line(str(info.value)).startswith("def k(A: T.Tensor((8, 1.5)")
    assert "^" * len("T.Tensor") in str(info.value)
    assert "integer" in str(info.value)


def test_typo_outside_a_kernel_names_the_closest():
    with pytest.raises(AttributeError, match="lane_id"):
        tirx.T.cuda.laneid  # noqa: B018
    with pytest.raises(AttributeError, match="`T.function`"):
        tirx.T.fucntion  # noqa: B018
    # T.ptx.<family>.<modifier>... is the real TIRx's chain: an instruction, called in kernels
    assert tirx.T.ptx.bar.sync.text == "bar.sync"
    with pytest.raises(tirx.TirxSyntaxError, match="only be called inside a kernel"):
        tirx.T.ptx.bar.sync(1, 64)
    assert not hasattr(tirx.T.cuda, "laneid") and hasattr(tirx.T.cuda, "lane_id")


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


# ------------------------------------------------------------------ decided and allowed


def test_assigning_a_scalar_parameter_changes_a_local_copy_on_both_targets(tmp_path):
    """Decision (docs/semantics.md): a scalar parameter may be assigned; the thread works on
    its own copy, as in Python and C. Both targets compile it; the simulator's result is
    the Python one."""
    np = pytest.importorskip("numpy")
    k = define(
        """
        @T.function
        def k(A: T.Tensor((32,), "int32"), n: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            n = n + lane
            for i in range(2):
                n += 1
            A[lane] = n
        """,
        tmp_path,
        "k",
    )
    src = tirx.compile(k, target="cuda -arch=sm_90").source
    assert "n_2 = n;" in src  # the copy is its own C variable; the parameter is never assigned
    a = np.zeros(32, dtype=np.int32)
    tirx.compile(k, target="sim")(a, 5)
    np.testing.assert_array_equal(a, np.arange(32) + 7)


def test_any_python_identifier_reaches_c(tmp_path):
    np = pytest.importorskip("numpy")
    k = define(
        """
        @T.function
        def kλ(A: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            λ = T.cuda.lane_id() * 2
            λ_ = λ + 1
            Größe = λ_ + λ
            A[T.cuda.lane_id()] = Größe
        """,
        tmp_path,
        "kλ",
    )
    exe = tirx.compile(k, target="cuda -arch=sm_90")  # NVRTC accepts the generated names
    body = exe.source.split("#line", 1)[-1]
    assert body.isascii(), [c for c in body if not c.isascii()]
    a = np.zeros(32, dtype=np.int32)
    tirx.compile(k, target="sim")(a)
    np.testing.assert_array_equal(a, np.arange(32) * 4 + 1)


@pytest.mark.parametrize(
    "name", ["printf", "nullptr", "TIRX_DEVICE", "_Bool", "reinterpret_cast", "isnan", "try_"]
)
def test_names_c_reserves_reach_c_renamed(tmp_path, name):
    np = pytest.importorskip("numpy")
    k = define(
        f"""
        @T.function
        def k(A: T.Tensor((32,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            {name} = T.cuda.lane_id() + 1
            T.cuda.printf("%d\\n", {name})
            A[T.cuda.lane_id()] = {name} * 3
        """,
        tmp_path,
        "k",
    )
    assert tirx.compile(k, target="cuda -arch=sm_90").source  # NVRTC accepts the C names
    a = np.zeros(32, dtype=np.int32)
    import io

    tirx.compile(k, target="sim")(a, stdout=io.StringIO())
    np.testing.assert_array_equal(a, (np.arange(32) + 1) * 3)


# ------------------------------------------------------------------ arguments at call time

torch = pytest.importorskip("torch")


@pytest.fixture
def copy_kernel(tmp_path):
    """``Out[i] = In[i] + 1`` over 32 floats: ``In`` is read, ``Out`` written."""
    return define(
        """
        @T.function
        def copy(In: T.Tensor((32,), "float32"), Out: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            Out[lane] = In[lane] + 1.0
        """,
        tmp_path,
        "copy",
    )


def test_a_written_leaf_that_requires_grad_is_refused_as_torch_refuses_it(copy_kernel):
    """``Out`` is written in place: a leaf that requires grad is refused (torch refuses its
    in-place ops), by name; read tensors may require grad; under torch.no_grad(), or for a
    non-leaf, the kernel writes it (unseen by autograd, as any custom kernel)."""
    x = torch.arange(32, dtype=torch.float32, requires_grad=True)  # only read: fine
    out = torch.zeros(32, requires_grad=True)
    with pytest.raises(RuntimeError, match="a leaf Variable that requires grad"):
        out.add_(1)  # what torch says of the same write
    exe = tirx.compile(copy_kernel, target="sim")
    with pytest.raises(tirx.LaunchError) as info:
        exe(x, out)
    err = info.value
    assert "parameter 'Out' is a leaf tensor that requires grad" in err.message
    assert "writes it in place" in err.message and "torch.no_grad()" in err.hint
    assert torch.equal(out.detach(), torch.zeros(32))  # nothing was written
    with torch.no_grad():
        exe(x, out)  # the twin the hint names
    assert torch.equal(out.detach(), x.detach() + 1)
    nonleaf = torch.zeros(32, requires_grad=True) * 1
    exe(x, nonleaf)
    assert torch.equal(nonleaf.detach(), x.detach() + 1)
    plain = torch.zeros(32)
    exe(x, plain)
    assert torch.equal(plain, x.detach() + 1)


def test_written_tensors_are_found_in_the_lowered_program(tmp_path):
    """Stores, atomics and PTX calls whose destination is a global address write; reads,
    and copies from global memory into shared memory, do not."""
    from tirx.executable import ArgChecker

    k = define(
        """
        @T.function
        def k(Src: T.Tensor((32,), "float32"), Dst: T.Tensor((32,), "float32"),
              Acc: T.Tensor((1,), "float32"), Copied: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            s = T.alloc_shared((32,), "float32", align=16)
            T.cuda.tile.apply(
                T.ptx["cp.async.ca.shared.global"], s[lane : lane + 1], Copied[lane : lane + 1],
                scope="thread", chunk_bytes=4,
            )
            T.ptx["cp.async.wait_all"]()
            Dst[lane] = Src[lane] + s[lane]
            T.cuda.atomic_add(T.address_of(Acc[0]), Src[lane])
        """,
        tmp_path,
        "k",
    )
    lowered = tirx.compile(k, target="sim").lowered
    assert ArgChecker(lowered, "cpu").written() == {1, 2}
    from tests.bulk_kernels import bulk_store  # Out written by cp.async.bulk alone

    lowered = tirx.compile(bulk_store, target="sim").lowered
    assert ArgChecker(lowered, "cpu").written() == {1}


@pytest.mark.parametrize("native", [False, None], ids=["python-runner", "c-runner"])
def test_the_launcher_refuses_a_written_leaf_that_requires_grad_hit_or_miss(copy_kernel, native):
    """The cuda launcher without a GPU (launches recorded, CPU tensors): a remembered tensor
    that is later made to require grad, and a new one, are both refused by name; under
    torch.no_grad() and for a non-leaf the call launches."""
    from tests.helpers import attach_recorder

    exe = tirx.compile(copy_kernel, target="cuda -arch=sm_90")
    recorder = attach_recorder(exe, -1)
    if native is None:
        launch = pytest.importorskip("tirx.backend.cuda._launch", reason="extension not built")
        if not getattr(launch, "CHECKS_GRAD", False):
            pytest.skip("the C extension predates the grad check: rebuild it")
        from tirx.backend.cuda import driver

        class FakeKernel:
            name, handle, max_dynamic_smem = exe.lowered.name, 1, 48 * 1024

        launcher = driver.Launcher(
            FakeKernel(), exe._kinds, entry=recorder, entry_address=launch.record_entry()
        )
        exe._attach(launcher, -1)
        launch.set_record(len(exe._kinds), 0)

    def launches() -> int:
        return (
            launch.last_launch()["calls"] + len(recorder.calls)
            if native is None
            else len(recorder.calls)
        )

    try:
        exe._build_runner(native=native)
        assert exe.fast_path == ("python" if native is False else "c")
        x, out = torch.arange(32.0, requires_grad=True), torch.zeros(32)
        exe(x, out)
        exe(x, out)  # a memo hit
        start = launches()
        out.requires_grad_(True)  # the remembered tensor, unchanged but for the flag
        with pytest.raises(tirx.LaunchError, match="parameter 'Out' is a leaf tensor"):
            exe(x, out)
        with pytest.raises(tirx.LaunchError, match="parameter 'Out' is a leaf tensor"):
            exe(x, torch.zeros(32, requires_grad=True))  # a miss
        assert launches() == start
        with torch.no_grad():
            exe(x, out)
        exe(x, torch.zeros(32, requires_grad=True) * 1)
        out.requires_grad_(False)
        exe(x, out)
        assert launches() == start + 3
    finally:
        if native is None:
            launch.set_record(0, 0)


def test_inference_tensors_run_on_the_simulator(copy_kernel):
    with torch.inference_mode():
        x = torch.arange(32, dtype=torch.float32)
        out = torch.zeros(32)
    tirx.compile(copy_kernel, target="sim")(x, out)
    assert torch.equal(out, x + 1)


def _quantized():
    return torch.quantize_per_tensor(torch.zeros(32), 0.1, 0, torch.qint8)


REFUSED_KINDS = [
    ("sparse", lambda: torch.zeros(32).to_sparse(), TypeError, "to_dense()"),
    ("sparse-csr", lambda: torch.zeros(4, 8).to_sparse_csr(), TypeError, "to_dense()"),
    ("quantized", _quantized, TypeError, "dequantize()"),
    ("meta", lambda: torch.empty(32, device="meta"), ValueError, "real device"),
    ("conjugate-view", lambda: torch.zeros(32, dtype=torch.complex64).conj(), ValueError,
     "resolve_conj()"),
    ("nested", lambda: torch.nested.nested_tensor([torch.zeros(16), torch.zeros(16)]),
     TypeError, "to_padded_tensor"),
]  # fmt: skip


@pytest.mark.filterwarnings("ignore::UserWarning")  # torch's beta/deprecation notes
@pytest.mark.parametrize("case", REFUSED_KINDS, ids=[c[0] for c in REFUSED_KINDS])
@pytest.mark.parametrize("target", ["sim", "cuda -arch=sm_90"])
def test_tensor_kinds_without_dense_memory_are_refused_by_name(copy_kernel, case, target):
    _, make, cls, fix = case
    try:
        bad = make()
    except (RuntimeError, NotImplementedError) as e:  # a kind this torch build lacks
        pytest.skip(f"cannot build it here: {e}")
    exe = tirx.compile(copy_kernel, target=target)
    with pytest.raises(cls) as info:
        if target == "sim":
            exe(bad, torch.zeros(32))
        else:
            exe.checked_values((bad, torch.zeros(32)))  # the checks a GPU call runs first
    assert "'In'" in str(info.value) and fix in str(info.value), str(info.value)


def _aliases():
    """``In`` and ``Out`` over the same memory: the same tensor, and two views of one."""
    same = torch.zeros(32)
    storage = torch.zeros(48)
    return [(same, same), (storage[:32], storage[16:])]


@pytest.mark.parametrize("which", [0, 1], ids=["same-tensor", "overlapping-views"])
def test_overlapping_tensors_are_refused_on_the_simulator(copy_kernel, which):
    x, out = _aliases()[which]
    with pytest.raises(ValueError, match="'In' and 'Out' overlap") as info:
        tirx.compile(copy_kernel, target="sim")(x, out)
    assert "__restrict__" in str(info.value) and "clone()" in str(info.value)
    np = pytest.importorskip("numpy")
    arr = np.zeros(32, dtype=np.float32)
    with pytest.raises(ValueError, match="overlap"):
        tirx.compile(copy_kernel, target="sim")(arr, arr)
    tirx.compile(copy_kernel, target="sim")(torch.zeros(32), torch.zeros(32))  # the twin runs


def test_tensors_only_read_may_alias(tmp_path):
    np = pytest.importorskip("numpy")
    k = define(
        """
        @T.function
        def add(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"),
                Out: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            Out[lane] = X[lane] + Y[lane]
        """,
        tmp_path,
        "add",
    )
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, dtype=np.float32)
    tirx.compile(k, target="sim")(x, x, out)
    np.testing.assert_array_equal(out, 2 * x)
    with pytest.raises(ValueError, match="'X' and 'Out' overlap"):
        tirx.compile(k, target="sim")(x, x, x)


@pytest.mark.parametrize("native", [False, None], ids=["python-runner", "c-runner"])
def test_overlapping_tensors_are_refused_by_the_launcher(copy_kernel, native):
    """The cuda executable's launcher (no GPU: launches recorded, CPU tensors): an aliasing
    call is refused by name on a memo miss, whichever runner takes it; a good call launches."""
    from tests.helpers import attach_recorder

    exe = tirx.compile(copy_kernel, target="cuda -arch=sm_90")
    recorder = attach_recorder(exe, -1)
    if native is None:
        launch = pytest.importorskip("tirx.backend.cuda._launch", reason="extension not built")
        from tirx.backend.cuda import driver

        class FakeKernel:
            name, handle, max_dynamic_smem = exe.lowered.name, 1, 48 * 1024

        launcher = driver.Launcher(
            FakeKernel(), exe._kinds, entry=recorder, entry_address=launch.record_entry()
        )
        exe._attach(launcher, -1)
        launch.set_record(len(exe._kinds), 0)
    try:
        exe._build_runner(native=native)
        assert exe.fast_path == ("python" if native is False else "c")
        x, out = torch.zeros(32), torch.zeros(32)
        exe(x, out)  # a good call: launched (and remembered)
        for bad in _aliases():
            with pytest.raises(ValueError, match="'In' and 'Out' overlap"):
                exe(*bad)
        exe(x, out)  # the remembered good call still launches
    finally:
        if native is None:
            launch.set_record(0, 0)
    if native is False:
        assert len(recorder.calls) == 2


# ------------------------------------------------------------------ the same on the GPU


@pytest.mark.gpu
def test_gpu_arguments_agree_with_the_simulator(copy_kernel, tmp_path):
    """On the H200: grad-requiring inputs and inference tensors run, a written leaf that
    requires grad is refused by name (new or remembered) and written under torch.no_grad(),
    aliasing a written tensor is refused by name (C runner and Python runner alike),
    read-only aliasing runs."""
    exe = tirx.compile(copy_kernel, target="cuda")
    x = torch.arange(32, dtype=torch.float32, device="cuda", requires_grad=True)
    out = torch.zeros(32, device="cuda")
    exe(x, out)
    exe(x, out)  # from the memo
    leaf = torch.zeros(32, device="cuda", requires_grad=True)
    for _ in range(2):
        with pytest.raises(tirx.LaunchError, match="parameter 'Out' is a leaf tensor"):
            exe(x, leaf)
    out.requires_grad_(True)
    with pytest.raises(tirx.LaunchError, match="parameter 'Out' is a leaf tensor"):
        exe(x, out)
    with torch.no_grad():
        exe(x, leaf)
        exe(x, out)
    out.requires_grad_(False)
    with torch.inference_mode():
        xi, outi = torch.arange(32.0, device="cuda"), torch.zeros(32, device="cuda")
    exe(xi, outi)
    for bad in ([out, out], [torch.zeros(48, device="cuda")[:32]] * 2):
        with pytest.raises(ValueError, match="'In' and 'Out' overlap"):
            exe(*bad)
    storage = torch.zeros(48, device="cuda")
    with pytest.raises(ValueError, match="overlap"):
        exe(storage[:32], storage[16:])
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), torch.arange(32.0) + 1)
    assert torch.equal(leaf.detach().cpu(), torch.arange(32.0) + 1)
    assert torch.equal(outi.cpu(), torch.arange(32.0) + 1)
    add = define(
        """
        @T.function
        def add(X: T.Tensor((32,), "float32"), Y: T.Tensor((32,), "float32"),
                Out: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            lane = T.cuda.lane_id()
            Out[lane] = X[lane] + Y[lane]
        """,
        tmp_path,
        "add",
    )
    exe = tirx.compile(add, target="cuda")
    y = torch.arange(32.0, device="cuda")
    for _ in range(3):  # the first call through Python, the repeats from the memo
        exe(y, y, out)
    torch.cuda.synchronize()
    assert torch.equal(out.cpu(), 2 * torch.arange(32.0))


@pytest.mark.gpu
def test_gpu_parameter_copies_and_unicode_names_match_the_simulator(tmp_path):
    k = define(
        """
        @T.function
        def kλ(A: T.Tensor((32,), "int32"), n: T.int32):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            λ = T.cuda.lane_id() * 2
            n = n + λ
            for i in range(2):
                n += 1
            A[T.cuda.lane_id()] = n
        """,
        tmp_path,
        "kλ",
    )
    want = torch.zeros(32, dtype=torch.int32)
    tirx.compile(k, target="sim")(want, 5)
    got = torch.zeros(32, dtype=torch.int32, device="cuda")
    tirx.compile(k, target="cuda")(got, 5)
    torch.cuda.synchronize()
    assert torch.equal(got.cpu(), want) and torch.equal(want, torch.arange(32) * 2 + 7)


def test_an_unknown_name_in_a_sub_namespace_is_named_by_its_place(tmp_path):
    """``T.cuda.wgmma.<unknown>`` says ``T.cuda.wgmma``, not the namespace object's repr."""
    k = HEAD + "    T.cuda.wgmma.no_such_call(dr[0])\n"
    with pytest.raises(SYN) as e:
        define(k, tmp_path, "k")
    assert "T.cuda.wgmma has no attribute 'no_such_call'" in str(e.value)
    assert " at 0x" not in str(e.value)
    assert caret_line(str(e.value)) == "T.cuda.wgmma.no_such_call(dr[0])"


@pytest.mark.parametrize(
    ("line", "python"),
    [
        ("Out[lane, 0] = 0.5 % -0.0", "float modulo"),
        ("Out[lane, 0] = T.float32(1.0) / T.float32(0.0)", "1.0 / 0.0"),
        ("Out[lane, 0] = T.float32(7 // 0)", "integer division or modulo by zero"),
    ],
)
def test_a_constant_divided_by_zero_is_named_with_the_fix(line, python, tmp_path):
    """Not Python's bare "float modulo": what happened, where, and what to write instead."""
    with pytest.raises(tirx.TirxError) as e:
        tirx.compile(define(HEAD + "    " + line + "\n", tmp_path, "k"), target="sim")
    msg = str(e.value)
    assert f"division by zero in a constant expression ({python})" in msg
    assert caret_line(msg) == line
    assert "take the value from a tensor" in e.value.hint
    fixed = line.replace("0.0", "T.float32(n)").replace("// 0", "// (n + 1)").replace("-T", "T")
    tirx.compile(define(HEAD + "    " + fixed + "\n", tmp_path, "k"), target="sim")


@pytest.mark.parametrize(
    "pattern, sizes, message, hint",
    [
        ("(g r (c w) -> r", "", "a '(' is not closed on the left side", "not nested"),
        ("r w -> (w r", "", "a '(' is not closed on the right side", "not nested"),
        ("r w -> w) r", "", "unexpected ')'", "'(a b) c -> b (a c)'"),
        (
            "(g r) (c w) -> c g r w",
            ", g=2",
            "group (c w) splits a dimension of extent 8 with 2 sizes unknown (c, w)",
            "rearrange(..., c=...)",
        ),
    ],
)
def test_rearrange_patterns_say_what_is_wrong(pattern, sizes, message, hint, tmp_path):
    body = f'    v = a.view("uint32").rearrange("{pattern}"{sizes})\n'
    with pytest.raises(tirx.LayoutError) as info:
        define(HEAD + body, tmp_path, "k")
    assert message in info.value.message and hint in info.value.hint
    assert "rearrange(" in caret_line(str(info.value))


def test_a_loop_step_known_only_at_run_time_is_told_the_persistent_form(tmp_path):
    body = "    for t in range(0, 64, n):\n        Out[0, 0] = 1.0\n"
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(HEAD + body, tmp_path, "k")
    assert "the loop step must be a nonzero compile-time integer" in info.value.message
    assert "for i in range(T.ceildiv(stop - start, step)): t = start + i * step" in info.value.hint
    assert caret_text(str(info.value)).startswith("n):")  # the caret under the step


def test_a_register_view_moved_by_a_loop_variable_is_told_to_unroll(tmp_path):
    def kernel(loop):
        return f"""
@T.function
def k(Out: T.Tensor((16, 8), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    ar = T.alloc_local((8,), "uint32")
    br = T.alloc_local((4,), "uint32")
    dr = T.alloc_local((4,), "float32")
    for i in T.unroll(8):
        ar[i] = T.uint32(0)
    for i in T.unroll(4):
        br[i] = T.uint32(0)
        dr[i] = T.float32(0)
    for kq in {loop}(2):
        T.cuda.tile.apply(
            {MMA},
            dr.view(1, 1, 16, 8, layout={D_MMA}),
            ar.view(1, 2, 16, 8, layout=A2)[:, kq : kq + 1, :, :],
            br.view(1, 2, 8, 8, layout=B2)[:, kq : kq + 1, :, :],
            dr.view(1, 1, 16, 8, layout={D_MMA}),
            scope="warp",
        )
"""

    layouts = (
        "A2 = TileLayout(S[(1, 2, 2, 8, 2, 4) : (8, 4, 1, 4 @ laneid, 2, 1 @ laneid)])\n"
        "B2 = TileLayout(S[(1, 2, 8, 2, 4) : (4, 2, 4 @ laneid, 1, 1 @ laneid)])\n"
    )
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(define(layouts + kernel("range"), tmp_path, "k"), "sim")
    err = info.value
    assert "a register view must start at a compile-time slot" in err.message
    assert "for k in T.unroll(n)" in err.hint
    assert err.definition is None  # the layout is not at fault: no "defined here" for it
    assert "ar.view(1, 2, 16, 8, layout=A2)" in caret_line(str(err))
    tirx.compile(define(layouts + kernel("T.unroll"), tmp_path, "k"), "sim")  # the twin


REAL_TIRX_SPELLINGS = [
    (
        "ty_args",
        '    x = T.alloc_tensor(ty_args=[T.Tensor((4,), "float32", scope="local")])\n',
        "unexpected keyword argument 'ty_args'",
        "T.alloc_tensor(shape, dtype, scope=...)",
    ),
]


@pytest.mark.parametrize("case", REAL_TIRX_SPELLINGS, ids=[c[0] for c in REAL_TIRX_SPELLINGS])
def test_the_real_tirxs_spellings_are_told_tirxs(case, tmp_path):
    _, body, message, hint = case
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(HEAD + body, tmp_path, "k")
    assert message in info.value.message and hint in info.value.hint


def test_a_device_entry_written_as_a_with_block_is_told_it_is_a_statement(tmp_path):
    source = """
@T.function
def k(O: T.Tensor((1,), "float32")):
    with T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1)):
        O[0] = 1.0
"""
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(source, tmp_path, "k")
    assert info.value.message == "T.device_entry(...) is a statement, not a with-block"
    assert "as the kernel's first statement" in info.value.hint
    assert caret_line(str(info.value)).lstrip().startswith("with T.device_entry(")


@pytest.mark.parametrize(
    "name, says",
    [
        ("meta_class", "write the helper as a @T.macro"),
        ("jit", "through a factory"),
        ("launch_thread", "T.device_entry(launch=T.cuda.LaunchConfig("),
        ("prim_func", "a tirx kernel is @T.function"),
    ],
)
def test_the_real_tirxs_names_say_what_tirx_writes(name, says):
    with pytest.raises(AttributeError) as info:
        getattr(T, name)
    assert f"T has no attribute {name!r}: " in str(info.value) and says in str(info.value)
    assert "did you mean" not in str(info.value)


# One mbarrier round: {init} initializes bar[1] (statement lines), {arrive} is the arrive's
# address operand; every thread reads its neighbour's value after the phase.
BARRIER_ROUND = """
@T.function
def k(Out: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    bar = T.alloc_shared((2,), "uint64")
    s = T.alloc_shared((32,), "int32")
    tid = T.cuda.thread_idx("x")
{init}
    T.cuda.cta_sync()
    s[tid] = tid * 3
    T.ptx["mbarrier.arrive.shared::cta.b64"]({arrive})
    T.cuda.mbarrier_wait(bar[1], 0)
    Out[tid] = s[(tid + 1) % 32]
"""
INIT = 'T.ptx["mbarrier.init.shared::cta.b64"]({}, 32'


def _round_cuda(tmp_path, init: str, arrive: str = "bar[1]") -> list[str]:
    """BARRIER_ROUND run on the simulator (checked) and its CUDA without #line directives."""
    import numpy as np

    k = define(BARRIER_ROUND.format(init=init, arrive=arrive), tmp_path, "k")
    out = np.zeros(32, np.int32)
    tirx.compile(k, "sim")(out)
    assert (out == (np.arange(32) + 1) % 32 * 3).all(), init
    cuda = tirx.compile(k, "cuda -arch=sm_90").source
    return [ln for ln in cuda.splitlines() if not ln.startswith("#line")]


def test_ptr_to_is_address_of_wherever_it_stands(tmp_path):
    """TIRx's t.ptr_to([i]) as a raw PTX call's address: the same CUDA as t[i] (but for the
    #line directives), and the same run."""
    runs = [
        _round_cuda(tmp_path, f"    if tid == 0:\n        {INIT.format(form)})", form)
        for form in ("bar[1]", "bar.ptr_to([1])", "T.address_of(bar[1])")
    ]
    assert runs[0] == runs[1] == runs[2]
    with pytest.raises(tirx.TirxSyntaxError, match="local .* array: it has no address"):
        define(HEAD + "    x = ar.ptr_to([0])\n", tmp_path, "k")


def test_pred_on_a_raw_ptx_call_is_the_call_under_an_if(tmp_path):
    """TIRx's pred= on a raw call: the same CUDA and run as the call under `if pred:`; a
    predicate false at compile time drops the call; another keyword is refused."""
    init = INIT.format("bar[1]")
    guarded = _round_cuda(tmp_path, f"    if tid == 0:\n        {init})")
    assert _round_cuda(tmp_path, f"    {init}, pred=tid == 0)") == guarded
    dropped = define(BARRIER_ROUND.format(init=f"    {init}, pred=False)", arrive="bar[1]"),
                     tmp_path, "k")  # fmt: skip
    assert "mbarrier.init" not in tirx.compile(dropped, "cuda -arch=sm_90").source
    with pytest.raises(tirx.TirxSyntaxError, match=r"positional operands \(and pred=\) only"):
        define(BARRIER_ROUND.format(init=f"    {init}, when=tid == 0)", arrive="bar[1]"),
               tmp_path, "k")  # fmt: skip
