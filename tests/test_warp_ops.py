"""Warp collectives: shuffles, votes, elect_sync, redux.sync and the butterfly warp reductions.

Semantics are checked against references written here from the CUDA programming guide's
prose ("Warp Shuffle Functions": which lane a caller reads, per width subsection), not from
the PTX formula the simulator uses; the generated CUDA against golden excerpts; misuse against
the error at the user's line; and on the GPU machine the same kernels on "cuda" and "sim"
bit for bit.
"""

from __future__ import annotations

import atexit
import functools
import shutil
import tempfile

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx import T
from tirx.errors import ContractError, SimulationError, TirxSyntaxError

N = 64  # two warps


# ------------------------------------------------------------------ kernels under test


@T.function
def shfl_idx(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), n: T.int32, w: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    B[tid] = T.cuda.__shfl_sync(0xFFFFFFFF, A[tid], n, w)


@T.function
def shfl_up(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), n: T.int32, w: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    B[tid] = T.cuda.__shfl_up_sync(0xFFFFFFFF, A[tid], n, w)


@T.function
def shfl_down(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), n: T.int32, w: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    B[tid] = T.cuda.__shfl_down_sync(0xFFFFFFFF, A[tid], n, w)


@T.function
def shfl_xor(A: T.Tensor((N,), "int32"), B: T.Tensor((N,), "int32"), n: T.int32, w: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    B[tid] = T.cuda.__shfl_xor_sync(0xFFFFFFFF, A[tid], n, w)


@T.function
def reductions(A: T.Tensor((N,), "float32"), S: T.Tensor((N,), "float32"),
               M: T.Tensor((N,), "float32"), L: T.Tensor((N,), "float32")):  # fmt: skip
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    v = A[tid]
    S[tid] = T.cuda.warp_sum(v)
    M[tid] = T.cuda.warp_max(v)
    L[tid] = T.cuda.warp_min(v)


_KERNEL_DIR = tempfile.mkdtemp(prefix="tirx-warp-ops-")
atexit.register(shutil.rmtree, _KERNEL_DIR, ignore_errors=True)


@functools.cache
def reduce_kernel(op: str, width: int, dtype: str):
    src = f"""
    @T.function
    def k(A: T.Tensor(({N},), "{dtype}"), B: T.Tensor(({N},), "{dtype}")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))
        tid = T.cuda.thread_idx("x")
        B[tid] = T.cuda.warp_reduce(A[tid], "{op}", {width})
    """
    return define(src, _KERNEL_DIR, "k")


@functools.cache
def direct_kernel(dtype: str):
    """A shuffle of a loaded element itself (of ``dtype``, not a float32 variable)."""
    src = f"""
    @T.function
    def k(A: T.Tensor(({N},), "{dtype}"), B: T.Tensor(({N},), "{dtype}")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))
        tid = T.cuda.thread_idx("x")
        B[tid] = T.cuda.__shfl_xor_sync(0xFFFFFFFF, A[tid], 1)
    """
    return define(src, _KERNEL_DIR, "k")


def move_kernel(dtype: str):
    """Every mode, one lane operand each, on one dtype."""
    src = f"""
    @T.function
    def k(A: T.Tensor(({N},), "{dtype}"), B: T.Tensor((4, {N}), "{dtype}")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={N}))
        tid = T.cuda.thread_idx("x")
        v = A[tid]
        B[0, tid] = T.cuda.__shfl_sync(0xFFFFFFFF, v, 5, 32)
        B[1, tid] = T.cuda.__shfl_up_sync(0xFFFFFFFF, v, 3, 16)
        B[2, tid] = T.cuda.__shfl_down_sync(0xFFFFFFFF, v, 2, 8)
        B[3, tid] = T.gpu_warp_shuffle_xor(0xFFFFFFFF, v, 7, 32, 32)
    """
    return define(src, _KERNEL_DIR, "k")


@T.function
def votes(A: T.Tensor((N,), "int32"), B: T.Tensor((6, N), "int32"), t: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=N))
    tid = T.cuda.thread_idx("x")
    lane = T.cuda.lane_id()
    p = A[tid] > t
    B[0, tid] = T.cuda.ballot_sync(0xFFFFFFFF, p)
    B[1, tid] = T.cuda.any_sync(0xFFFFFFFF, p)
    B[2, tid] = T.cuda.reduce_add_sync_u32(0xFFFFFFFF, T.uint32(A[tid]))
    B[3, tid] = T.cuda.reduce_min_sync_u32(0xFFFFFFFF, T.uint32(A[tid]))
    B[4, tid] = T.cuda.elect_sync()
    B[5, tid] = 0
    if lane >= 8:
        B[5, tid] = T.cuda.__activemask() + T.cuda.elect_sync(0xFFFFFF00) * 7


