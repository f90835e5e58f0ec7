"""The simulator's rules for wgmma's registers in the rs form and its MN-major reads
(tirx/families/wgmma/sim_registers.py, sim_layout.py), each fired by a kernel built to break
it and silent on its twin: A's registers are in flight with their mma_async (a thread
touching them before the wait is a fault; another mma_async may read them), an accumulator
in flight is not an A operand, and MN-major chunks are where the ISA's pictures put them."""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import define
from tests.test_isa_wgmma_forms import LINES, RAW, _args
from tirx.errors import SimulationError
from tirx.families.wgmma.sim_layout import Descriptor, Swizzle, operand_bytes, operand_chunks

MMA = LINES["f16"][0]


def _kernel(tmp_path, body: str):
    """The raw f16 rs kernel of tests/test_isa_wgmma_forms.py with its mma_async replaced by
    ``body`` (lines of the kernel, indented by 4)."""
    text, ea, eb, e, ed, nd, _, _ = LINES["f16"]
    src = RAW.replace('    T.ptx["{text}"](acc, {ops})\n', body).format(
        text=text, ea=ea, eb=eb, e=e, ed=ed, nd=nd, kt=64, ops=""
    )
    return tirx.compile(define(src, tmp_path, "raw"), target="sim")


def _run(tmp_path, body):
    _kernel(tmp_path, body)(*_args("f16", 64)[0])


ISSUE = f'    T.ptx["{MMA}"](acc, a, desc[1], 0, 1, 1, 0)\n'


def test_touching_an_a_register_in_flight_is_a_fault(tmp_path):
    body = ISSUE + '    T.ptx["wgmma.commit_group.sync.aligned"]()\n    a[2] = a[3]\n'
    with pytest.raises(SimulationError, match=r"reads 'a' slot 3 .*an A register of the "
                       r"wgmma.mma_async at line \d+, which is in flight"):  # fmt: skip
        _run(tmp_path, body)
    _run(tmp_path, ISSUE)  # the twin: the kernel's own wait comes first


def test_two_mma_asyncs_may_read_the_same_a_registers_in_flight(tmp_path):
    """A second accumulator from the same A registers, both in flight: the tensor core only
    reads A, and the ISA asks for no fence between two mma_asyncs."""
    body = ISSUE + f'    T.ptx["{MMA}"](o2, a, desc[1], 0, -1, 1, 0)\n'
    body = "    o2 = T.alloc_local((4,), 'float32')\n" + body
    body += '    T.ptx["wgmma.commit_group.sync.aligned"]()\n'
    body += '    T.ptx["wgmma.wait_group.sync.aligned"](0)\n    acc[0] = acc[0] + o2[0]\n'
    _run(tmp_path, body)


def test_an_accumulator_in_flight_is_not_an_a_operand(tmp_path):
    """The result of an mma_async read as A by the next one before any wait: a fault; the twin
    waits and fences between the two."""
    first = f'    T.ptx["{MMA}"](acc, a, desc[1], 0, 1, 1, 0)\n'
    second = f'    T.ptx["{MMA}"](o2, acc, desc[1], 0, 1, 1, 0)\n'
    alloc = "    o2 = T.alloc_local((4,), 'float32')\n"
    with pytest.raises(SimulationError, match=r"A register acc\[0\] is in flight as an "
                       r"accumulator register"):  # fmt: skip
        _run(tmp_path, alloc + first + second)
    wait = '    T.ptx["wgmma.commit_group.sync.aligned"]()\n    T.ptx["wgmma.wait_group.sync.aligned"](0)\n'  # fmt: skip
    fence = '    T.ptx["wgmma.fence.sync.aligned"]()\n'
    _run(tmp_path, alloc + first + wait + fence + second)


def test_an_a_register_in_flight_is_not_an_accumulator(tmp_path):
    first = f'    T.ptx["{MMA}"](acc, a, desc[1], 0, 1, 1, 0)\n'
    second = f'    T.ptx["{MMA}"](a, desc[0], desc[1], 0, 1, 1, 0, 0)\n'
    body = first + second.replace("(a,", "(af,")
    alloc = "    af = a.view('float32')\n"
    with pytest.raises(SimulationError, match=r"accumulator a\[0\] is in flight as an A register"):
        _run(tmp_path, alloc + body)


def place_mn(rows: int, w: int, lbo: int, sbo: int) -> np.ndarray:
    """Byte offset of each 16-bit element (mn, k) of an MN-major (rows, 16) operand, from the
    ISA's MN-major pictures: atoms of 8 K-lines of ``w`` bytes (``w / 2`` rows of one K per
    line), the line's 16-byte chunks permuted by the line (128B: ``c ^ line``, 64B:
    ``c ^ (line / 2)``, 32B: ``c ^ (line / 4)``), 8-K groups ``sbo`` apart, the next ``w / 2``
    rows ``lbo`` apart; without swizzle, core matrices of 8 K x 8 rows, 8-row groups ``sbo``
    apart and 8-K groups ``lbo`` apart."""
    mn = np.arange(rows)[:, None]
    k = np.arange(16)[None, :]
    if w == 16:
        return (mn // 8) * sbo + (k // 8) * lbo + (k % 8) * 16 + (mn % 8) * 2
    per = w // 2  # rows of one line
    line = k % 8
    phase = {128: line, 64: line // 2, 32: line // 4}[w]
    chunk = ((mn % per) // 8) ^ phase
    return (mn // per) * lbo + (k // 8) * sbo + line * w + chunk * 16 + (mn % 8) * 2


@pytest.mark.parametrize("mode", list(Swizzle))
def test_mn_major_chunks_follow_the_isa_pictures(mode):
    w = mode.row_bytes
    rows, lbo, sbo = 128, 16 * w, 8 * w  # atoms of 8 K-lines, the two 8-K groups side by side
    if mode is Swizzle.NONE:
        lbo, sbo = 128, 1024
    base = 8192
    want = base + place_mn(rows, w, lbo, sbo)
    desc = Descriptor(base, lbo, sbo, 0, mode)
    chunks = operand_chunks(desc, rows, mn_major=True)
    data = np.zeros(base + 32768, np.uint8)
    values = np.arange(rows * 16, dtype=np.uint16).reshape(rows, 16)
    data.view(np.uint16)[want // 2] = values
    got = operand_bytes(data, chunks, True).view(np.uint16)
    assert np.array_equal(got, values)


def test_the_planted_base_offset_kernels_say_what_the_parity_run_checks():
    """tests/wgmma_planted.py: base offset 3 for a start 384 bytes into a period is a wrong
    result (its check writes out of bounds), base offset 0 is right, in the simulator; the
    GPU parity run (compute-sanitizer memcheck) must say the same."""
    from tests.test_sanitizer_parity import simulator_verdict
    from tests.wgmma_planted import WGMMA_CASES

    verdicts = {c.name: simulator_verdict(c) for c in WGMMA_CASES}
    assert verdicts == {
        "wgmma_base_offset_of_a_start_inside_a_period": "fault: out_of_bounds",
        "wgmma_base_offset_of_a_start_inside_a_period.fixed": "clean",
    }
