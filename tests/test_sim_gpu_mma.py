"""The tf32, int8 and f16-accumulate mma.sync forms: simulator against the H200, bit for bit.

Two routes, both marked ``gpu``:

* inline PTX in a tiny CUDA kernel compiled with cupy (independent of tirx's code generator
  and of its instruction tables), fed raw register bits, against the simulator on the same
  bits — this is how the tf32 rule (low 13 mantissa bits ignored) was established;
* a ``@T.function`` kernel with a raw ``T.ptx["mma..."](...)`` call, compiled by tirx for cuda
  and for the simulator. It skips a form while tirx's compiler tables do not know it
  ("unknown or unsupported instruction"), and runs once they do.
"""

from __future__ import annotations

import importlib.util

import numpy as np
import pytest
import torch

import tirx
from tests.test_sim_ptx import NEW_FORMS, mma_inputs, parse_instruction, raw_mma_kernel
from tirx.errors import TirxError
from tirx.sim import run

pytestmark = pytest.mark.gpu

WARPS = 8  # independent problems per launch, one warp each


def _source(name: str, text: str) -> str:
    op = parse_instruction(text)
    counts = (op.regs("d"), op.a_regs, op.b_regs, op.regs("c"))
    groups, k = [], 0
    for n in counts:
        groups.append("{" + ", ".join(f"%{k + j}" for j in range(n)) + "}")
        k += n
    outs = ", ".join(f'"=r"(d[{j}])' for j in range(counts[0]))
    ins = ", ".join(f'"r"({v}[{j}])' for v, n in zip("abc", counts[1:]) for j in range(n))
    nd, na, nb, nc = counts
    return f"""
extern "C" __global__ void {name}(const unsigned* A, const unsigned* B, const unsigned* C,
                                  unsigned* D) {{
    int t = blockIdx.x * 32 + threadIdx.x;
    unsigned a[{na}], b[{nb}], c[{nc}], d[{nd}];
    for (int j = 0; j < {na}; ++j) a[j] = A[t * {na} + j];
    for (int j = 0; j < {nb}; ++j) b[j] = B[t * {nb} + j];
    for (int j = 0; j < {nc}; ++j) c[j] = C[t * {nc} + j];
    asm volatile("{text} {", ".join(groups)};" : {outs} : {ins});
    for (int j = 0; j < {nd}; ++j) D[t * {nd} + j] = d[j];
}}"""


def _hardware(text, a, b, c):
    cp = pytest.importorskip("cupy")
    kernel = cp.RawKernel(_source("probe", text), "probe", options=("-arch=sm_90",))
    nd = parse_instruction(text).regs("d")
    dev = [cp.asarray(np.ascontiguousarray(x)) for x in (a, b, c)]
    out = cp.zeros((a.shape[0], 32, nd), dtype=cp.uint32)
    kernel((a.shape[0],), (32,), (*dev, out))
    cp.cuda.runtime.deviceSynchronize()
    return cp.asnumpy(out)


def _simulated(text, a, b, c):
    nd = parse_instruction(text).regs("d")
    out = np.zeros((a.shape[0], 32, nd), np.uint32)
    fn = raw_mma_kernel(text)
    for w in range(a.shape[0]):
        d = np.zeros((32, nd), np.uint32)
        run(fn, [a[w], b[w], c[w], d])
        out[w] = d
    return out


def _problems(text, seed):
    rng = np.random.default_rng(seed)
    parts = [mma_inputs(text, rng, near_limit=w % 2 == 1) for w in range(WARPS)]
    return [np.stack([p[i] for p in parts]) for i in range(3)]


@pytest.mark.parametrize("text", NEW_FORMS, ids=lambda t: t[len("mma.sync.aligned.") :])
def test_inline_ptx_agrees_bit_for_bit(text):
    a, b, c = _problems(text, 5)
    np.testing.assert_array_equal(_simulated(text, a, b, c), _hardware(text, a, b, c))


