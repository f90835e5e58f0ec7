"""``T.cuda.float22half2(dst, src)``, ``T.cuda.half8tofloat8(src, dst)`` and
``T.cuda.float8tohalf8(src, dst)``: float32 pairs to float16 pairs and back, from memory to
memory through element addresses (tirx/families/half_conversions, docs/semantics.md).

The simulator against numpy's IEEE conversions (and a table of bit patterns written out by
hand), global, shared and local operands, integer storage, the run-time faults (misaligned,
out of bounds, overlapping, a misaligned data pointer) and every compile-time refusal at the
user's line; the generated C compiled by NVRTC; on the GPU, its bits against the simulator's.
"""

from __future__ import annotations

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.errors import TirxError

N = 65536  # every float16 bit pattern once


def _f16_bits_reference(f: np.ndarray) -> np.ndarray:
    """float32 -> float16 bits to nearest even (numpy's IEEE conversion), a NaN 0x7fff."""
    with np.errstate(over="ignore", invalid="ignore"):
        bits = f.astype(np.float16).view(np.uint16).copy()
    bits[np.isnan(f)] = 0x7FFF
    return bits


def _f32_bits_reference(h: np.ndarray) -> np.ndarray:
    """float16 -> float32 bits (exact), a NaN the canonical 0x7fffffff."""
    bits = h.astype(np.float32).view(np.uint32).copy()
    bits[np.isnan(h)] = 0x7FFFFFFF
    return bits


# float32 bits -> float16 bits, each worked out by hand from IEEE 754 (round to nearest even)
HAND_F2H = {
    0x3F800000: 0x3C00,  # 1
    0x3F801000: 0x3C00,  # 1 + 2**-11: halfway between 1 and its successor -> the even 1
    0x3F803000: 0x3C02,  # 1 + 3 * 2**-11: halfway between 0x3c01 and 0x3c02 -> even 0x3c02
    0x3F801001: 0x3C01,  # just above the halfway point -> up
    0xBF801000: 0xBC00,  # -(1 + 2**-11) -> -1
    0x477FE000: 0x7BFF,  # 65504, the largest finite half
    0x477FEFFF: 0x7BFF,  # just below 65520 -> 65504
    0x477FF000: 0x7C00,  # 65520: halfway between 65504 and 2**16 -> even (infinity)
    0xC77FF000: 0xFC00,  # -65520 -> -inf
    0x501502F9: 0x7C00,  # 1e10 -> inf
    0x7F800000: 0x7C00,  # inf
    0xFF800000: 0xFC00,  # -inf
    0x38800000: 0x0400,  # 2**-14, the smallest normal half
    0x33800000: 0x0001,  # 2**-24, the smallest subnormal half
    0x33000000: 0x0000,  # 2**-25: halfway between 0 and 2**-24 -> even 0
    0xB3000000: 0x8000,  # -2**-25 -> -0
    0x33400000: 0x0001,  # 1.5 * 2**-25 -> 2**-24
    0x33C00000: 0x0002,  # 3 * 2**-25: halfway between 1 and 2 subnormal steps -> even 2
    0x00000001: 0x0000,  # a float32 subnormal -> +0
    0x80000001: 0x8000,  # -> -0
    0x80000000: 0x8000,  # -0
    0x7FC00000: 0x7FFF,  # quiet NaN -> the canonical half NaN
    0x7F800001: 0x7FFF,  # signalling NaN
    0xFFC00000: 0x7FFF,  # negative NaN
    0x7FA5A5A5: 0x7FFF,  # NaN with a payload
    0xFFFFFFFF: 0x7FFF,
}
# float16 bits -> float32 bits
HAND_H2F = {
    0x3C00: 0x3F800000,  # 1
    0x0001: 0x33800000,  # 2**-24, subnormal, exact
    0x03FF: 0x387FC000,  # the largest subnormal half, 1023 * 2**-24
    0x7BFF: 0x477FE000,  # 65504
    0x7C00: 0x7F800000,  # inf
    0xFC00: 0xFF800000,  # -inf
    0x8000: 0x80000000,  # -0
    0x7E00: 0x7FFFFFFF,  # NaN -> the canonical float32 NaN
    0xFE01: 0x7FFFFFFF,
    0x7C01: 0x7FFFFFFF,
}


