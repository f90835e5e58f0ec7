"""Probe kernels: run one warp-matrix instruction on the real machine (the GPU when one is
visible, else the simulator) and read every lane's registers back.

The kernels are ordinary tirx kernels. Each lane copies its register inputs from a global
``[32, slots]`` array into a local array, the instruction runs through ``T.cuda.tile.apply``
with the layout under test on one operand (and the canonical fragment layouts on the others),
and each lane writes its output registers to a global ``[32, slots]`` array. The host fills and
reads the other operands with the PTX ISA's fragment formulas, written out below.

Used by :func:`widgets.check_layout` (codes that identify lane, slot and element) and by
:func:`widgets.run_instruction` (real data for :func:`widgets.show_trace`).
"""

from __future__ import annotations

import functools

import numpy as np

import tirx
from tirx import T
from tirx.isa import Family, check_complete, supported_forms
from tirx.layout import S, TileLayout, laneid

from .model import no_fragment, require_fragment

__all__ = [
    "canonical_layout", "view_shape", "launch", "half_bits", "half_values", "probed_forms",
    "instruments",
]  # fmt: skip

# The PTX ISA's fragment formulas (lane l, g = l // 4, t = l % 4, native register r), used to
# fill and read the operands that are not under test.


def acc_coord(lane: int, r: int) -> tuple[int, int]:
    """mma C/D: register r of lane l holds (row, col) of the 16x8 f32 tile."""
    return lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2


def a_word(lane: int, r: int) -> tuple[int, int]:
    """mma A: register r of lane l holds (row, word) of the 16 x k/2 tile of u32 words."""
    return lane // 4 + 8 * (r % 2), lane % 4 + 4 * (r // 2)


def b_word(lane: int, r: int) -> tuple[int, int]:
    """mma B: register r of lane l holds (n, word) of the 8 x k/2 tile of u32 words."""
    return lane // 4, lane % 4 + 4 * r


# The native-register layouts of the mma word tiles, by atom (rows, words): slot = register.
_MMA_NATIVE = {
    (16, 8, "acc"): TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)]),
    (16, 4, "acc"): TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)]),
    (16, 8, "A"): TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]),
    (16, 4, "A"): TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)]),
    (8, 8, "B"): TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)]),
    (8, 4, "B"): TileLayout(S[(1, 1, 8, 4) : (1, 1, 4 @ laneid, 1 @ laneid)]),
}


def _mma_native(contract, operand):
    role = "acc" if operand in ("D", "C") else operand
    return _MMA_NATIVE[(*contract.operand(operand).atom, role)]