# -------------------------------------------------------- references from the guide's prose


def guide_source(mode: str, lane: int, arg: int, width: int) -> int:
    """The lane a caller reads, in the programming guide's words."""
    start = lane - lane % width  # the subsection's logical lane 0
    if mode == "idx":  # "srcLane outside [0:width-1]: srcLane modulo width"
        return start + arg % width
    if mode == "up":  # "the lower delta lanes will be unchanged"
        return lane - arg if lane % width >= arg else lane
    if mode == "down":  # "the upper delta lanes will remain unchanged"
        return lane + arg if lane % width + arg < width else lane
    src = lane ^ arg  # xor: "access elements from earlier groups ... later groups: own value"
    return src if src // width <= lane // width else lane


def butterfly(values: np.ndarray, op, width: int, dtype) -> np.ndarray:
    """Each lane's result of offsets width/2 .. 1 with v = op(v, shuffled), per warp."""
    v = values.astype(dtype).copy()
    off = width // 2
    while off:
        src = np.arange(v.size) ^ off
        v = np.array([op(a, b) for a, b in zip(v, v[src])], dtype=dtype)
        off //= 2
    return v


def _max(a, b):
    return b if b > a else a


def _min(a, b):
    return b if b < a else a


def _sim(kernel, *args):
    tirx.compile(kernel, "sim")(*args)
    return args


# ------------------------------------------------------------------------------ shuffles


SHUFFLES = {"idx": shfl_idx, "up": shfl_up, "down": shfl_down, "xor": shfl_xor}


