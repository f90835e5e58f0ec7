"""Atomics, fences, CTA votes and reductions, and shared-window addresses (tirx/script/cta_ops.py,
tirx/families/cta_ops/sim.py, tirx/sim/races.py, tirx/backend/cuda/cta_codegen.py): golden CUDA
excerpts, simulator semantics, races, misuse, and GPU bit-equality (marked ``gpu``)."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.errors import SimulationError, TirxError

# ----------------------------------------------------------------------------- kernels

COUNTER = """
@T.function
def kernel(A: T.Tensor((4,), "int32"), Old: T.Tensor((2, 64), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    tx = T.cuda.thread_idx("x")
    Old[T.cuda.block_idx("x"), tx] = T.cuda.atomic_add(A.ptr_to([0]), 1)
    T.atomic_add(T.address_of(A[1 + tx % 3]), tx)
"""

HISTOGRAM = """
@T.function
def kernel(X: T.Tensor((256,), "int32"), H: T.Tensor((8,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tx = T.cuda.thread_idx("x")
    h = T.alloc_shared((8,), "uint32")
    if tx < 8:
        h[tx] = T.uint32(0)
    T.cuda.cta_sync()
    for k in range(2):
        T.cuda.atomic_add(h.ptr_to([X[tx + 128 * k] % 8]), T.uint32(1))
    T.cuda.cta_sync()
    if tx < 8:
        H[tx] = h[tx]
"""

FLOATS = """
@T.function
def kernel(X: T.Tensor((64,), "float32"), F: T.Tensor((2,), "float32"),
           D: T.Tensor((1,), "float64"), Hh: T.Tensor((2,), "float16"), Old: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    Old[tx] = T.cuda.atomic_add(F.ptr_to([0]), X[tx])
    T.cuda.atomic_add(F.ptr_to([1]), X[tx] * T.float32(1e-20) * T.float32(1e-20))
    T.cuda.atomic_add(D.ptr_to([0]), T.float64(X[tx]))
    T.cuda.atomic_add(Hh.ptr_to([tx % 2]), X[tx])
"""

CAS = """
@T.function
def kernel(A: T.Tensor((2,), "uint32"), W: T.Tensor((2,), "uint64"), Old: T.Tensor((64,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    Old[tx] = T.cuda.atomic_cas(A.ptr_to([0]), T.uint32(0), T.uint32(tx + 1))
    T.cuda.atomic_add(W.ptr_to([0]), T.uint64(2**63))
    done = 0
    while done == 0:  # a ticket: thread tx moves W[1] from tx to tx + 1 once it holds tx
        got = T.cuda.atomic_cas(W.ptr_to([1]), T.uint64(tx), T.uint64(tx + 1))
        if got == T.uint64(tx):
            done = 1
"""

VOTES = """
@T.function
def kernel(X: T.Tensor((96,), "int32"), Out: T.Tensor((96, 2), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=96))
    tx = T.cuda.thread_idx("x")
    every = T.cuda.syncthreads_and(X[tx] > 0)
    some = T.cuda.syncthreads_or(X[tx] > 5)
    T.cuda.thread_fence()
    Out[tx, 0] = every
    Out[tx, 1] = some
"""

REDUCE = """
@T.function
def kernel(X: T.Tensor((128,), "float32"), I: T.Tensor((128,), "int32"),
           Out: T.Tensor((128, 4), "float32"), IOut: T.Tensor((128, 2), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    tx = T.cuda.thread_idx("x")
    s1 = T.alloc_shared((4,), "float32")
    s2 = T.alloc_shared((4,), "float32")
    s3 = T.alloc_shared((4,), "int32")
    Out[tx, 0] = T.cuda.cta_sum(X[tx], 4, s1.data)
    Out[tx, 1] = T.cuda.cta_max(X[tx], 4, s2.data)
    T.cuda.cta_sync()
    Out[tx, 2] = T.cuda.cta_min(X[tx], 4, s1.data)
    Out[tx, 3] = T.cuda.cta_reduce(X[tx] * X[tx], "sum", 4, s2)
    IOut[tx, 0] = T.cuda.cta_max(I[tx], 4, s3.data)
    T.cuda.cta_sync()
    IOut[tx, 1] = T.cuda.cta_sum(I[tx], 4, s3.data)
"""

REDUCE64 = """
@T.function
def kernel(I: T.Tensor((64,), "int64"), U: T.Tensor((64,), "uint64"), D: T.Tensor((64,), "float64")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((2,), "int64")
    u = T.alloc_shared((2,), "uint64")
    d = T.alloc_shared((2,), "float64")
    I[tx] = T.cuda.cta_max(I[tx], 2, s.data)
    U[tx] = T.cuda.cta_min(U[tx], 2, u.data)
    D[tx] = T.cuda.cta_sum(D[tx], 2, d.data)
"""

CVTA = """
@T.function
def kernel(Out: T.Tensor((3,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((8,), "float32")
    b = T.alloc_shared((4, 4), "float16")
    base = T.cuda.cvta_generic_to_shared(a.ptr_to([0]))
    Out[0] = T.cuda.cvta_generic_to_shared(a.ptr_to([5])) - base
    Out[1] = T.cuda.cvta_generic_to_shared(T.address_of(b[2, 3])) - base
    Out[2] = base % 16
"""


def _kernel(tmp_path, source):
    return define(source, tmp_path, "kernel")


def _run(exe, *arrays):
    exe(*arrays)
    return arrays


def _counter_inputs():
    return np.zeros(4, np.int32), np.zeros((2, 64), np.int32)


def _float_inputs():
    x = np.arange(64, dtype=np.float32) - 20
    return (
        x,
        np.zeros(2, np.float32),
        np.zeros(1, np.float64),
        np.zeros(2, np.float16),
        np.zeros(64, np.float32),
    )


def _cas_inputs():
    return np.zeros(2, np.uint32), np.zeros(2, np.uint64), np.zeros(64, np.uint32)


def _reduce_inputs(seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(128).astype(np.float32)
    i = rng.integers(-1000, 1000, 128).astype(np.int32)
    return x, i, np.zeros((128, 4), np.float32), np.zeros((128, 2), np.int32)


# --------------------------------------------------------------------- golden CUDA


def _source(tmp_path, source, arch="sm_90"):
    return tirx.compile(_kernel(tmp_path, source), target=f"cuda -arch={arch}").source


def test_golden_atomics(tmp_path):
    src = _source(tmp_path, COUNTER)
    assert "old = atomicAdd(&A[0], 1);" in src
    assert "atomicAdd(&A[((tx % 3) + 1)], tx);" in src
    src = _source(tmp_path, CAS)
    assert "old = atomicCAS(&A[0], 0u, ((unsigned int)((tx + 1))));" in src
    assert "atomicAdd(&W[0], 9223372036854775808ull);" in src
    src = _source(tmp_path, FLOATS)
    assert 'asm volatile("atom.add.noftz.f16 %0, [%1], %2;" : "=h"(tirx_old) : "l"(&Hh[' in src


def test_golden_votes_fence_reduce_cvta(tmp_path):
    src = _source(tmp_path, VOTES)
    assert "vote = __syncthreads_and((int)((X[tx] > 0)));" in src
    assert "vote_2 = __syncthreads_or((int)((X[tx] > 5)));" in src
    assert "__threadfence();" in src
    src = _source(tmp_path, REDUCE)
    assert (
        "for (int tirx_m = 16; tirx_m > 0; tirx_m >>= 1) tirx_v = tirx_v + "
        "__shfl_xor_sync(0xffffffffu, tirx_v, tirx_m);" in src
    )
    assert "tirx_v = fmaxf(tirx_v, __shfl_xor_sync(0xffffffffu, tirx_v, tirx_m));" in src
    assert "tirx_v = (tirx_tid & 31) < 4 ? s3[0 + (tirx_tid & 31)] : (-2147483647 - 1);" in src
    src = _source(tmp_path, CVTA)
    assert "base = (tirx_smem_addr + 0u + (unsigned int)(0));" in src


def test_script_prints_the_calls(tmp_path):
    text = tirx.compile(_kernel(tmp_path, COUNTER), target="sim").script()
    assert "old = T.cuda.atomic_add(T.address_of(A[0]), 1)" in text
    text = tirx.compile(_kernel(tmp_path, REDUCE), target="sim").script()
    assert 'T.cuda.cta_reduce(X[tx], "sum", 4, s1.data)' in text


# ------------------------------------------------------------- simulator semantics


def test_sim_atomic_add_order_is_block_then_thread(tmp_path):
    a, old = _run(tirx.compile(_kernel(tmp_path, COUNTER), target="sim"), *_counter_inputs())
    assert a[0] == 128
    # documented order: blocks in launch order, threads by linear id within a statement
    assert (old.reshape(-1) == np.arange(128)).all()
    tx = np.arange(64)
    assert list(a[1:]) == [2 * int(tx[tx % 3 == k].sum()) for k in range(3)]


def test_sim_shared_histogram(tmp_path):
    x = np.random.default_rng(1).integers(0, 1000, 256).astype(np.int32)
    (_, h) = _run(
        tirx.compile(_kernel(tmp_path, HISTOGRAM), target="sim"), x, np.zeros(8, np.uint32)
    )
    assert (h == np.bincount(x % 8, minlength=8)).all()


def test_sim_float_atomics(tmp_path):
    x, f, d, hh, old = _run(tirx.compile(_kernel(tmp_path, FLOATS), target="sim"), *_float_inputs())
    assert f[0] == x.sum() and d[0] == x.sum()
    assert (old == np.concatenate(([0], np.cumsum(x)[:-1]))).all()
    assert f[1] == 0  # atom.add.f32 flushes subnormal inputs and results to zero
    expect = np.zeros(2, np.float16)
    for t in range(64):  # .noftz.f16: rounded once per add, in thread order
        expect[t % 2] = np.float16(np.float64(expect[t % 2]) + np.float64(x[t]))
    assert (hh == expect).all()


SUBNORMAL = """
@T.function
def kernel(V: T.Tensor((2,), "float32"), Out: T.Tensor((2,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((1,), "float32")
    if tx == 0:
        s[0] = V[0]
        Out[1] = V[0]
    T.cuda.cta_sync()
    if tx < 2:
        T.cuda.atomic_add(s.ptr_to([0]), V[1])
        T.cuda.atomic_add(Out.ptr_to([1]), V[1])
    T.cuda.cta_sync()
    if tx == 0:
        Out[0] = s[0]
"""


def test_sim_float_atomic_keeps_subnormals_in_shared_memory_only(tmp_path):
    """sm_90's shared-memory atomicAdd on a float is a compare-and-swap loop around a plain
    add, which keeps subnormals; global memory's ATOMG.E.ADD.F32.FTZ.RN flushes them (measured
    on an H100, docs/gpu-runs/sessions.md; the simulator flushed both)."""
    tiny = np.float32(1e-40)
    v, out = np.array([0.0, tiny], np.float32), np.zeros(2, np.float32)
    tirx.compile(_kernel(tmp_path, SUBNORMAL), target="sim")(v, out)
    assert out[0] == np.float32(tiny) + np.float32(tiny) and out[0] != 0  # 2e-40, as the GPU
    assert out[1] == 0  # flushed, as the GPU


def test_sim_cas_and_uint64_wrap(tmp_path):
    a, w, old = _run(tirx.compile(_kernel(tmp_path, CAS), target="sim"), *_cas_inputs())
    assert a[0] == 1 and old[0] == 0 and (old[1:] == 1).all()  # the first thread wins
    assert w[0] == 0  # 64 * 2**63 wraps to 0
    assert w[1] == 64  # every ticket was taken once, in order


def test_sim_votes(tmp_path):
    exe = tirx.compile(_kernel(tmp_path, VOTES), target="sim")
    x = np.arange(1, 97, dtype=np.int32)
    (_, out) = _run(exe, x, np.zeros((96, 2), np.int32))
    assert (out[:, 0] == 1).all() and (out[:, 1] == 1).all()
    x[:] = 3
    x[50] = 0
    (_, out) = _run(exe, x, np.zeros((96, 2), np.int32))
    assert (out[:, 0] == 0).all() and (out[:, 1] == 0).all()


def _butterfly(v, op):
    v = v.reshape(-1, 32)
    m = 16
    while m:
        v = op(v, v[:, np.arange(32) ^ m])
        m >>= 1
    return v[:, 0]


def test_sim_cta_reductions(tmp_path):
    x, i, out, iout = _run(tirx.compile(_kernel(tmp_path, REDUCE), target="sim"), *_reduce_inputs())
    # the float sum in the GPU's order: butterflies in each warp, then over the partials
    partial = np.concatenate((_butterfly(x, np.add), np.zeros(28, np.float32)))
    assert (out[:, 0] == _butterfly(partial, np.add)[0]).all()
    assert abs(float(out[0, 0]) - float(x.astype(np.float64).sum())) < 1e-4
    assert (out[:, 1] == x.max()).all() and (out[:, 2] == x.min()).all()
    assert np.allclose(out[:, 3], (x.astype(np.float64) ** 2).sum(), rtol=1e-5)
    assert (iout[:, 0] == i.max()).all() and (iout[:, 1] == i.sum()).all()


def test_sim_64_bit_reductions(tmp_path):
    i = np.arange(64, dtype=np.int64) * -(2**40)
    u = np.arange(64, dtype=np.uint64) + np.uint64(2**63)
    d = np.arange(64, dtype=np.float64) / 3
    exe = tirx.compile(_kernel(tmp_path, REDUCE64), target="sim")
    (i2, u2, d2) = _run(exe, i.copy(), u.copy(), d.copy())
    assert (i2 == 0).all() and (u2 == 2**63).all()
    partial = np.concatenate((_butterfly(d, np.add), np.zeros(30)))
    assert (d2 == _butterfly(partial, np.add)[0]).all()
    src = tirx.compile(_kernel(tmp_path, REDUCE64), target="cuda -arch=sm_80").source
    assert ": (-9223372036854775807LL - 1);" in src and ": 18446744073709551615ull;" in src


def test_sim_cvta_addresses(tmp_path):
    (out,) = _run(tirx.compile(_kernel(tmp_path, CVTA), target="sim"), np.zeros(3, np.uint32))
    assert out[0] == 20 and out[2] == 0
    assert out[1] == 32 + (2 * 4 + 3) * 2  # b starts 16-aligned after a's 32 bytes


# ------------------------------------------------------------------------------- races

RACE = """
@T.function
def kernel(Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((64,), "int32")
    s[tx] = 0
    {first}
    T.cuda.atomic_add(s.ptr_to([{target}]), 1)
    {second}
    Out[tx] = s[{read}]
"""


def _race(tmp_path, first="T.cuda.cta_sync()", second="T.cuda.cta_sync()", target="0", read="tx"):
    src = RACE.format(first=first, second=second, target=target, read=read)
    return tirx.compile(_kernel(tmp_path, src), target="sim")


def test_atomics_to_one_address_never_race(tmp_path):
    (out,) = _run(_race(tmp_path), np.zeros(64, np.int32))
    assert out[0] == 64 and (out[1:] == 0).all()
    # every thread updating and then reading its own element needs no barrier either
    (out,) = _run(_race(tmp_path, "pass", "pass", "tx", "tx"), np.zeros(64, np.int32))
    assert (out == 1).all()


def test_plain_write_then_atomic_races(tmp_path):
    exe = _race(tmp_path, first="pass")
    with pytest.raises(SimulationError) as e:
        exe(np.zeros(64, np.int32))
    msg = str(e.value)
    assert "shared-memory race" in msg and "atomically updates" in msg
    assert "thread 1 (warp 0, lane 1)" in msg and "thread 0 (warp 0, lane 0) wrote" in msg
    assert "at line 12, which thread 0 (warp 0, lane 0) wrote at line 10" in msg
    assert "cta_sync" in (e.value.hint or "")


def test_atomic_then_plain_read_races(tmp_path):
    exe = _race(tmp_path, second="pass", read="0")
    with pytest.raises(SimulationError) as e:
        exe(np.zeros(64, np.int32))
    msg = str(e.value)
    assert "reads" in msg and "atomically updated at line 12" in msg
    # threads of another warp: only a CTA barrier orders them
    exe = _race(tmp_path, second="T.cuda.warp_sync()", read="0")
    with pytest.raises(SimulationError, match="different warps"):
        exe(np.zeros(64, np.int32))


TWICE = """
@T.function
def kernel(X: T.Tensor((64,), "float32"), Out: T.Tensor((64, 2), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((2,), "float32")
    Out[tx, 0] = T.cuda.cta_sum(X[tx], 2, s.data)
    {between}
    Out[tx, 1] = T.cuda.cta_max(X[tx], 2, s.data)
"""


def test_reusing_a_scratch_without_a_barrier_races(tmp_path):
    """The last step reads scratch[0] in every thread; the next reduction's first store there
    (lane 0 of warp 0) races with those reads unless a barrier lies between (on the GPU too)."""
    x = np.arange(64, dtype=np.float32)
    exe = tirx.compile(_kernel(tmp_path, TWICE.format(between="pass")), target="sim")
    with pytest.raises(SimulationError) as e:
        exe(x, np.zeros((64, 2), np.float32))
    assert "thread 0 (warp 0, lane 0) writes 's'[0] (byte 0" in str(e.value)
    assert "at line 12, which threads of warp 0 read at line 10" in str(e.value)
    exe = tirx.compile(_kernel(tmp_path, TWICE.format(between="T.cuda.cta_sync()")), target="sim")
    (_, out) = _run(exe, x, np.zeros((64, 2), np.float32))
    assert (out[:, 0] == x.sum()).all() and (out[:, 1] == 63).all()


def test_votes_and_reductions_need_every_thread(tmp_path):
    src = VOTES.replace(
        "    every = T.cuda", "    every = 0\n    if tx < 64:\n        every = T.cuda"
    )
    exe = tirx.compile(_kernel(tmp_path, src), target="sim")
    with pytest.raises(SimulationError, match="syncthreads_and reached by 64 of 96 threads"):
        exe(np.ones(96, np.int32), np.zeros((96, 2), np.int32))


# ------------------------------------------------------------------------------ misuse

MISUSE = """
@T.function
def kernel(A: T.Tensor((64,), "{dtype}"), F: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((2,), "float32")
    r = T.alloc_local((2,), "int32")
    {line}
"""


def _misuse(tmp_path, line, dtype="int32", target="sim"):
    with pytest.raises(TirxError) as e:
        exe = _kernel(tmp_path, MISUSE.format(line=line, dtype=dtype))
        tirx.compile(exe, target=target)
    return e.value


@pytest.mark.parametrize(
    ("line", "dtype", "target", "words", "hint"),
    [
        (
            "x = T.cuda.atomic_add(A.ptr_to([0]), 1) + 1",
            "int32",
            "sim",
            "statement of its own",
            "assign it first",
        ),
        (
            "F[tx] = T.cuda.cta_sum(F[tx], 2, s.data) if tx > 0 else 0.0",
            "int32",
            "sim",
            "statement of its own",
            "assign it first",
        ),
        ("T.cuda.atomic_add(A[0], 1)", "int32", "sim", "address of one tensor element", "ptr_to"),
        (
            "T.cuda.atomic_add(r.ptr_to([0]), 1)",
            "int32",
            "sim",
            "local (register) array",
            "T.alloc_shared",
        ),
        (
            "T.cuda.atomic_add(A.ptr_to([0]), T.bfloat16(1))",
            "bfloat16",
            "cuda -arch=sm_80",
            "needs sm_90",
            "sm_90",
        ),
        ("T.cuda.atomic_add(A.ptr_to([0]), 1)", "int64", "sim", "has no int64 form", "uint64"),
        (
            "T.cuda.atomic_cas(A.ptr_to([0]), 0, 1)",
            "float32",
            "sim",
            "has no float32 form",
            "atomic_cas takes",
        ),
        (
            "v = T.cuda.cta_sum(F[tx], 4, s.data)",
            "int32",
            "sim",
            "the block has 64 threads (2 warps)",
            "num_warps",
        ),
        (
            "v = T.cuda.cta_sum(F[tx], 2, F.data)",
            "int32",
            "sim",
            "must be a shared tensor",
            "T.alloc_shared",
        ),
        (
            "v = T.cuda.cta_sum(tx, 2, s.data)",
            "int32",
            "sim",
            "2 slots of int32",
            'T.alloc_shared((2,), "int32")',
        ),
        (
            "v = T.cuda.cta_reduce(F[tx], 'prod', 2, s.data)",
            "int32",
            "sim",
            "'sum', 'max' or 'min'",
            None,
        ),
        (
            "v = T.cuda.cvta_generic_to_shared(A.ptr_to([0]))",
            "int32",
            "sim",
            "global tensor",
            "T.alloc_shared",
        ),
        ("T.cuda.thread_fence(1)", "int32", "sim", "takes 0 arguments", None),
    ],
)
def test_misuse(tmp_path, line, dtype, target, words, hint):
    err = _misuse(tmp_path, line, dtype, target)
    msg = str(err)
    assert words in msg
    assert caret_line(msg) == line.strip()
    if hint is not None:
        assert hint in (err.hint or "")


def test_bfloat16_atomics_exist_on_sm_90(tmp_path):
    src = MISUSE.format(line="T.cuda.atomic_add(A.ptr_to([0]), T.bfloat16(1))", dtype="bfloat16")
    exe = tirx.compile(_kernel(tmp_path, src), target="cuda -arch=sm_90")
    assert "atom.add.noftz.bf16 %0, [%1], %2;" in exe.source
    a = np.zeros(64, np.uint16)
    tirx.compile(_kernel(tmp_path, src), target="sim")(a, np.zeros(64, np.float32))
    assert a[0] == 0x4280  # bfloat16 64.0


# ---------------------------------------------------------------------------- the GPU


def _both(tmp_path, source, make_inputs, check):
    """Run on the GPU and the simulator with the same inputs; ``check(gpu, sim)`` compares."""
    import torch

    k = _kernel(tmp_path, source)
    cuda, sim = tirx.compile(k, target="cuda"), tirx.compile(k, target="sim")
    host = make_inputs()
    # unsigned tensors travel as their signed twins' bits (torch copies those everywhere)
    signed = {
        np.dtype(f"uint{b}"): (np.dtype(f"int{b}"), getattr(torch, f"uint{b}")) for b in (32, 64)
    }
    dev = []
    for a in host:
        if a.dtype in signed:
            dev.append(torch.from_numpy(a.view(signed[a.dtype][0])).cuda().view(signed[a.dtype][1]))
        else:
            dev.append(torch.from_numpy(a.copy()).cuda())
    cuda(*dev)
    torch.cuda.synchronize()
    sim(*host)
    back = []
    for a, d in zip(host, dev):
        if a.dtype in signed:
            back.append(d.view(getattr(torch, signed[a.dtype][0].name)).cpu().numpy().view(a.dtype))
        else:
            back.append(d.cpu().numpy())
    check(back, list(host))


@pytest.mark.gpu
def test_gpu_integer_atomics(tmp_path):
    def check(gpu, sim):
        assert (gpu[0] == sim[0]).all()
        assert (np.sort(gpu[1], axis=None) == np.sort(sim[1], axis=None)).all()

    _both(tmp_path, COUNTER, _counter_inputs, check)
    x = np.random.default_rng(2).integers(0, 1000, 256).astype(np.int32)
    _both(
        tmp_path,
        HISTOGRAM,
        lambda: (x.copy(), np.zeros(8, np.uint32)),
        lambda g, s: np.testing.assert_array_equal(g[1], s[1]),
    )

    def cas(gpu, sim):
        # which thread wins the first CAS is the GPU's choice: one got 0 and stored its tx + 1
        (winner,) = np.flatnonzero(gpu[2] == 0)
        assert gpu[0][0] == winner + 1 and (np.delete(gpu[2], winner) == winner + 1).all()
        np.testing.assert_array_equal(gpu[1], sim[1])  # the wrapped sum and the ticket count

    _both(tmp_path, CAS, _cas_inputs, cas)


@pytest.mark.gpu
def test_gpu_float_atomics_integer_valued(tmp_path):
    def check(gpu, sim):
        for g, s in zip(gpu[1:4], sim[1:4]):  # the sums (and the flushed subnormal), bit-equal
            assert g.tobytes() == s.tobytes()

    _both(tmp_path, FLOATS, _float_inputs, check)


@pytest.mark.gpu
def test_gpu_votes_reductions_cvta(tmp_path):
    def equal(gpu, sim):
        for g, s in zip(gpu, sim):
            assert g.tobytes() == s.tobytes()

    x = np.arange(1, 97, dtype=np.int32)
    x[7] = 0
    _both(tmp_path, VOTES, lambda: (x.copy(), np.zeros((96, 2), np.int32)), equal)

    def reductions(gpu, sim):
        # random floats: the butterfly order is the GPU's, so bit-equal (column 3 squares
        # first, and the GPU may fuse that product into the first add: checked to rounding)
        assert gpu[2][:, :3].tobytes() == sim[2][:, :3].tobytes()
        np.testing.assert_allclose(gpu[2][:, 3], sim[2][:, 3], rtol=1e-5)
        assert gpu[3].tobytes() == sim[3].tobytes()

    for seed in range(3):
        _both(tmp_path, REDUCE, lambda seed=seed: _reduce_inputs(seed), reductions)
    rng = np.random.default_rng(5)
    wide = (
        rng.integers(-(2**62), 2**62, 64),
        rng.integers(0, 2**63, 64).astype(np.uint64),
        rng.standard_normal(64),
    )
    _both(tmp_path, REDUCE64, lambda: tuple(a.copy() for a in wide), equal)
    _both(tmp_path, CVTA, lambda: (np.zeros(3, np.uint32),), equal)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize(
    "name", ["COUNTER", "HISTOGRAM", "FLOATS", "CAS", "VOTES", "REDUCE", "CVTA"]
)
def test_nvrtc_compiles_every_kernel(tmp_path, name, arch):
    exe = tirx.compile(_kernel(tmp_path, globals()[name]), target=f"cuda -arch={arch}")
    assert ".entry kernel" in exe.ptx