def _float_inputs(seed: int = 0) -> np.ndarray:
    """``N`` float32: the hand table's inputs, then a spread of exponents around float16's
    range (normal, subnormal, overflowing, halfway cases), then random bit patterns."""
    rng = np.random.default_rng(seed)
    hand = np.array(list(HAND_F2H), dtype=np.uint32)
    # float16 halfway points: a random half (as float32) plus half its ulp, exactly
    h = rng.integers(0, 0x7C00, 4096, dtype=np.uint16).view(np.float16).astype(np.float64)
    ulp = np.spacing(h.astype(np.float16)).astype(np.float64)
    halfway = (h + ulp / 2).astype(np.float32).view(np.uint32)
    spread = (
        (rng.uniform(-1, 1, 20000) * np.exp2(rng.uniform(-30, 18, 20000)))
        .astype(np.float32)
        .view(np.uint32)
    )
    rest = N - hand.size - halfway.size - spread.size
    bits = rng.integers(0, 2**32, rest, dtype=np.uint64).astype(np.uint32)
    return np.concatenate([hand, halfway, spread, bits]).view(np.float32)


def _half_inputs() -> np.ndarray:
    return np.arange(N, dtype=np.uint32).astype(np.uint16).view(np.float16)


GLOBAL_SOURCE = f"""
@T.function
def k(F: T.Tensor(({N},), "float32"), X: T.Tensor(({N},), "float16"),
      H: T.Tensor(({N},), "float16"), G: T.Tensor(({N},), "float16"),
      B: T.Tensor(({N},), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid={N // 8 // 128}, block=128))
    t = T.cuda.thread_idx("x") + 128 * T.cuda.block_idx("x")
    for q in T.unroll(4):
        T.cuda.float22half2(H.ptr_to([8 * t + 2 * q]), F.ptr_to([8 * t + 2 * q]))
    T.cuda.float8tohalf8(F.ptr_to([8 * t]), T.address_of(G[8 * t]))
    T.cuda.half8tofloat8(T.address_of(X[8 * t]), B.ptr_to([8 * t]))
"""


def _global_inputs():
    z16, z32 = np.zeros(N, np.float16), np.zeros(N, np.float32)
    return [_float_inputs(), _half_inputs(), z16.copy(), z16.copy(), z32]


@pytest.fixture(scope="module")
def global_kernel(tmp_path_factory):
    return define(GLOBAL_SOURCE, tmp_path_factory.mktemp("global"), "k")


def test_the_simulator_rounds_every_pair_as_ieee_and_the_gpu_do(global_kernel):
    f, x, h, g, b = _global_inputs()
    tirx.compile(global_kernel, target="sim")(f, x, h, g, b)
    want = _f16_bits_reference(f)
    np.testing.assert_array_equal(h.view(np.uint16), want)  # float22half2, pair by pair
    np.testing.assert_array_equal(g.view(np.uint16), want)  # float8tohalf8
    np.testing.assert_array_equal(b.view(np.uint32), _f32_bits_reference(x))  # half8tofloat8
    # the hand table, independent of numpy's conversion
    for i, (fb, hb) in enumerate(HAND_F2H.items()):
        assert f[i : i + 1].view(np.uint32)[0] == fb
        assert int(h.view(np.uint16)[i]) == hb, hex(fb)
    for hb, fb in HAND_H2F.items():
        assert int(b.view(np.uint32)[hb]) == fb, hex(hb)


STAGED_SOURCE = """
@T.function
def k(F: T.Tensor((256,), "float32"), B: T.Tensor((256,), "float32"),
      G: T.Tensor((256,), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    t = T.cuda.thread_idx("x")
    s = T.alloc_shared((256,), "float16")
    r = T.alloc_local((8,), "float32")
    T.cuda.float8tohalf8(F.ptr_to([8 * t]), s.ptr_to([8 * t]))  # global -> shared
    T.cuda.cta_sync()
    u = (t + 1) % 32
    T.cuda.half8tofloat8(s.ptr_to([8 * u]), r.ptr_to([0]))  # another thread's -> local
    for j in range(8):
        B[8 * t + j] = r[j]
    for q in T.unroll(4):
        T.cuda.float22half2(G.ptr_to([8 * t + 2 * q]), T.address_of(r[2 * q]))  # local -> global
"""


def _staged_inputs():
    f = _float_inputs(1)[:256].copy()
    return [f, np.zeros(256, np.float32), np.zeros(256, np.float16)]


