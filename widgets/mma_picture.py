"""The mma.sync fragments in the notebook layer: the native-register layouts of its operands,
which forms the probes run, the probe kernel, the check of a drawing against the machine and a
run with real data (see :mod:`widgets.probe` for the codes and :mod:`widgets.families`)."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from tirx import T
from tirx.layout import S, TileLayout, laneid

from . import probe

__all__ = ["MMA_NATIVE", "canonical", "probed", "probe_kernel", "check", "run", "OPERANDS"]

OPERANDS = ("D", "A", "B", "C")  # the register operands a probe kernel takes layouts for

# The native-register layouts of the mma word tiles, by atom (rows, words): slot = register.
MMA_NATIVE = {
    (16, 8, "acc"): TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, 1)]),
    (16, 4, "acc"): TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)]),
    (16, 8, "A"): TileLayout(S[(1, 1, 2, 8, 2, 4) : (4, 4, 1, 4 @ laneid, 2, 1 @ laneid)]),
    (16, 4, "A"): TileLayout(S[(1, 1, 2, 8, 4) : (2, 2, 1, 4 @ laneid, 1 @ laneid)]),
    (8, 8, "B"): TileLayout(S[(1, 1, 8, 2, 4) : (2, 2, 4 @ laneid, 1, 1 @ laneid)]),
    (8, 4, "B"): TileLayout(S[(1, 1, 8, 4) : (1, 1, 4 @ laneid, 1 @ laneid)]),
}


def canonical(contract, operand):
    role = "acc" if operand in ("D", "C") else operand
    return MMA_NATIVE[(*contract.operand(operand).atom, role)]


def probed(contract) -> bool:
    return contract.param("ab_type") in ("f16", "bf16") and contract.param("acc_type") == "f32"


@functools.lru_cache(maxsize=64)
def _kernel(instr: str, words: int, layouts: tuple, slots: tuple):
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


def probe_kernel(contract, chosen, slots):
    names = ("D", "A", "B", "C")
    return _kernel(
        contract.text, contract.param("k") // 2, tuple(chosen[n] for n in names),
        tuple(slots[n] for n in names),
    )  # fmt: skip


def check(contract, operand, kernel, slots, target):
    k, ab = contract.param("k"), contract.param("ab_type")
    words = k // 2
    a = np.zeros((16, k), np.float32)
    b = np.zeros((8, k), np.float32)
    c_regs = np.zeros((32, slots["C"]), np.float32)
    n = slots[operand] if operand in ("A", "B") else 0
    runs = []
    if operand == "D":
        a[:, 0], a[:, 1] = np.arange(16), 1
        b[:, 0], b[:, 1] = 8, np.arange(8)
        runs.append((a, b, None))
    elif operand == "C":
        lanes, ss = np.meshgrid(np.arange(32), np.arange(slots["C"]), indexing="ij")
        c_regs = (lanes * slots["C"] + ss).astype(np.float32)
        runs.append((a, b, None))
    elif operand == "A":
        for j in range(k // 8):
            bj = np.zeros((8, k), np.float32)
            bj[np.arange(8), np.arange(8) + 8 * j] = 1
            runs.append((None, bj, j))
    else:  # B against the identity
        aj = np.zeros((16, k), np.float32)
        aj[np.arange(min(16, k)), np.arange(min(16, k))] = 1
        runs.append((aj, None, None))
    machine, where = {}, ""
    for a_m, b_m, j in runs:
        a_regs = (
            _codes(n, ab)
            if a_m is None
            else probe.native_registers(a_m, probe.a_word, slots["A"], ab)
        )
        b_regs = (
            _codes(n, ab)
            if b_m is None
            else probe.native_registers(b_m, probe.b_word, slots["B"], ab)
        )
        d = np.zeros((32, slots["D"]), np.float32)
        (*_, d), where = probe.launch(kernel, [a_regs, b_regs, c_regs.copy(), d], target)
        _read(operand, d, j, n, slots, words, machine)
    return machine, where


def _codes(n, ab):
    lanes, ss = np.meshgrid(np.arange(32), np.arange(n), indexing="ij")
    lo = probe.half_bits(probe.code(lanes, ss, 0, n), ab)
    hi = probe.half_bits(probe.code(lanes, ss, 1, n), ab)
    return probe.pack(lo, hi)


def _read(operand, d, j, n, slots, words, machine):
    for lane, r in itertools.product(range(32), range(d.shape[1])):
        row, col = probe.acc_coord(lane, r) if operand != "D" else (None, None)
        value = d[lane, r]
        if not float(value).is_integer() or value < 0:
            continue
        value = int(value)
        if operand == "D":
            machine[(value // 8, value % 8)] = (lane, r) if value < 128 else None
        elif operand == "C":
            machine[(row, col)] = divmod(value, slots["C"])
        elif operand == "A":
            kk = col + 8 * j
            owner_lane, slot, half = probe.decode(value, n)
            if half == kk % 2:
                machine[(row, kk // 2)] = (owner_lane, slot)
        elif row < 2 * words:  # B[n=col, k=row], from the rows of the identity
            owner_lane, slot, half = probe.decode(value, n)
            if half == row % 2:
                machine[(col, row // 2)] = (owner_lane, slot)


def run(contract, kernel, slots, given, target):
    k, ab = contract.param("k"), contract.param("ab_type")
    A, B, C = given["A"], given["B"], given["C"]
    a = np.zeros((16, k), np.float32) if A is None else probe.as_array(A, (16, k))
    b = np.zeros((8, k), np.float32) if B is None else probe.as_array(B, (8, k))
    c = np.zeros((16, 8), np.float32) if C is None else probe.as_array(C, (16, 8))
    a_regs = probe.native_registers(a, probe.a_word, slots["A"], ab)
    b_regs = probe.native_registers(b, probe.b_word, slots["B"], ab)
    c_regs = np.array([[c[probe.acc_coord(ln, r)] for r in range(4)] for ln in range(32)],
                      np.float32)  # fmt: skip
    d = np.zeros((32, 4), np.float32)
    (*_, d), where = probe.launch(kernel, [a_regs, b_regs, c_regs.copy(), d], target)
    regs = (
        probe.registers(
            0, "d", True, d.view(np.uint32), "float32", np.zeros_like(d).view(np.uint32)
        ),
        probe.registers(1, "a", False, a_regs, "uint32"),
        probe.registers(2, "b", False, b_regs, "uint32"),
        probe.registers(3, "c", False, c_regs.view(np.uint32), "float32"),
    )
    return regs, where
