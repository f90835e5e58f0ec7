"""The language forms of TIRx (tirx/script/forms.py, loops.py, macros.py; docs/semantics.md,
"Language forms of TIRx"): loops, conditional values, compile-time values and bindings,
macros, scalar storage, bit casts, addresses and the thread-index helpers.

Per form: the simulator's results against numpy (tests/lang_kernels.py), the generated CUDA
against a golden excerpt (and NVRTC compiles it), both targets bit for bit on the GPU
machine, and misuse refused at the user's line with a hint, its corrected twin accepted.
Set ``TIRX_UPDATE_GOLDENS=1`` to rewrite the goldens after a deliberate codegen change.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tests.lang_kernels import CASES
from tirx.backend.cuda.codegen import generate
from tirx.ir import nodes as ir
from tirx.transform.lower import lower_function

GOLDENS = Path(__file__).parent / "goldens"
IDS = [c.name for c in CASES]


def _kernel_source(kernel) -> str:
    """The generated kernel from its ``extern "C"`` line, with ``#line`` directives naming
    no file (the goldens do not depend on where the checkout is)."""
    src = generate(lower_function(kernel.ir, 90))
    body = src[src.index('extern "C"') :]
    return re.sub(r'(#line \d+) "[^"]*"', r"\1", body)


def _bits(a) -> bytes:
    return np.ascontiguousarray(a).tobytes()


# ------------------------------------------------------------------------ semantics


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_simulator_gives_what_the_forms_mean(case):
    args = case.inputs(np.random.default_rng(7))
    tirx.compile(case.kernel, target="sim")(*args)
    for i, want in zip(case.outputs, case.expected(*args)):
        assert args[i].dtype == want.dtype
        assert _bits(args[i]) == _bits(want), f"output {i} of {case.name}"


def test_if_then_else_does_not_evaluate_the_untaken_side():
    """The conditional kernel's threads 32..63 would read A[32..63], past A's end: the
    simulator faults on an out-of-bounds load, so passing means it never ran them."""
    from tests.lang_kernels import conditional

    exe = tirx.compile(conditional, target="sim")
    A = np.arange(32, dtype=np.float32)
    B, C = np.zeros(64, np.float32), np.zeros(64, np.float32)
    exe(A, B, C)
    assert (B[32:] == -1).all() and (B[:32] == A).all()


def test_loop_forms_lower_to_the_loop_kinds():
    from tests.lang_kernels import grid_loops, vector_loops

    def kinds(fn):
        return [n.kind for n in ir_walk(fn.ir.body) if isinstance(n, ir.For)]

    assert kinds(grid_loops) == [ir.LoopKind.SERIAL] * 3 + [ir.LoopKind.UNROLL] * 2
    assert set(kinds(vector_loops)) == {ir.LoopKind.VECTORIZED}


def ir_walk(node):
    from tirx.ir.visitor import walk

    return walk(node)


def test_vectorized_copy_is_one_vector_access_and_other_bodies_unroll():
    from tests.lang_kernels import vector_loops

    src = _kernel_source(vector_loops)
    assert src.count("*reinterpret_cast<uint4*>(&") == 2  # the f32 and the f16 copies
    assert src.count("#pragma unroll") == 1  # the body that is not a plain copy


REGISTER_VECTORS = """
@T.function
def kernel(A: T.Tensor((1024,), "float16"), B: T.Tensor((1024,), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tid = T.cuda.thread_idx("x")
    x = T.alloc_local((8,), "float16")
    for v in T.vectorized(8):
        x[v] = A[tid * 8 + v]
    for v in T.vectorized(8):
        B[tid * 8 + v] = x[v]
"""


def test_a_vectorized_copy_into_registers_and_out_is_one_vector_access_each(tmp_path):
    kernel = define(REGISTER_VECTORS, tmp_path, "kernel")
    a = (np.arange(1024) % 251).astype(np.float16)
    b = np.zeros_like(a)
    tirx.compile(kernel, "sim")(a, b)
    assert _bits(b) == _bits(a)
    exe = tirx.compile(kernel, "cuda -arch=sm_90")
    assert exe.source.count("reinterpret_cast<uint4*>(&") == 2
    ptx = {ln.split()[0] for ln in exe.ptx.splitlines() if ln.strip().startswith(("ld.", "st."))}
    ptx.discard("ld.param.u64")  # the two tensor pointers
    assert ptx == {"ld.global.nc.v4.u32", "st.global.v4.u32"}  # the array stays in registers
    assert exe.stats["stack_bytes"] == 0 and exe.stats["spill_stores"] == 0


def test_thread_helpers_fold_a_one_dimensional_block():
    """In a (128, 1, 1) block the linear thread id is threadIdx.x itself: no y or z terms."""
    from tirx.script.forms import thread_helper

    flat = thread_helper("cuda.linear_thread_id", ir.LaunchConfig((1, 1, 1), (128, 1, 1)))
    assert isinstance(flat, ir.Special) and flat.kind is ir.Builtin.THREAD_IDX
    two_d = thread_helper("cuda.linear_thread_id", ir.LaunchConfig((1, 1, 1), (64, 4, 1)))
    dims = {n.dim for n in ir_walk(two_d) if isinstance(n, ir.Special)}
    assert dims == {0, 1}


def test_macro_closure_is_read_at_decoration_inline_at_the_call(tmp_path):
    ns = define(
        """
        def make():
            k = 1

            @T.macro
            def early(dst):
                dst[0] = k

            @T.inline
            def late(dst):
                dst[1] = k

            k = 2
            return early, late

        early, late = make()

        @T.function
        def kern(A: T.Tensor((2,), "int32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
            early(A)
            late(A)
        """,
        tmp_path,
    )
    A = np.zeros(2, np.int32)
    tirx.compile(ns["kern"], target="sim")(A)
    assert A.tolist() == [1, 2]


def test_kernels_using_macros_are_front_end_cached():
    """A macro is fingerprinted by its text and what its body read (tests/
    test_frontend_cache_macros.py says when such a kernel is found again)."""
    from tests.lang_kernels import bindings, macros

    assert getattr(macros, "frontend", None) is not None
    assert getattr(bindings, "frontend", None) is not None


# --------------------------------------------------------------------------- goldens


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_generated_cuda_matches_the_golden(case):
    path = GOLDENS / f"lang_{case.name}.cu"
    got = _kernel_source(case.kernel)
    if os.environ.get("TIRX_UPDATE_GOLDENS"):
        path.write_text(got)
    assert got == path.read_text(), f"regenerate with TIRX_UPDATE_GOLDENS=1 if intended: {path}"


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_generated_cuda_compiles(case):
    from tirx.backend.cuda.nvrtc import compile_cuda

    src = generate(lower_function(case.kernel.ir, 90))
    out = compile_cuda(src, arch="sm_90")
    assert out.cubin[:4] == b"\x7fELF"


# ------------------------------------------------------------------------------- GPU


@pytest.mark.gpu
@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_gpu_and_simulator_agree_bit_for_bit(case):
    import torch

    sim_args = case.inputs(np.random.default_rng(5))
    gpu_args = [torch.from_numpy(a.copy()).cuda() for a in sim_args]
    tirx.compile(case.kernel, target="sim")(*sim_args)
    tirx.compile(case.kernel, target="cuda")(*gpu_args)
    torch.cuda.synchronize()
    for i in case.outputs:
        assert _bits(gpu_args[i].cpu().numpy()) == _bits(sim_args[i]), f"output {i}"
    for i, want in zip(case.outputs, case.expected(*case.inputs(np.random.default_rng(5)))):
        assert _bits(gpu_args[i].cpu().numpy()) == _bits(want)


# ----------------------------------------------------------------------------- misuse

KERNEL = """
{pre}
@T.function
def k(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    r = T.alloc_local((4,), "float32")
    s = T.alloc_shared((32,), "float32")
{body}
"""

MACRO = """
@T.macro
def put(dst, i):
    v = {expr}
    dst[i] = v
"""

# (name, body, corrected body, text under the caret, words of the hint, macro definition)
MISUSE = [
    ("grid-targets", "    for i, j in T.grid(4):\n        B[i] = 1.0",
     "    for i in T.grid(4):\n        B[i] = 1.0", "for i, j in T.grid(4)", "one variable"),
    ("grid-pair", "    for i in T.grid((0, 4, 1)):\n        B[i] = 1.0",
     "    for i in T.grid((0, 4)):\n        B[i] = 1.0", "for i in T.grid", "(start, extent)"),
    ("vector-extent", "    for v in T.vectorized(3):\n        B[v] = A[v]",
     "    for v in T.vectorized(4):\n        B[v] = A[v]", "T.vectorized(3)", "power of two"),
    ("vector-align", "    for v in T.vectorized(4):\n        B[v + 1] = A[v + 1]",
     "    for v in T.vectorized(4):\n        B[v + 4] = A[v + 4]", "B[v + 1]", "multiple of 4"),
    ("vector-runtime-offset", "    for v in T.vectorized(4):\n        B[lane + v] = A[v]",
     "    for v in T.vectorized(4):\n        B[lane * 4 + v] = A[v]", "B[lane + v]",
     "multiple of 4"),
    ("vector-width", "    for v in T.vectorized(8):\n        B[v] = A[v]",
     "    for v in T.vectorized(4):\n        B[v] = A[v]", "T.vectorized(8)", "16 bytes"),
    ("vector-stride", "    for v in T.vectorized(4):\n        B[2 * v] = A[v]",
     "    for v in T.vectorized(4):\n        B[v] = A[v]", "B[2 * v]", "T.unroll"),
    ("vector-body", "    for v in T.vectorized(4):\n        if lane == 0:\n            B[v] = A[v]",
     "    for v in T.vectorized(4):\n        B[v] = A[v]", "if lane == 0", "T.unroll"),
    ("loop-annotations", "    for i in T.serial(4, annotations={}):\n        B[i] = 1.0",
     "    for i in T.serial(4):\n        B[i] = 1.0", "annotations={}", "T.unroll"),
    ("loop-dtype", '    for i in T.serial(4, dtype="int64"):\n        B[i] = 1.0',
     '    for i in T.serial(4, dtype="int32"):\n        B[i] = 1.0', '"int64"', "int32"),
    ("unroll-runtime", "    for i in T.unroll(0, lane):\n        B[i] = 1.0",
     "    for i in T.unroll(0, 4):\n        B[i] = 1.0", "T.unroll(0, lane)", "range"),
    ("vector-outside-for", "    x = T.vectorized(4)", "    x = 4", "T.vectorized(4)",
     "for i in"),
    ("select-tensor", "    B[lane] = T.if_then_else(lane < 4, A, 0.0)",
     "    B[lane] = T.if_then_else(lane < 4, A[lane], 0.0)", "T.if_then_else", "index one"),
    ("meta-unpack", "    a, b = T.meta_var((1, 2, 3))\n    B[lane] = a + b",
     "    a, b = T.meta_var((1, 2))\n    B[lane] = a + b", "a, b = T.meta_var", "as many"),
    ("let-reassigned", "    x: T.let = lane * 2\n    x = x + 1\n    B[lane] = x",
     "    x: T.let = lane * 2\n    y = x + 1\n    B[lane] = y", "x = x + 1", "another name"),
    ("bind-reassigned", "    x = T.bind_(lane)\n    x += 1\n    B[lane] = x",
     "    x = T.bind_(lane)\n    y = x + 1\n    B[lane] = y", "x += 1", "another name"),
    ("let-in-loop", "    x: T.let = lane\n    for x in range(4):\n        B[x] = 1.0",
     "    x: T.let = lane\n    for y in range(4):\n        B[y] = 1.0", "for x in", "another name"),
    ("scalar-f16", '    c = T.local_scalar("float16", 0)\n    B[lane] = c',
     '    c = T.local_scalar("float32", 0)\n    B[lane] = c', "T.local_scalar", "float32"),
    ("reinterpret-width", '    B[lane] = T.reinterpret(A[lane], ty="uint16")',
     '    B[lane] = T.reinterpret(A[lane], ty="uint32")', "T.reinterpret", "T.cast"),
    ("reinterpret-bool", '    B[lane] = T.reinterpret(lane < 3, ty="uint8")',
     '    B[lane] = T.reinterpret(T.uint8(3), ty="int8")', "T.reinterpret", "T.cast"),
    ("address-local", "    x = T.address_of(r[0])\n    B[lane] = x",
     "    x = T.address_of(s[0])\n    B[lane] = x", "T.address_of(r[0])", "shared"),
    ("address-value", "    x = T.address_of(lane)\n    B[lane] = x",
     "    x = T.address_of(A[lane])\n    B[lane] = x", "T.address_of(lane)", "one element"),
    ("alloc-scope", '    t = T.alloc_tensor((4,), "float32", scope="global")\n    t[0] = 1.0',
     '    t = T.alloc_tensor((4,), "float32", scope="local")\n    t[0] = 1.0', "T.alloc_tensor",
     "T.Tensor"),
    ("decl-not-tensor", "    t = T.decl_tensor(lane, (4,))\n    B[lane] = t[0]",
     "    t = T.decl_tensor(r, (2, 2))\n    B[lane] = t[0, 1]", "T.decl_tensor", "a tensor"),
    ("helper-args", "    B[lane] = T.cuda.warpgroup_id(0)",
     "    B[lane] = T.cuda.warpgroup_id()", "T.cuda.warpgroup_id(0)", "T.cuda.warpgroup_id()"),
    ("macro-args", "    put(B, lane, 3)", "    put(B, lane)", "put(B, lane, 3)", "put(dst, i)",
     MACRO.format(expr="i * 2")),
    ("store-indices", "    T.tensor_store(B, lane, 1.0)", "    T.tensor_store(B, [lane], 1.0)",
     "lane", "[i, j]"),
    ("store-value", "    x = T.tensor_store(B, [lane], 1.0)",
     "    T.evaluate(T.tensor_store(B, [lane], 1.0))", "T.tensor_store", "statement of its own"),
    ("store-args", "    T.tensor_store(B, [lane])", "    T.tensor_store(B, [lane], value=2.0)",
     "T.tensor_store(B, [lane])", "T.tensor_store(A, [i, j], value)"),
    ("store-dest", "    T.tensor_store(lane, [lane], 1.0)", "    T.tensor_store(r, [0], 1.0)",
     "lane", None),
    ("store-in-call", "    T.cuda.nano_sleep(T.tensor_store(B, [lane], 1.0))",
     "    T.evaluate(T.tensor_store(B, [lane], 1.0))", "T.tensor_store", "statement of its own"),
    ("store-index-count", "    T.tensor_store(B, [lane, 0], 1.0)",
     "    T.tensor_store(B, [lane], 1.0)", "[lane, 0]", "one index per dimension"),
]  # fmt: skip


@pytest.mark.parametrize("case", MISUSE, ids=[c[0] for c in MISUSE])
def test_misuse_is_refused_at_the_line_and_its_twin_accepted(case, tmp_path):
    name, bad, good, caret, hint = case[:5]
    pre = case[5] if len(case) > 5 else ""
    with pytest.raises(tirx.TirxError) as info:
        kern = define(KERNEL.format(pre=pre, body=bad), tmp_path, "k")
        tirx.compile(kern, target="sim")  # some checks run when the kernel is lowered
    err = info.value
    assert err.span is not None
    assert caret in caret_line(str(err)), str(err)
    if hint is not None:
        assert err.hint and hint in err.hint, err.hint
    kern = define(KERNEL.format(pre=pre, body=good), tmp_path, "k")
    tirx.compile(kern, target="sim")


@pytest.mark.parametrize(
    "expr, name",
    [("undefined_thing + i", "undefined_thing"), ("lane * 2", "lane")],
    ids=["unknown-name", "caller-local-is-invisible"],
)
def test_an_error_inside_a_macro_points_at_the_macro_line_and_names_the_call(expr, name, tmp_path):
    """A macro is hygienic: it does not see the caller's ``lane``. The error is located in
    the macro's body, and the message shows the call too."""
    src = KERNEL.format(pre=MACRO.format(expr=expr), body="    put(B, lane)")
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(src, tmp_path, "k")
    msg = str(info.value)
    assert caret_line(msg).startswith("v = "), msg
    assert f"name {name!r} is not defined" in msg
    assert "in the macro 'put', called here" in msg and "put(B, lane)" in msg
    # the caller has a `lane`: the hint says why the macro does not see it
    assert ("pass the value as an argument" in msg) == (name == "lane")
    twin = KERNEL.format(pre=MACRO.format(expr="i * 2"), body="    put(B, lane)")
    tirx.compile(define(twin, tmp_path, "k"), target="sim")


NESTED_MACROS = """
@T.macro
def step(dst, src, tid):
    dst[tid] = src[(tid + 32) % 64] + 1.0

@T.macro
def twice(s, t, tid):
    step(t, s, tid)
    {between}
    step(s, t, tid)

@T.function
def kernel(A: T.Tensor((64,), "float32"), Out: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tid = T.cuda.thread_idx("x")
    s = T.alloc_shared((64,), "float32")
    t = T.alloc_shared((64,), "float32")
    s[tid] = A[tid]
    T.cuda.cta_sync()
    twice(s, t, tid)
    Out[tid] = s[tid]
"""


def test_a_run_time_fault_in_a_macro_names_its_calls_innermost_first(tmp_path):
    """A race found by the simulator in a macro's body shows the body's line, then each call
    that reached it, as an error found while expanding the macro does."""
    kernel = define(NESTED_MACROS.format(between="pass"), tmp_path, "kernel")
    a = np.arange(64, dtype=np.float32)
    with pytest.raises(tirx.SimulationError, match="shared-memory race") as info:
        tirx.compile(kernel, "sim")(a, np.zeros_like(a))
    msg = str(info.value)
    assert caret_line(msg).startswith("dst[tid] = src[")
    inner, outer = msg.index("in the macro 'step', called here"), msg.index("in the macro 'twice'")
    assert inner < outer and "step(s, t, tid)" in msg[inner:outer]  # the second call
    assert "twice(s, t, tid)" in msg[outer:]
    assert info.value.span.called[0] == "step"
    fixed = define(NESTED_MACROS.format(between="T.cuda.cta_sync()"), tmp_path, "kernel")
    out = np.zeros_like(a)
    tirx.compile(fixed, "sim")(a, out)
    np.testing.assert_array_equal(out, a + 2.0)


def test_a_return_inside_a_macro_branch_is_refused(tmp_path):
    pre = "\n@T.macro\ndef pick(i):\n    if i > 2:\n        return 1\n    return 0\n"
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(KERNEL.format(pre=pre, body="    B[lane] = pick(lane)"), tmp_path, "k")
    assert "return" in caret_line(str(info.value))


def test_a_macro_called_outside_a_kernel_says_where_it_belongs():
    from tests.lang_kernels import scaled_store

    with pytest.raises(tirx.TirxSyntaxError, match="inside a @T.function"):
        scaled_store(None, 0, 1)


# ---------------------------------------------------------------------- the real TIRx

SPELLING = """
from tvm_tirx.script import tirx as T


@T.macro
def put(dst, i, value):
    dst[i] = value


@T.function
def kernel(A: T.Tensor((64,), "float32"), B: T.Tensor((64,), "float32"),
           C: T.Tensor((64,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    t = T.cuda.linear_thread_id()
    w = T.cuda.warp_in_warpgroup()
    n = T.meta_var(4)
    base: T.let = t // n * n
    for i, j in T.grid(2, 2):
        B[i * 2 + j] = A[i * 2 + j]
    for v in T.vectorized(4):
        B[base + v] = T.if_then_else(t < 32, A[base + v], T.Select(w > 0, 1.0, 2.0))
    T.assume_always(t < 64)
    T.tensor_store(C, [t], T.reinterpret(A[t], ty="uint32"))
    put(B, t, A[t] + T.cuda.warpgroup_id() + T.cuda.thread_in_warpgroup())
"""


@pytest.mark.reference
def test_the_real_tirx_takes_the_same_spelling(tmp_path):
    """One kernel file written with the forms in the real TIRx's spelling compiles with it
    (apache-tvm-tirx, an oracle in its own venv) and with tirx (through its tvm_tirx alias)."""
    from tests.test_reference import _need_reference, oracle

    _need_reference()
    import json

    (answer,) = oracle(json.dumps([{"kind": "compile", "source": SPELLING, "name": "k"}]))
    assert answer["ok"], answer["error"]
    kern = define(SPELLING, tmp_path, "kernel")
    A = np.arange(64, dtype=np.float32)
    B, C = np.zeros(64, np.float32), np.zeros(64, np.uint32)
    tirx.compile(kern, target="sim")(A, B, C)
    assert _bits(C) == _bits(A.view(np.uint32))


def test_the_simulator_refuses_a_tensor_not_aligned_to_its_vectors():
    """The lowering proves offsets from a tensor's start; a tensor that starts 4 bytes into
    an allocation would make the GPU's 16-byte accesses misaligned: the simulator says so."""
    from tests.lang_kernels import vector_loops

    exe = tirx.compile(vector_loops, target="sim")
    rng = np.random.default_rng(1)
    _, B, H, G = CASES[1].inputs(rng)
    shifted = np.zeros(32 * 8 + 1, np.float32)[1:].reshape(32, 8)
    with pytest.raises(tirx.SimulationError, match="not a multiple of 16") as info:
        exe(shifted, B, H, G)
    assert "T.vectorized(4)" in caret_line(str(info.value))
    assert "aligned" in info.value.hint
    exe(np.zeros((32, 8), np.float32), B, H, G)  # its aligned twin


ENDLESS = """
@T.macro
def ping(dst, i):
    pong(dst, i)


@T.macro
def pong(dst, i):
    dst[i] = dst[i] + 1
    ping(dst, i)


@T.function
def k(A: T.Tensor((32,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    ping(A, T.cuda.lane_id())
"""


def test_a_macro_recursion_without_end_names_its_cycle(tmp_path):
    """Recursion through macros with no compile-time bound is a TirxSyntaxError naming the
    cycle at the call, not Python's RecursionError (a bounded one works: the front-end cache's
    tests expand one)."""
    with pytest.raises(tirx.TirxSyntaxError) as info:
        define(ENDLESS, tmp_path)
    err = info.value
    assert "calls itself without end" in err.message
    assert "ping -> pong -> ping" in err.message or "pong -> ping -> pong" in err.message
    assert caret_line(str(err)) in ("ping(dst, i)", "pong(dst, i)")


def test_a_bare_annotation_declares_a_zeroed_variable_and_t_cast_takes_the_ir_order(tmp_path):
    """The real TIRx's ``phase: T.int32`` (declared, assigned later) and ``T.Cast(dtype,
    value)`` (its IR class's argument order; ``T.cast`` is ``(value, dtype)``)."""
    k = define(
        """
        @T.function
        def k(O: T.Tensor((32,), "float32")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
            tid = T.cuda.thread_idx("x")
            phase: T.int32
            if tid % 2 == 0:
                phase = tid + 1
            O[tid] = T.Cast("float32", phase) + T.cast(T.Cast("float16", 0.25), "float32")
        """,
        tmp_path,
        "k",
    )
    out = np.zeros(32, np.float32)
    tirx.compile(k, target="sim")(out)
    want = np.where(np.arange(32) % 2 == 0, np.arange(32) + 1, 0) + 0.25
    np.testing.assert_array_equal(out, want.astype(np.float32))
    tirx.compile(k, target="cuda -arch=sm_90")  # NVRTC compiles it


def test_t_cast_misuse_names_its_arguments(tmp_path):
    with pytest.raises(
        tirx.TirxSyntaxError, match=r"T.Cast takes 2 arguments \(dtype, value\)"
    ) as e:
        define(
            """
            @T.function
            def k(O: T.Tensor((32,), "float32")):
                T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
                O[0] = T.Cast("float32")
            """,
            tmp_path,
            "k",
        )
    assert caret_line(str(e.value)) == 'O[0] = T.Cast("float32")'


@pytest.mark.gpu
def test_gpu_vector_copies_through_registers(tmp_path):
    import torch

    kernel = define(REGISTER_VECTORS, tmp_path, "kernel")
    a = torch.arange(1024, device="cuda").remainder(251).half()
    b = torch.zeros_like(a)
    tirx.compile(kernel, "cuda")(a, b)
    torch.cuda.synchronize()
    assert torch.equal(a, b)


MACRO_CONTRACT = """
BAD = TileLayout(S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)])

@T.macro
def load(ar, a):
    T.cuda.tile.apply(T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout=BAD),
        a.view("uint32").rearrange("(g r) (c w) -> (c g) r w", g=2, c=2, w=4), scope="warp")

@T.function
def k(A: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((16, 16), "float16", layout="default", align=16)
    ar = T.alloc_local((4,), "uint32")
    load(ar, a)
"""


def test_a_contract_error_at_lowering_in_a_macro_names_the_call(tmp_path):
    kernel = define(MACRO_CONTRACT, tmp_path, "k")
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(kernel, "sim")
    msg = str(info.value)
    assert "in the macro 'load', called here" in msg and "load(ar, a)" in msg