def test_shared_and_local_operands(tmp_path):
    k = define(STAGED_SOURCE, tmp_path, "k")
    f, b, g = _staged_inputs()
    tirx.compile(k, target="sim")(f, b, g)
    halves = _f16_bits_reference(f).view(np.float16)
    rolled = np.roll(halves.reshape(32, 8), -1, axis=0).reshape(-1)  # thread t has t + 1's
    np.testing.assert_array_equal(b.view(np.uint32), _f32_bits_reference(rolled))
    # and back: a half read as float32 and rounded again is the same half (NaNs canonical)
    np.testing.assert_array_equal(g.view(np.uint16), _f16_bits_reference(b))


INTEGER_SOURCE = """
@T.function
def k(F: T.Tensor((64,), "float32"), W: T.Tensor((32,), "uint32"),
      Q: T.Tensor((32,), "uint64"), U: T.Tensor((64,), "uint32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    t = T.cuda.thread_idx("x")
    for q in T.unroll(4):
        T.cuda.float22half2(W.ptr_to([4 * t + q]), F.ptr_to([8 * t + 2 * q]))
    T.cuda.half8tofloat8(W.ptr_to([4 * t]), Q.ptr_to([4 * t]))
    T.cuda.float22half2(U.ptr_to([8 * t]), U.ptr_to([8 * t]))  # in place: read, then write
"""


def test_integer_tensors_are_storage_their_bytes_reinterpreted(tmp_path):
    k = define(INTEGER_SOURCE, tmp_path, "k")
    f = _float_inputs(2)[:64].copy()
    w, q = np.zeros(32, np.uint32), np.zeros(32, np.uint64)
    u = f.view(np.uint32).copy()
    tirx.compile(k, target="sim")(f, w, q, u)
    halves = _f16_bits_reference(f)
    np.testing.assert_array_equal(w.view(np.uint16), halves)  # packed half2 words, x low
    np.testing.assert_array_equal(q.view(np.uint32), _f32_bits_reference(halves.view(np.float16)))
    np.testing.assert_array_equal(u.reshape(8, 8)[:, 0], w.reshape(8, 4)[:, 0])
    np.testing.assert_array_equal(u.reshape(8, 8)[:, 1:], f.view(np.uint32).reshape(8, 8)[:, 1:])


def test_the_signature_and_the_launcher_see_the_accesses(global_kernel):
    from tirx.backend.cuda.alignment import Requirements
    from tirx.ir.aligned_access import AccessKind

    exe = tirx.compile(global_kernel, target="cuda -arch=sm_90")
    assert str(exe.signature) == (
        f"k(F: float32[{N}] in, X: float16[{N}] in, H: float16[{N}] out, G: float16[{N}] out, "
        f"B: float32[{N}] out)"
    )
    need = Requirements.of(exe.lowered).per_param
    assert [r.nbytes for r in need] == [8, 4, 4, 4, 8]
    assert all(r.kind is AccessKind.CONVERSION for r in need)
    assert need[0].what == "the source of T.cuda.float22half2, read or written as float2 " + (
        "(8-byte aligned)"
    )
    script = exe.script()
    assert "T.cuda.float8tohalf8(T.address_of(F[8 * t]), T.address_of(G[8 * t]))" in script
    assert "T.cuda.half8tofloat8(T.address_of(X[8 * t]), T.address_of(B[8 * t]))" in script
    lowered = exe.script(lowered=True)
    assert "T.cuda.float22half2(T.address_of(H.as_uint8[" in lowered
    # the front-end cache's serializer keeps the node (its kind an enum of tirx's)
    from tirx.ir.printer import print_function
    from tirx.ir.serial import dumps, loads

    assert print_function(loads(dumps(exe.lowered))) == print_function(exe.lowered)


