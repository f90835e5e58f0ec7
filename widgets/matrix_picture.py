"""The ldmatrix and stmatrix fragments in the notebook layer: the native-register layout of
the register operand (matrix, row, word), the probe kernels, the checks of a drawing against
the machine and runs with real data (see :mod:`widgets.probe` and :mod:`widgets.families`)."""

from __future__ import annotations

import functools
import itertools

import numpy as np

from tirx import T
from tirx.layout import S, TileLayout, laneid

from . import probe

__all__ = [
    "canonical", "ldmatrix_kernel", "stmatrix_kernel", "check_ldmatrix", "check_stmatrix",
    "run_ldmatrix", "run_stmatrix", "OPERANDS",
]  # fmt: skip

OPERANDS = ("registers",)  # the register operand a probe kernel takes a layout for


def canonical(contract, operand):
    count = contract.param("count")
    return TileLayout(S[(count, 8, 4) : (1, 4 @ laneid, 1 @ laneid)])


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


def ldmatrix_kernel(contract, chosen, slots):
    reg = chosen["registers"]
    return _ldmatrix_kernel(contract.text, contract.param("count"), reg, slots["registers"])


def stmatrix_kernel(contract, chosen, slots):
    reg = chosen["registers"]
    return _stmatrix_kernel(contract.text, contract.param("count"), reg, slots["registers"])


def check_ldmatrix(contract, operand, kernel, slots, target):
    count, trans = contract.param("count"), contract.param("trans")
    halves = np.arange(count * 64, dtype=np.uint16)
    out = np.zeros((32, slots["registers"]), np.uint32)
    (_, out), where = probe.launch(kernel, [halves, out], target)
    machine = {}
    for lane, s in itertools.product(range(32), range(out.shape[1])):
        lo, hi = int(out[lane, s] & 0xFFFF), int(out[lane, s] >> 16)
        i, r, c = lo // 64, (lo // 8) % 8, lo % 8
        if trans and r % 2 == 0 and hi == lo + 8:
            machine[(i, c, r // 2)] = (lane, s)
        elif not trans and c % 2 == 0 and hi == lo + 1:
            machine[(i, r, c // 2)] = (lane, s)
    return machine, where


def check_stmatrix(contract, operand, kernel, slots, target):
    count, trans = contract.param("count"), contract.param("trans")
    n = slots["registers"]
    lanes, ss = np.meshgrid(np.arange(32), np.arange(n), indexing="ij")
    regs = probe.pack(probe.code(lanes, ss, 0, n), probe.code(lanes, ss, 1, n))
    halves = np.zeros(count * 64, np.uint16)
    (_, halves), where = probe.launch(kernel, [regs.astype(np.uint32), halves], target)
    mats = halves.reshape(count, 8, 8)
    machine = {}
    for i, row, w in probe.coords((count, 8, 4)):
        first, second = (
            (mats[i, 2 * w, row], mats[i, 2 * w + 1, row]) if trans
            else (mats[i, row, 2 * w], mats[i, row, 2 * w + 1])
        )  # fmt: skip
        a, b = probe.decode(first, n), probe.decode(second, n)
        if a[:2] == b[:2] and (a[2], b[2]) == (0, 1):
            machine[(i, row, w)] = a[:2]
    return machine, where


def run_ldmatrix(contract, kernel, slots, given, target):
    count = contract.param("count")
    shared = given["shared"]
    if count == 1 and shared is not None and np.shape(shared) == (8, 8):
        shared = np.asarray(shared)[None]  # one 8 x 8 matrix, as .x1 loads it
    bits = probe.as_bits16(shared, (count, 8, 8))
    out = np.zeros((32, count), np.uint32)
    (_, out), where = probe.launch(kernel, [bits.ravel(), out], target)
    return (probe.registers(0, "r", True, out, "uint32", np.zeros_like(out)),), where


def run_stmatrix(contract, kernel, slots, given, target):
    count = contract.param("count")
    registers = given["registers"]
    r = (
        np.zeros((32, count), np.uint32)
        if registers is None
        else probe.as_words(registers, (32, count))
    )
    halves = np.zeros(count * 64, np.uint16)
    (r, halves), where = probe.launch(kernel, [r.astype(np.uint32), halves], target)
    return (probe.registers(1, "r", False, r, "uint32"),), where