@pytest.mark.parametrize("k", [4, 8])
def test_tf32_random_bits_follow_the_truncation_rule(k):
    """Random mantissas (all 23 bits): truncating the operands matches the hardware to the
    accumulation's rounding; rounding them to nearest would miss by ~2^-11 relative."""
    text = f"mma.sync.aligned.m16n8k{k}.row.col.f32.tf32.tf32.f32"
    rng = np.random.default_rng(k)
    op = parse_instruction(text)

    def raw(n):
        sign = rng.integers(0, 2, (WARPS, 32, n), dtype=np.uint32) << np.uint32(31)
        exp = rng.integers(120, 135, (WARPS, 32, n), dtype=np.uint32) << np.uint32(23)
        return sign | exp | rng.integers(0, 1 << 23, (WARPS, 32, n), dtype=np.uint32)

    a, b, c = raw(op.a_regs), raw(op.b_regs), raw(4)
    hw = _hardware(text, a, b, c).view(np.float32).astype(np.float64)
    sim = _simulated(text, a, b, c).view(np.float32).astype(np.float64)
    # the accumulation's own rounding only: far below the ~2^-11 relative error per product
    # that rounding the operands to nearest instead would make
    np.testing.assert_allclose(sim, hw, rtol=2e-5, atol=1e-6 * np.abs(hw).max())
    assert np.mean(sim == hw) > 0.3  # most results bit-identical


_KERNEL = """
from tirx import T


@T.function
def raw_mma(
    A: T.Tensor((32, {na}), "uint32"),
    B: T.Tensor((32, {nb}), "uint32"),
    C: T.Tensor((32, {nc}), "{acc}"),
    D: T.Tensor((32, {nd}), "{acc}"),
):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    lane = T.cuda.lane_id()
    a = T.alloc_local((4,), "uint32")
    b = T.alloc_local((4,), "uint32")
    c = T.alloc_local((4,), "{acc}")
    d = T.alloc_local((4,), "{acc}")
    for j in range({na}):
        a[j] = A[lane, j]
    for j in range({nb}):
        b[j] = B[lane, j]
    for j in range({nc}):
        c[j] = C[lane, j]
    T.ptx["{text}"]({operands})
    for j in range({nd}):
        D[lane, j] = d[j]
"""


_ACC = {"f32": "float32", "s32": "int32", "f16": "uint32"}
_TORCH = {"float32": torch.float32, "int32": torch.int32, "uint32": torch.uint32}


def _raw_kernel(text: str, tmp_path):
    """A @T.function (written to a file, as a user would): one warp, registers loaded from
    tensors, one raw ``T.ptx[text](...)`` call with scalar operands in PTX order. C and D are
    float32 (f32), int32 (s32) or uint32 (f16x2 bits) tensors."""
    op = parse_instruction(text)
    na, nb, nc, nd = op.a_regs, op.b_regs, op.regs("c"), op.regs("d")
    operands = ", ".join(
        f"{v}[{j}]" for v, n in (("d", nd), ("a", na), ("b", nb), ("c", nc)) for j in range(n)
    )
    path = tmp_path / "raw_mma_kernel.py"
    acc = _ACC[op.c.ptx]
    source = _KERNEL.format(na=na, nb=nb, nc=nc, nd=nd, text=text, operands=operands, acc=acc)
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("raw_mma_kernel", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.raw_mma


@pytest.mark.parametrize("text", NEW_FORMS, ids=lambda t: t[len("mma.sync.aligned.") :])
def test_raw_ptx_call_compiled_by_tirx_agrees(text, tmp_path):
    kernel = _raw_kernel(text, tmp_path)
    try:
        cuda = tirx.compile(kernel, target="cuda")
        sim = tirx.compile(kernel, target="sim")
    except TirxError as e:
        if "unknown or unsupported instruction" in str(e):
            pytest.skip(f"tirx's compiler does not know {text} yet")
        raise
    a, b, c = (x[0] for x in _problems(text, 9))
    op = parse_instruction(text)
    acc = _TORCH[_ACC[op.c.ptx]]
    nd = op.regs("d")
    c_t = torch.from_numpy(c.copy()).view(acc)
    out_sim = torch.zeros((32, nd), dtype=acc)
    sim(torch.from_numpy(a.copy()), torch.from_numpy(b.copy()), c_t, out_sim)
    dev = [torch.from_numpy(a.copy()).cuda(), torch.from_numpy(b.copy()).cuda(), c_t.cuda()]
    out_gpu = torch.zeros((32, nd), dtype=acc, device="cuda")
    cuda(*dev, out_gpu)
    torch.cuda.synchronize()
    bits_gpu = out_gpu.cpu().view(torch.uint32).numpy()
    bits_sim = out_sim.view(torch.uint32).numpy()
    np.testing.assert_array_equal(bits_gpu, bits_sim)
    np.testing.assert_array_equal(bits_sim, _simulated(text, a[None], b[None], c[None])[0])