# ---------------------------------------------------------------------- the generated C


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_the_helpers_to_vector_accesses_and_cvt(global_kernel, tmp_path, arch):
    exe = tirx.compile(global_kernel, target=f"cuda -arch={arch}")
    src, ptx = exe.source, exe.ptx
    assert "tirx_float22half2((reinterpret_cast<unsigned char*>(H) + (" in src
    assert "tirx_half8tofloat8((reinterpret_cast<unsigned char*>(X) + (" in src
    assert 'asm("cvt.rn.f16x2.f32 %0, %1, %2;" : "=r"(h) : "f"(f.y), "f"(f.x))' in src
    assert "cvt.rn.f16x2.f32" in ptx and "cvt.f32.f16" in ptx
    assert ".v2.f32" in ptx  # float2 loads and stores, as the real TIRx's casts make them
    staged = tirx.compile(define(STAGED_SOURCE, tmp_path, "k"), target=f"cuda -arch={arch}")
    assert "reinterpret_cast<unsigned char*>(r) + (" in staged.source  # the local array
    assert "cvt.rn.f16x2.f32" in staged.ptx
    ints = tirx.compile(define(INTEGER_SOURCE, tmp_path, "k"), target=f"cuda -arch={arch}")
    assert "tirx_float22half2" in ints.source


def test_kernels_without_them_carry_no_helper(tmp_path):
    src = """
    @T.function
    def k(A: T.Tensor((8,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
        A[T.cuda.thread_idx("x")] = 1.0
    """
    assert "tirx_float22half2" not in tirx.compile(define(src, tmp_path, "k"), target="cuda").source


# ---------------------------------------------------------------------- run-time faults

OFFSET_SOURCE = """
@T.function
def k(F: T.Tensor((64,), "float32"), H: T.Tensor((64,), "float16"), off: T.int32,
      hoff: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
    t = T.cuda.thread_idx("x")
    T.cuda.float8tohalf8(F.ptr_to([8 * t + off]), H.ptr_to([8 * t + hoff]))
"""


@pytest.mark.parametrize(
    "off, hoff, words",
    [
        (1, 0, "misaligned source: T.cuda.float8tohalf8 reads a float2 (8 bytes) at byte 4 of "
         "global 'F', which is not a multiple of 8"),
        (0, 1, "misaligned destination: T.cuda.float8tohalf8 writes a half2 (4 bytes) at byte 2 "
         "of global 'H', which is not a multiple of 4"),
        (2, 0, "out-of-bounds source: T.cuda.float8tohalf8 reads a float2 at bytes 256..263 of "
         "global 'F', which holds 256 bytes"),
        (0, 2, "out-of-bounds destination: T.cuda.float8tohalf8 writes a half2 at bytes "
         "128..131 of global 'H', which holds 128 bytes"),
        (-2, 0, "out-of-bounds source: T.cuda.float8tohalf8 reads a float2 at bytes -8..-1"),
    ],
)  # fmt: skip
def test_the_simulator_reports_a_misaligned_or_out_of_bounds_access(tmp_path, off, hoff, words):
    k = define(OFFSET_SOURCE, tmp_path, "k")
    f, h = _float_inputs()[:64].copy(), np.zeros(64, np.float16)
    with pytest.raises(tirx.SimulationError) as e:
        tirx.compile(k, target="sim")(f, h, off, hoff)
    assert words in str(e.value)
    assert "T.cuda.float8tohalf8(F.ptr_to([8 * t + off])" in caret_line(str(e.value))
    tirx.compile(k, target="sim")(f, h, 0, 0)  # aligned and inside: fine
    np.testing.assert_array_equal(h.view(np.uint16), _f16_bits_reference(f))


OVERLAP_SOURCE = """
@T.function
def k(U: T.Tensor((64,), "uint32"), off: T.int32):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
    T.cuda.half8tofloat8(U.ptr_to([0]), U.ptr_to([off]))
"""


def test_the_simulator_refuses_overlapping_eight_element_operands(tmp_path):
    k = define(OVERLAP_SOURCE, tmp_path, "k")
    u = np.zeros(64, np.uint32)
    with pytest.raises(tirx.SimulationError, match=r"source \(bytes 0..15\) and destination "
                       r"\(bytes 8..39\) overlap in global 'U'") as e:  # fmt: skip
        tirx.compile(k, target="sim")(u, 2)
    assert "T.cuda.half8tofloat8(U.ptr_to([0]), U.ptr_to([off]))" in caret_line(str(e.value))
    tirx.compile(k, target="sim")(u, 4)  # bytes 16..47: apart


def test_a_misaligned_data_pointer_is_refused_before_the_block_runs(global_kernel):
    f, x, h, g, b = _global_inputs()
    shifted = np.zeros(N + 1, np.float32)[1:]  # 4 bytes into a fresh array
    shifted[...] = f
    assert shifted.ctypes.data % 8 == 4
    with pytest.raises(tirx.SimulationError, match="'F' is the source of T.cuda.float22half2, "
                       r"read or written as float2 \(8-byte aligned\), but its data pointer "
                       "0x[0-9a-f]+ is not a multiple of 8"):  # fmt: skip
        tirx.compile(global_kernel, target="sim")(shifted, x, h, g, b)