def _matrix_native(contract, operand):
    count = contract.param("count")
    return TileLayout(S[(count, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


_CANONICAL = check_complete(
    [(Family.MMA, _mma_native), (Family.LDMATRIX, _matrix_native),
     (Family.STMATRIX, _matrix_native), (Family.CP_ASYNC, no_fragment),
     (Family.CP_ASYNC_BULK, no_fragment), (Family.FENCE_PROXY, no_fragment),
     (Family.MBARRIER, no_fragment), (Family.CP_ASYNC_MBARRIER, no_fragment),
     (Family.FENCE_MBARRIER_INIT, no_fragment),
     (Family.WGMMA, no_fragment),
     (Family.CP_ASYNC_BULK_TENSOR, no_fragment)],
    "widgets.probe canonical layouts",
)  # fmt: skip


def canonical_layout(contract, operand: str):
    """A TileLayout whose slots are the native registers of ``operand`` (one instruction)."""
    return _CANONICAL[contract.family](contract, operand)


_REPEATS = check_complete(
    [(Family.MMA, (1, 1)), (Family.LDMATRIX, ()), (Family.STMATRIX, ()), (Family.CP_ASYNC, ()),
     (Family.CP_ASYNC_BULK, ()), (Family.FENCE_PROXY, ()), (Family.MBARRIER, ()),
     (Family.CP_ASYNC_MBARRIER, ()), (Family.FENCE_MBARRIER_INIT, ()),
     (Family.WGMMA, ()),
     (Family.CP_ASYNC_BULK_TENSOR, ())],
    "widgets.probe repeats",
)  # fmt: skip


def view_shape(contract, operand: str) -> tuple[int, ...]:
    """The register view shape one instruction covers: (1, 1, *atom) for mma, the atom else."""
    return (*_REPEATS[contract.family], *contract.operand(operand).atom)


def probed_forms() -> tuple[str, ...]:
    """The forms :func:`widgets.check_layout` and :func:`widgets.run_instruction` can probe:
    ldmatrix, stmatrix, and the mma forms with 16-bit A/B and f32 accumulation (the probe
    codes are halves; the other mma forms are drawn by show_instruction, not probed yet)."""
    return tuple(t for t in supported_forms() if _probed(tirx.instruction_contract(t)))


def _mma_probed(contract) -> bool:
    return contract.param("ab_type") in ("f16", "bf16") and contract.param("acc_type") == "f32"


_PROBED = check_complete(
    [(Family.MMA, _mma_probed), (Family.LDMATRIX, lambda c: True),
     (Family.STMATRIX, lambda c: True), (Family.CP_ASYNC, lambda c: False),
     (Family.CP_ASYNC_BULK, lambda c: False), (Family.FENCE_PROXY, lambda c: False),
     (Family.MBARRIER, lambda c: False), (Family.CP_ASYNC_MBARRIER, lambda c: False),
     (Family.FENCE_MBARRIER_INIT, lambda c: False),
     (Family.WGMMA, lambda c: False),
     (Family.CP_ASYNC_BULK_TENSOR, lambda c: False)],
    "widgets.probe probed forms",
)  # fmt: skip


def _probed(contract) -> bool:
    return _PROBED[contract.family](contract)


def instruments() -> dict[str, tuple[str, ...]]:
    """The instrument lists of the notebook tools, from the isa's forms: what
    ``show_instruction`` draws (every form) and what the probes run."""
    return {"show_instruction": supported_forms(), "check_layout": probed_forms()}


def require_probed(contract) -> None:
    require_fragment(contract)
    if not _probed(contract):
        from tirx.errors import TirxError

        raise TirxError(
            f"the probes do not run {contract.text} yet (their codes are 16-bit floats)",
            hint="show_instruction draws its fragments; probed forms: widgets.probe.probed_forms()",
        )


def half_bits(values, ab_type: str = "f16") -> np.ndarray:
    """16-bit patterns of ``values`` as f16 or bf16 (uint16)."""
    values = np.asarray(values, dtype=np.float32)
    if ab_type == "bf16":
        return (values.view(np.uint32) >> 16).astype(np.uint16)
    return values.astype(np.float16).view(np.uint16)


def half_values(bits, ab_type: str = "f16") -> np.ndarray:
    """The numbers that 16-bit patterns stand for (f16 or bf16) as float32."""
    bits = np.asarray(bits).astype(np.uint16)
    if ab_type == "bf16":
        return (bits.astype(np.uint32) << 16).view(np.float32)
    return bits.view(np.float16).astype(np.float32)


def pack(lo, hi) -> np.ndarray:
    """u32 words from their low and high 16-bit halves."""
    return np.asarray(lo, np.uint32) | (np.asarray(hi, np.uint32) << np.uint32(16))


def native_registers(matrix, word_of, nregs: int, ab_type: str = "f16") -> np.ndarray:
    """[32, nregs] u32: an mma A or B operand holding ``matrix`` (rows x k values) in its
    native registers; ``word_of`` is :func:`a_word` or :func:`b_word`."""
    bits = half_bits(matrix, ab_type)
    out = np.zeros((32, nregs), np.uint32)
    for lane in range(32):
        for r in range(nregs):
            row, w = word_of(lane, r)
            out[lane, r] = pack(bits[row, 2 * w], bits[row, 2 * w + 1])
    return out


# ------------------------------------------------------------------------- the kernels


@functools.lru_cache(maxsize=64)
def _ldmatrix_kernel(instr: str, count: int, layout, slots: int):
    @T.function
    def probe_ldmatrix(
        Halves: T.Tensor((count * 64,), "uint16"), Out: T.Tensor((32, slots), "uint32")
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((count, 8, 8), "uint16", align=16)
        for q in range(count * 2):
            i = lane + 32 * q
            s[i // 64, (i // 8) % 8, i % 8] = Halves[i]
        T.cuda.cta_sync()
        r = T.alloc_local((slots,), "uint32")
        T.cuda.tile.apply(
            T.ptx[instr], r.view(count, 8, 4, layout=layout), s.view("uint32"), scope="warp"
        )
        for k in range(slots):
            Out[lane, k] = r[k]

    return probe_ldmatrix


@functools.lru_cache(maxsize=64)
def _stmatrix_kernel(instr: str, count: int, layout, slots: int):
    @T.function
    def probe_stmatrix(
        Regs: T.Tensor((32, slots), "uint32"), Halves: T.Tensor((count * 64,), "uint16")
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        s = T.alloc_shared((count, 8, 8), "uint16", align=16)
        r = T.alloc_local((slots,), "uint32")
        for k in range(slots):
            r[k] = Regs[lane, k]
        T.cuda.tile.apply(
            T.ptx[instr], s.view("uint32"), r.view(count, 8, 4, layout=layout), scope="warp"
        )
        T.cuda.cta_sync()
        for q in range(count * 2):
            i = lane + 32 * q
            Halves[i] = s[i // 64, (i // 8) % 8, i % 8]

    return probe_stmatrix


@functools.lru_cache(maxsize=64)
def _mma_kernel(instr: str, words: int, layouts: tuple, slots: tuple):
    ld, la, lb, lc = layouts
    nd, na, nb, nc = slots

    @T.function
    def probe_mma(
        Ain: T.Tensor((32, na), "uint32"),
        Bin: T.Tensor((32, nb), "uint32"),
        Cin: T.Tensor((32, nc), "float32"),
        Dout: T.Tensor((32, nd), "float32"),
    ):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        ar = T.alloc_local((na,), "uint32")
        br = T.alloc_local((nb,), "uint32")
        cr = T.alloc_local((nc,), "float32")
        dr = T.alloc_local((nd,), "float32")
        for k in range(na):
            ar[k] = Ain[lane, k]
        for k in range(nb):
            br[k] = Bin[lane, k]
        for k in range(nc):
            cr[k] = Cin[lane, k]
        T.cuda.tile.apply(
            T.ptx[instr],
            dr.view(1, 1, 16, 8, layout=ld),
            ar.view(1, 1, 16, words, layout=la),
            br.view(1, 1, 8, words, layout=lb),
            cr.view(1, 1, 16, 8, layout=lc),
            scope="warp",
        )
        for k in range(nd):
            Dout[lane, k] = dr[k]

    return probe_mma


def _mma_probe(contract, chosen, slots):
    names = ("D", "A", "B", "C")
    return _mma_kernel(
        contract.text, contract.param("k") // 2, tuple(chosen[n] for n in names),
        tuple(slots[n] for n in names),
    )  # fmt: skip


def _ldmatrix_probe(contract, chosen, slots):
    reg = chosen["registers"]
    return _ldmatrix_kernel(contract.text, contract.param("count"), reg, slots["registers"])


def _stmatrix_probe(contract, chosen, slots):
    reg = chosen["registers"]
    return _stmatrix_kernel(contract.text, contract.param("count"), reg, slots["registers"])


_PROBE_KERNELS = check_complete(
    [(Family.MMA, (("D", "A", "B", "C"), _mma_probe)),
     (Family.LDMATRIX, (("registers",), _ldmatrix_probe)),
     (Family.STMATRIX, (("registers",), _stmatrix_probe)),
     (Family.CP_ASYNC, ((), no_fragment)), (Family.CP_ASYNC_BULK, ((), no_fragment)),
     (Family.FENCE_PROXY, ((), no_fragment)), (Family.MBARRIER, ((), no_fragment)),
     (Family.CP_ASYNC_MBARRIER, ((), no_fragment)),
     (Family.FENCE_MBARRIER_INIT, ((), no_fragment)),
     (Family.WGMMA, ((), no_fragment)),
     (Family.CP_ASYNC_BULK_TENSOR, ((), no_fragment))], "widgets.probe kernels",
)  # fmt: skip


def kernel_for(contract, layouts: dict):
    """The probe kernel of ``contract`` with ``layouts`` {operand: layout} (canonical for the
    operands not given). Returns (kernel, slots per operand)."""
    require_probed(contract)
    names, build = _PROBE_KERNELS[contract.family]
    chosen = {n: layouts.get(n) or canonical_layout(contract, n) for n in names}
    slots = {n: chosen[n].span() for n in names}
    return build(contract, chosen, slots), slots


# ------------------------------------------------------------------------- launching


def launch(kernel, arrays: list, target=None) -> tuple[list, str]:
    """Compile ``kernel`` for ``target`` (None: the GPU when visible, else the simulator), run
    it on numpy ``arrays`` (outputs are written back into them) and say where it ran."""
    exe = tirx.compile(kernel, target=target)
    if exe.target.kind == "cuda":
        import torch

        tensors = [torch.from_numpy(a).cuda() for a in arrays]
        exe(*tensors)
        torch.cuda.synchronize()
        for a, t in zip(arrays, tensors):
            a[...] = t.cpu().numpy()
        return arrays, f"GPU ({exe.target.arch})"
    exe(*arrays)
    return arrays, "simulator"