@pytest.mark.parametrize("mode", sorted(SHUFFLES))
@pytest.mark.parametrize("width", [1, 2, 4, 8, 16, 32])
def test_shuffles_read_the_lane_the_programming_guide_names(mode, width):
    a = np.arange(N, dtype=np.int32) * 7 + 3
    args = [0, 1, 3, 5, width - 1, width, 17] if mode != "idx" else [0, 1, 6, 31, 40, -3]
    if mode == "xor":
        args = [0, 1, 3, 5, 16, 31]
    for arg in args:
        if mode in ("up", "down") and arg >= 32:
            continue
        b = np.zeros(N, np.int32)
        _sim(SHUFFLES[mode], a, b, arg, width)
        expected = [a[32 * (t // 32) + guide_source(mode, t % 32, arg, width)] for t in range(N)]
        np.testing.assert_array_equal(b, expected, err_msg=f"{mode} arg={arg} width={width}")


@pytest.mark.parametrize(
    "dtype", ["int8", "uint16", "int64", "uint64", "float16", "bfloat16", "float64", "bool"]
)
def test_shuffles_move_every_dtype_bit_exactly(dtype):
    import torch

    rng = np.random.default_rng(7)
    bits = rng.integers(0, 2**16, N, dtype=np.uint16)
    if dtype == "bool":
        a = torch.tensor(bits % 2 == 1)
    elif dtype in ("float16", "bfloat16"):
        a = torch.from_numpy(bits.astype(np.int16)).view(getattr(torch, dtype))
        a[torch.isnan(a)] = 1.5  # NaN payloads are not the question here
    else:
        a = torch.from_numpy(rng.integers(-(2**62), 2**62, N)).to(getattr(torch, dtype))
    b = torch.zeros((4, N), dtype=a.dtype)
    _sim(move_kernel(dtype), a, b)
    for row, (mode, arg, width) in enumerate(
        [("idx", 5, 32), ("up", 3, 16), ("down", 2, 8), ("xor", 7, 32)]
    ):
        src = [32 * (t // 32) + guide_source(mode, t % 32, arg, width) for t in range(N)]
        assert torch.equal(b[row], a[src]), (dtype, mode)


# ---------------------------------------------------------------------- warp reductions


def test_warp_sum_max_min_of_float32_follow_the_butterfly_order():
    rng = np.random.default_rng(3)
    a = (rng.standard_normal(N) * 100).astype(np.float32)
    s, mx, mn = (np.zeros(N, np.float32) for _ in range(3))
    _sim(reductions, a, s, mx, mn)
    for w in range(2):
        part = slice(32 * w, 32 * w + 32)
        ref = butterfly(a[part], lambda x, y: np.float32(x + y), 32, np.float32)
        np.testing.assert_array_equal(s[part], ref)  # bit for bit, the same order
        assert len(set(s[part].tolist())) == 1  # every lane has the result
        np.testing.assert_array_equal(mx[part], np.full(32, a[part].max()))
        np.testing.assert_array_equal(mn[part], np.full(32, a[part].min()))
    exact = np.arange(N, dtype=np.float32)
    _sim(reductions, exact, s, mx, mn)
    assert s[:32].tolist() == [sum(range(32))] * 32 and s[32:].tolist() == [sum(range(32, 64))] * 32


@pytest.mark.parametrize("width", [2, 4, 8, 16, 32])
@pytest.mark.parametrize(
    "op, dtype",
    [("sum", "int32"), ("max", "int32"), ("min", "uint32"), ("sum", "int8"), ("sum", "float16"),
     ("max", "float16"), ("sum", "float64"), ("min", "int64")],
)  # fmt: skip
def test_warp_reduce_groups_width_lanes_for_every_dtype(op, width, dtype):
    import torch

    rng = np.random.default_rng(width)
    if dtype.startswith("float"):
        a = torch.from_numpy(rng.standard_normal(N) * 50).to(getattr(torch, dtype))
    else:
        a = torch.from_numpy(rng.integers(-120, 120, N)).to(getattr(torch, dtype))
    b = torch.zeros_like(a)
    _sim(reduce_kernel(op, width, dtype), a, b)
    np_dtype = a.numpy().dtype
    combine = {
        "sum": lambda x, y: np.array(x + y if dtype[0] == "f" else int(x) + int(y)).astype(
            np_dtype
        ),  # one rounding (or wrap) per step
        "max": _max,
        "min": _min,
    }[op]
    for g in range(N // 32):
        part = slice(32 * g, 32 * g + 32)
        want = np.concatenate(
            [
                butterfly(a.numpy()[part][i : i + width], combine, width, np_dtype)
                for i in range(0, 32, width)
            ]
        )
        np.testing.assert_array_equal(b.numpy()[part], want, err_msg=f"{op} {dtype} {width}")


# ------------------------------------------------------------------- votes, elect, redux


def test_votes_elect_and_redux_over_the_mask():
    rng = np.random.default_rng(11)
    a = rng.integers(0, 1000, N).astype(np.int32)
    for t in (-1, 500, 2000):
        b = np.zeros((6, N), np.int32)
        _sim(votes, a, b, t)
        b = b.view(np.uint32)
        for w in range(2):
            lanes = range(32 * w, 32 * w + 32)
            ballot = sum(1 << (i % 32) for i in lanes if a[i] > t)
            assert set(b[0, lanes]) == {ballot}
            assert set(b[1, lanes]) == {int(ballot != 0)}
            assert set(b[2, lanes]) == {int(a[lanes].astype(np.int64).sum()) % 2**32}
            assert set(b[3, lanes]) == {int(a[lanes].min())}
            assert b[4, lanes].tolist() == [1] + [0] * 31  # the lowest lane is the leader
            # under `lane >= 8`: active mask 0xffffff00, leader of 0xffffff00 is lane 8
            assert b[5, lanes].tolist() == [0] * 8 + [0xFFFFFF00 + 7] + [0xFFFFFF00] * 23


# ------------------------------------------------------------------------- generated code


def test_golden_cuda_of_shuffles_votes_and_reductions():
    src = tirx.compile(reductions, "cuda -arch=sm_90").source
    assert "TIRX_DEVICE float tirx_warp_sum_32_float32(float v) {" in src
    assert "  for (int offset = 16; offset > 0; offset >>= 1) {" in src
    assert "    float s = (float)__shfl_xor_sync(0xffffffffu, (float)v, offset, 32);" in src
    assert "    v = ((float)(v + s));" in src
    assert "    v = tirx_max<float>(v, s);" in src
    assert "S[((int)threadIdx.x)] = tirx_warp_sum_32_float32(v);" in src
    src = tirx.compile(shfl_xor, "cuda -arch=sm_90").source
    assert "__shfl_xor_sync((unsigned int)(4294967295u), (int)(A[((int)threadIdx.x)]), " in src
    src = tirx.compile(move_kernel("int8"), "cuda -arch=sm_90").source
    assert "((signed char)__shfl_sync((unsigned int)(4294967295u), (int)(v), (int)(5), " in src
    # an fp8 element computes as float (codegen's expression type), so it shuffles as one
    src = tirx.compile(direct_kernel("float8_e4m3fn"), "cuda -arch=sm_90").source
    assert "(float)(tirx_e4m32f(A[((int)threadIdx.x)])), (int)(1), (int)(32))" in src
    assert "unsigned char)__shfl" not in src
    src = tirx.compile(votes, "cuda -arch=sm_90").source
    for text in (
        "__ballot_sync((unsigned int)(4294967295u), (int)(p))",
        "__any_sync((unsigned int)(4294967295u), (int)(p))",
        "__reduce_add_sync((unsigned int)(4294967295u), (unsigned int)(",
        "__reduce_min_sync((unsigned int)(4294967295u), (unsigned int)(",
        "__activemask()",
        "tirx_elect_sync((unsigned int)(4294967040u))",
        "elect.sync _|p, %1;",
    ):
        assert text in src, text


def test_the_ptx_has_the_instructions():
    pytest.importorskip("cuda.bindings.nvrtc")
    ptx = tirx.compile(votes, "cuda -arch=sm_90").ptx
    for instr in ("vote.sync.ballot.b32", "redux.sync.add.u32", "redux.sync.min.u32"):
        assert instr in ptx, instr
    assert "elect.sync" in ptx
    assert "shfl.sync.bfly.b32" in tirx.compile(reductions, "cuda -arch=sm_90").ptx


def test_script_prints_the_t_cuda_spelling():
    text = tirx.compile(votes, "sim").script()
    assert "T.cuda.ballot_sync(4294967295, p)" in text
    assert "T.cuda.elect_sync(4294967040)" in text and "T.cuda.__activemask()" in text
    assert "T.cuda.reduce_add_sync_u32(4294967295, T.uint32(A[tid]))" in text
    assert 'T.cuda.warp_reduce(v, "sum", 32)' in tirx.compile(reductions, "sim").script()


# -------------------------------------------------------------------------------- misuse


_KERNEL = """
    @T.function
    def k(A: T.Tensor((64,), "int32"), B: T.Tensor((64,), "int32"), m: T.uint32):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={block}))
        lane = T.cuda.lane_id()
        tid = T.cuda.thread_idx("x")
{body}
    """


def _error(tmp_path, body: str, error=TirxSyntaxError, target="sim", block=64, run=False):
    with pytest.raises(error) as info:
        k = define(_KERNEL.format(block=block, body=body), tmp_path, "k")
        exe = tirx.compile(k, target)
        if run:
            exe(np.arange(64, dtype=np.int32), np.zeros(64, np.int32), 0xFFFFFFFF)
    return info.value


def _fine(tmp_path, body: str, block=64, m=0xFFFFFFFF):
    b = np.zeros(64, np.int32)
    k = define(_KERNEL.format(block=block, body=body), tmp_path, "k")
    tirx.compile(k, "sim")(np.arange(64, dtype=np.int32), b, m)
    return b


def test_a_constant_mask_missing_a_lane_that_always_executes_is_refused(tmp_path):
    body = "        B[tid] = T.cuda.__shfl_xor_sync(0x0000FFFF, A[tid], 1, 32)"
    err = _error(tmp_path, body)
    assert "lane 16 is not in its mask 0x0000ffff" in str(err)
    assert caret_line(str(err)).startswith("B[tid] = T.cuda.__shfl_xor_sync(0x0000FFFF")
    assert "0xffffffff" in err.hint
    # the corrected twin: only the mask's lanes take the branch
    b = _fine(tmp_path, body.replace("        B", "        if lane < 16:\n            B"))
    assert b[:16].tolist() == [i ^ 1 for i in range(16)] and not b[16:32].any()


MISUSE = [  # (call, what the error says, the corrected twin)
    ("__shfl_sync(0, A[tid], 1, 32)", "mask of __shfl_sync is 0",
     "__shfl_sync(0xFFFFFFFF, A[tid], 1, 32)"),
    ("__shfl_sync(2**32, A[tid], 1, 32)", "does not fit 32 bits",
     "__shfl_sync(2**32 - 1, A[tid], 1, 32)"),
    ("__shfl_sync(1.0, A[tid], 1, 32)", "must be a 32-bit integer",
     "__shfl_sync(m, A[tid], 1, 32)"),
    ("__shfl_down_sync(0xFFFFFFFF, A[tid], 1, 12)", "power of two from 1 to 32",
     "__shfl_down_sync(0xFFFFFFFF, A[tid], 1, 16)"),
    ("__shfl_sync(0xFFFFFFFF, A[tid], 1.5)", "src_lane must be an integer",
     "__shfl_sync(0xFFFFFFFF, A[tid], 2)"),
    ("__shfl_sync(0xFFFFFFFF, A, 1, 32)", "must be a scalar value",
     "__shfl_sync(0xFFFFFFFF, A[tid], 1, 32)"),
    ("warp_reduce(A[tid], 'prod')", "unknown warp_reduce op 'prod'", "warp_reduce(A[tid], 'max')"),
    ("warp_sum(A[tid], 64)", "power of two from 2 to 32, got 64", "warp_sum(A[tid], 32)"),
    ("warp_sum(A[tid], lane)", "must be a compile-time int", "warp_sum(A[tid], 8)"),
    ("warp_sum(A[tid] > 3)", "needs a number, not a bool", "warp_sum(T.int32(A[tid] > 3))"),
    ("reduce_add_sync_u32(0xFFFFFFFF, T.float32(A[tid]))", "32-bit integers",
     "reduce_add_sync_u32(0xFFFFFFFF, A[tid])"),
    ("ballot_sync(0xFFFFFFFF)", "T.cuda.ballot_sync takes 2 arguments", "ballot_sync(0xFFFFFFFF, lane > 3)"),
    ("elect_sync(0)", "mask of elect_sync is 0", "elect_sync(0xFFFFFFFF)"),
]  # fmt: skip


@pytest.mark.parametrize("call, message, fixed", MISUSE)
def test_compile_time_misuse_names_the_fix_at_the_line(tmp_path, call, message, fixed):
    err = _error(tmp_path, f"        B[tid] = T.cuda.{call}")
    assert message in str(err)
    assert caret_line(str(err)).startswith(f"B[tid] = T.cuda.{call}")
    _fine(tmp_path, f"        B[tid] = T.cuda.{fixed}")


def test_the_tvm_spelling_needs_a_warp_of_32(tmp_path):
    call = "T.gpu_warp_shuffle(0xFFFFFFFF, A[tid], 1, 32, {})"
    err = _error(tmp_path, "        B[tid] = " + call.format(16))
    assert "warp_size must be 32" in str(err)
    assert _fine(tmp_path, "        B[tid] = " + call.format(32))[:2].tolist() == [1, 1]


def test_a_run_time_width_must_be_a_power_of_two(tmp_path):
    body = "        B[tid] = T.cuda.__shfl_down_sync(0xFFFFFFFF, A[tid], 1, T.int32(m))"
    with pytest.raises(SimulationError, match="with width 12: the width must be a power of two"):
        _fine(tmp_path, body, m=12)
    assert _fine(tmp_path, body, m=8)[:8].tolist() == [1, 2, 3, 4, 5, 6, 7, 7]


def test_a_full_mask_shuffle_under_a_lane_condition_stops_the_simulator(tmp_path):
    body = (
        "        if lane < 16:\n            B[tid] = T.cuda.__shfl_xor_sync(0xFFFFFFFF, A[tid], 1)"
    )
    err = _error(tmp_path, body, SimulationError, run=True)
    assert "lane 16 is in the mask 0xffffffff of lane 0's __shfl_xor_sync" in str(err)
    assert "does not execute it" in str(err) and "warp 0, lane 0" in str(err)
    assert caret_line(str(err)).startswith("B[tid] = T.cuda.__shfl_xor_sync(0xFFFFFFFF")
    b = _fine(tmp_path, body.replace("0xFFFFFFFF", "0x0000FFFF"))  # the corrected twin
    assert b[:16].tolist() == [i ^ 1 for i in range(16)]


def test_a_run_time_mask_must_hold_the_calling_lane(tmp_path):
    body = "        B[tid] = T.cuda.ballot_sync(m, A[tid] > 3)"
    with pytest.raises(SimulationError, match="lane 0 executes ballot_sync but is not in its"):
        _fine(tmp_path, body, m=0xFFFFFFFE)
    b = _fine(tmp_path, body)
    assert set(b[:32].tolist()) == {0xFFFFFFF0 - 2**32} and set(b[32:].tolist()) == {-1}


def test_a_shuffle_may_only_read_lanes_of_its_mask(tmp_path):
    body = "        if lane < 16:\n            B[tid] = T.cuda.__shfl_xor_sync(0xFFFF, A[tid], 16)"
    err = _error(tmp_path, body, SimulationError, run=True)
    assert "lane 0's __shfl_xor_sync reads lane 16, which is not in its mask" in str(err)
    b = _fine(tmp_path, body.replace("A[tid], 16)", "A[tid], 8)"))
    assert b[:16].tolist() == [i ^ 8 for i in range(16)]


def test_lanes_of_one_mask_must_agree_on_it(tmp_path):
    body = "        B[tid] = T.cuda.any_sync(0xFFFFFFFF if lane < 30 else m, A[tid] > 3)"
    with pytest.raises(SimulationError, match="lanes 0 and 30 execute any_sync together"):
        _fine(tmp_path, body, m=0xC0000000)
    assert set(_fine(tmp_path, body).tolist()) == {1}


def test_elect_sync_outside_a_converged_warp_stops_the_simulator(tmp_path):
    body = "        if lane < 8:\n            B[tid] = T.cuda.elect_sync()"
    err = _error(tmp_path, body, SimulationError, run=True)
    assert "lane 8 is in the mask 0xffffffff of lane 0's elect_sync" in str(err)
    b = _fine(tmp_path, body.replace("elect_sync()", "elect_sync(0xFF)"))
    assert b[:32].tolist() == [1] + [0] * 31


def test_elect_sync_needs_sm_90(tmp_path):
    err = _error(
        tmp_path, "        B[tid] = T.cuda.elect_sync()", ContractError, "cuda -arch=sm_80"
    )
    assert "needs sm_90" in str(err) and "sm_80" in str(err)
    assert caret_line(str(err)).startswith("B[tid] = T.cuda.elect_sync()")


def test_a_warp_reduction_every_thread_runs_must_fit_the_partial_warp(tmp_path):
    err = _error(tmp_path, "        B[tid] = T.cuda.warp_sum(A[tid])", block=48)
    assert "last warp has only 16 lanes: its last group of 32" in str(err)
    assert "width=16" in err.hint
    assert caret_line(str(err)).startswith("B[tid] = T.cuda.warp_sum(A[tid])")
    b = _fine(tmp_path, "        B[tid] = T.cuda.warp_sum(A[tid], 16)", block=48)
    assert b[32:48].tolist() == [sum(range(32, 48))] * 16


def test_a_warp_reduction_in_a_partial_warp_reads_lanes_that_do_not_exist(tmp_path):
    body = "        if tid < 48:\n            B[tid] = T.cuda.warp_sum(A[tid])"
    err = _error(tmp_path, body, SimulationError, block=48, run=True)
    assert "reads lane 16, which the block's last (partial) warp does not have" in str(err)
    b = _fine(tmp_path, body.replace("warp_sum(A[tid])", "warp_sum(A[tid], 16)"), block=48)
    assert b[32:48].tolist() == [sum(range(32, 48))] * 16


# ----------------------------------------------------------------------- on the GPU


def _on_both(kernel, *arrays):
    """Run ``kernel`` on the GPU and in the simulator on copies of ``arrays`` (torch CPU
    tensors, or scalars); return both sets of arguments after the runs."""
    import torch

    gpu = [a.cuda() if isinstance(a, torch.Tensor) else a for a in arrays]
    tirx.compile(kernel, "cuda")(*gpu)
    torch.cuda.synchronize()
    sim = [a.clone() if isinstance(a, torch.Tensor) else a for a in arrays]
    tirx.compile(kernel, "sim")(*sim)
    return [g.cpu() if isinstance(g, torch.Tensor) else g for g in gpu], sim


def _bits(t):
    import torch

    return t.view(torch.uint8) if t.dtype != torch.bool else t


@pytest.mark.gpu
@pytest.mark.parametrize("mode", sorted(SHUFFLES))
def test_gpu_shuffles_equal_the_simulator(mode):
    import torch

    a = torch.arange(N, dtype=torch.int32) * 7 + 3
    for width in (1, 4, 8, 32):
        for arg in (0, 1, 3, 5, 17, 31):
            b = torch.zeros(N, dtype=torch.int32)
            gpu = b.cuda()
            tirx.compile(SHUFFLES[mode], "cuda")(a.cuda(), gpu, arg, width)
            _sim(SHUFFLES[mode], a.numpy(), b.numpy(), arg, width)
            assert torch.equal(gpu.cpu(), b), (mode, width, arg)


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["int8", "int64", "float16", "bfloat16", "float64", "bool"])
def test_gpu_shuffle_dtypes_equal_the_simulator(dtype):
    import torch

    gen = torch.Generator().manual_seed(5)
    if dtype == "bool":
        a = torch.randint(0, 2, (N,), generator=gen).bool()
    elif dtype.startswith(("float", "bfloat")):
        a = torch.randn(N, generator=gen).to(getattr(torch, dtype))
    else:
        a = torch.randint(-100, 100, (N,), generator=gen).to(getattr(torch, dtype))
    (g,), (s,) = (
        x[1:] for x in _on_both(move_kernel(dtype), a, torch.zeros((4, N), dtype=a.dtype))
    )
    assert torch.equal(_bits(g), _bits(s))


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", ["float8_e4m3fn", "float8_e5m2", "float16"])
def test_gpu_shuffles_of_narrow_float_elements_equal_the_simulator(dtype):
    import torch

    a = (torch.arange(N, dtype=torch.float32) / 4 - 5).to(getattr(torch, dtype))  # 1.25, ...
    (_, g), (_, s) = _on_both(direct_kernel(dtype), a, torch.zeros(N, dtype=a.dtype))
    assert torch.equal(_bits(g), _bits(s))
    assert torch.equal(_bits(s), _bits(a[torch.arange(N) ^ 1]))


@pytest.mark.gpu
def test_gpu_warp_reductions_equal_the_simulator_bit_for_bit():
    import torch

    a = torch.randn(N, generator=torch.Generator().manual_seed(1)) * 100
    outs = [torch.zeros(N) for _ in range(3)]
    gpu, sim = _on_both(reductions, a, *outs)
    for g, s in zip(gpu[1:], sim[1:]):
        assert torch.equal(g.view(torch.int32), s.view(torch.int32))
    for op, width, dtype in [("sum", 8, "float16"), ("max", 16, "bfloat16"), ("sum", 32, "int8"),
                             ("min", 4, "float64"), ("sum", 32, "float64")]:  # fmt: skip
        x = (torch.randn(N, generator=torch.Generator().manual_seed(width)) * 30).to(
            getattr(torch, dtype)
        )
        gpu, sim = _on_both(reduce_kernel(op, width, dtype), x, torch.zeros_like(x))
        assert torch.equal(_bits(gpu[1]), _bits(sim[1])), (op, width, dtype)


@pytest.mark.gpu
def test_gpu_votes_elect_and_redux_equal_the_simulator():
    import torch

    a = torch.randint(0, 1000, (N,), generator=torch.Generator().manual_seed(2), dtype=torch.int32)
    for t in (-1, 500, 2000):
        b = torch.zeros((6, N), dtype=torch.int32)
        gpu, sim = _on_both(votes, a, b, t)
        assert torch.equal(gpu[1], sim[1]), t


def test_lowered_warp_collectives_survive_the_front_end_cache_format():
    from tirx.ir import serial
    from tirx.ir.printer import print_function
    from tirx.sim import run
    from tirx.transform.lower import lower_function

    for kernel in (votes, reductions, shfl_up):
        lowered = lower_function(kernel.ir, 90)
        again = serial.loads(serial.dumps(lowered))
        assert print_function(again) == print_function(lowered)
    lowered = lower_function(votes.ir, 90)
    want, got = ([np.arange(N, dtype=np.int32), np.zeros((6, N), np.int32), 100] for _ in "ab")
    run(lowered, want)
    run(serial.loads(serial.dumps(lowered)), got)
    np.testing.assert_array_equal(got[1], want[1])


def test_a_shuffle_spelt_without_its_underscores_is_suggested(tmp_path):
    err = _error(tmp_path, "        B[tid] = T.cuda.shfl_xor_sync(0xFFFFFFFF, A[tid], 1, 32)")
    assert "T.cuda has no attribute 'shfl_xor_sync'" in str(err)
    assert "T.cuda.__shfl_xor_sync" in err.hint