def test_unwritten_shared_memory_is_reported(tmp_path):
    src = """
    @T.function
    def k(B: T.Tensor((8,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))
        s = T.alloc_shared((8,), "float16")
        T.cuda.half8tofloat8(s.ptr_to([0]), B.ptr_to([0]))
    """
    with pytest.raises(tirx.SimulationError, match="read of shared memory that nothing wrote"):
        tirx.compile(define(src, tmp_path, "k"), target="sim")(np.zeros(8, np.float32))


# ---------------------------------------------------------------- compile-time refusals

_TENSORS = """F: T.Tensor((64,), "float32"), H: T.Tensor((64,), "float16"),
      Bf: T.Tensor((64,), "bfloat16"), D: T.Tensor((64,), "float64"),
      M: T.Tensor((8, 8), "float32"), U: T.Tensor((64,), "uint32"),
      P: T.Tensor((64,), "bool")"""


@pytest.mark.parametrize(
    "line, words, hint",
    [
        ("T.cuda.float22half2(H.ptr_to([0]))",
         "T.cuda.float22half2 takes 2 arguments (dst, src), got 1", "each the address"),
        ("T.cuda.half8tofloat8(H.ptr_to([0]), F.ptr_to([0]), F.ptr_to([8]))",
         "takes 2 arguments (src_addr, dst_addr), got 3", "A.ptr_to([i, ...])"),
        ("T.cuda.float22half2(H[0], F.ptr_to([0]))",
         "dst must be an element address: 'H'[...] is an element's value, not its address",
         "A.ptr_to([i, ...]) or T.address_of(A[i, ...])"),
        ("T.cuda.float22half2(H, F.ptr_to([0]))",
         "dst must be an element address: 'H' is a tensor, not the address", "T.address_of"),
        ("T.cuda.float22half2(H.ptr_to([0]), 0)",
         "src must be an element address: int 0 is not an address", "T.address_of"),
        ("T.cuda.float22half2(H.ptr_to([0]), p)",
         "src must be an element address: a kernel value is not an address", "T.address_of"),
        ("T.cuda.float22half2(T.address_of(H[0:2]), F.ptr_to([0]))",
         "T.address_of takes one tensor element, got a tensor region", "T.address_of"),
        ("T.cuda.float22half2(H.ptr_to([0]), M.ptr_to([0]))",
         "src needs one index per dimension of 'M' (8, 8), got 1", "A.ptr_to"),
        ("T.cuda.float22half2(Bf.ptr_to([0]), F.ptr_to([0]))",
         "dst is its float16 (half2) side, but 'Bf' is bfloat16", "T.cuda.float22bfloat162_rn"),
        ("T.cuda.half8tofloat8(F.ptr_to([0]), H.ptr_to([0]))",
         "src_addr is its float16 (half2) side, but 'F' is float32",
         "the arguments are (src_addr, dst_addr), in that order: swap them"),
        ("T.cuda.float8tohalf8(D.ptr_to([0]), H.ptr_to([0]))",
         "src_addr is its float32 (float2) side, but 'D' is float64",
         "pass a float32 tensor (or an integer tensor holding float32 bits)"),
        ("T.cuda.float22half2(P.ptr_to([0]), F.ptr_to([0]))",
         "dst is its float16 (half2) side, but 'P' is bool", "pass a float16 tensor"),
        ("x = T.cuda.float22half2(H.ptr_to([0]), F.ptr_to([0]))",
         "writes memory and has no value to assign", "a statement of its own"),
        ("F[0] = T.cuda.float22half2(H.ptr_to([0]), F.ptr_to([0])) + 1",
         "must be a statement of its own", "assign it first"),
        ("T.cuda.float22half2(dst=H.ptr_to([0]), source=F.ptr_to([0]))",
         "unexpected keyword argument 'source'", "its parameters are (dst, src)"),
        ("T.cuda.float22half2(H.ptr_to([0]), F.ptr_to([1]))",
         "T.cuda.float22half2's source is misaligned: each float2 access is 8 bytes and must "
         "start at a multiple of 8, but the address of this float32 element of 'F' is 4 past "
         "one", "a multiple of 2"),
        ("T.cuda.float22half2(H.ptr_to([2 * t + 1]), F.ptr_to([0]))",
         "T.cuda.float22half2's destination is misaligned: each half2 access is 4 bytes",
         "a half2 is two float16, 4-byte aligned"),
        ("T.cuda.float8tohalf8(F.ptr_to([58]), H.ptr_to([0]))",
         "T.cuda.float8tohalf8's source lies outside global 'F': its 4 float2 accesses cover "
         "bytes 232..263, and it holds 256 bytes", "leave 32 bytes"),
        ("T.cuda.half8tofloat8(U.ptr_to([0]), U.ptr_to([2]))",
         "T.cuda.half8tofloat8's source (bytes 0..15) and destination (bytes 8..39) overlap in "
         "'U'", "convert into other storage"),
        ("T.cuda.float22half2(H.ptr_to([0]), F.ptr_to([64]))",
         "index 64 is out of range for dimension 0 of extent 64 of 'F'", None),
    ],
)  # fmt: skip
def test_refusals_at_the_users_line(tmp_path, line, words, hint):
    src = f"""
    @T.function
    def k({_TENSORS}):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=4))
        t = T.cuda.thread_idx("x")
        p = T.address_of(F[0])
        {line}
    """
    with pytest.raises(TirxError) as e:
        tirx.compile(define(src, tmp_path, "k"), target="sim")
    text = str(e.value)
    assert words in text
    assert caret_line(text) == line
    if hint is not None:
        assert e.value.hint is not None and hint in e.value.hint, e.value.hint


def test_keywords_evaluate_and_a_variable_seen_through(tmp_path):
    src = """
    @T.function
    def k(X: T.Tensor((16,), "float16"), B: T.Tensor((16,), "float32")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=2))
        t = T.cuda.thread_idx("x")
        T.cuda.half8tofloat8(dst_addr=B.ptr_to([8 * t]), src_addr=X.ptr_to([8 * t]))
        T.evaluate(T.cuda.float22half2(X.ptr_to([8 * t]), src=B.ptr_to([8 * t + 2])))
    """
    x = np.arange(16, dtype=np.float16)
    b = np.zeros(16, np.float32)
    tirx.compile(define(src, tmp_path, "k"), target="sim")(x, b)
    np.testing.assert_array_equal(b, np.arange(16, dtype=np.float32))
    np.testing.assert_array_equal(x[[0, 1, 8, 9]], [2, 3, 10, 11])
    bad = """
    @T.function
    def k(F: T.Tensor((16,), "float32"), H: T.Tensor((16,), "float16")):
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=2))
        c = 4 * T.cuda.thread_idx("x") + 1
        T.cuda.float22half2(H.ptr_to([c + 1]), F.ptr_to([c]))
    """
    with pytest.raises(TirxError, match="source is misaligned") as e:
        tirx.compile(define(bad, tmp_path, "k"), target="sim")
    assert caret_line(str(e.value)) == "T.cuda.float22half2(H.ptr_to([c + 1]), F.ptr_to([c]))"


# ------------------------------------------------------------------------------ the GPU


def _sim_and_gpu(source: str, inputs, tmp_path):
    """Kernel ``source`` on the simulator and on the GPU, each on fresh ``inputs()``."""
    import torch

    k = define(source, tmp_path, "k")
    sim = inputs()
    tirx.compile(k, target="sim")(*sim)
    tensors = [torch.from_numpy(a).cuda() for a in inputs()]
    tirx.compile(k, target="cuda -arch=sm_90")(*tensors)
    torch.cuda.synchronize()
    return sim, [t.cpu().numpy() for t in tensors]


@pytest.mark.gpu
@pytest.mark.parametrize(
    "source, inputs",
    [(GLOBAL_SOURCE, _global_inputs), (STAGED_SOURCE, _staged_inputs)],
    ids=["global", "shared-and-local"],
)
def test_gpu_bits_equal_the_simulators(tmp_path, source, inputs):
    sim, gpu = _sim_and_gpu(source, inputs, tmp_path)
    for got, want in zip(gpu, sim):  # bit for bit, NaNs included
        bits = f"u{want.itemsize}"
        np.testing.assert_array_equal(got.view(bits), want.view(bits))
