"""Random scalar expressions, the simulator against the GPU: a seeded generator writes kernels
whose lanes each compute a dozen expressions over integer, float32, float16, bfloat16 and fp8
values (arithmetic, bitwise operations and shifts, comparisons and selects, conversions both
ways, bit reinterpretation, min/max, the exact math functions) and store them.

Every expression is defined behaviour in C (no signed overflow: signed sums and products take
operands shifted right first, products a small constant; shift counts are masked; signed
divisors are at least 2 in magnitude, unsigned ones odd), so the GPU's result is the one answer the
simulator must give: integers bit for bit, floats bit for bit except that a NaN need only be a
NaN (a NaN result's payload is not modelled, docs/simulator.md). Without a GPU the same kernels
must compile with NVRTC and simulate (no internal error, no refusal); the GPU test compares.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tirx
from tests.helpers import define

LANES = 64
KERNELS_CPU = 6  # compiled and simulated in every run
KERNELS_GPU = 40  # compared on the GPU
PER_KERNEL = 12

# the inputs: name -> dtype; each lane reads element i
INPUTS = {"A": "int32", "B": "uint32", "L": "int64", "F": "float32", "H": "float16",
          "G": "bfloat16", "E": "float8_e4m3fn"}  # fmt: skip
LEAVES = {"int": ["A[i]", "T.int32(i) - 32"], "uint": ["B[i]"], "int64": ["L[i]"],
          "float": ["F[i]", "H[i]", "G[i]", "T.float32(E[i])"]}  # fmt: skip


class _Gen:
    """Expressions as source text of a kind: "int" (int32), "uint" (uint32), "int64",
    "float" (float32 or narrower, computing as float32)."""

    def __init__(self, rng: random.Random):
        self.r = rng

    def expr(self, kind: str, depth: int) -> str:
        r = self.r
        if depth == 0 or r.random() < 0.25:
            return self.leaf(kind)
        return getattr(self, f"_{kind}")(depth - 1)

    def leaf(self, kind: str) -> str:
        r = self.r
        if r.random() < 0.2:
            return {"int": str(r.randint(-9, 9)), "uint": f"T.uint32({r.randint(0, 2**32 - 1)})",
                    "int64": f"T.int64({r.randint(-(2**40), 2**40)})",
                    "float": repr(r.choice([0.5, -1.25, 3.0, 1e-3, 65504.0, 1e30, -0.0]))}[kind]  # fmt: skip
        return r.choice(LEAVES[kind])

    # each kind's productions: one is drawn (r.choice), then it draws its own operands
    def _int(self, d: int) -> str:
        r, e = self.r, self.expr

        def small(bits: int) -> str:  # |x >> bits| < 2**(31 - bits): no signed overflow
            return f"({e('int', d)} >> {bits})"

        def divisor() -> str:  # never 0, 1 or -1 (INT_MIN / -1 overflows)
            y = f"(({e('int', d)} & 511) | 2)"
            return y if r.random() < 0.5 else f"(-{y})"

        return r.choice([
            lambda: f"({small(2)} + {small(2)})",
            lambda: f"({small(2)} - {small(2)})",
            lambda: f"({small(4)} * {r.randint(-7, 7)})",
            lambda: f"({e('int', d)} {r.choice(['&', '|', '^'])} {e('int', d)})",
            lambda: f"({e('int', d)} >> ({e('int', d)} & 31))",
            lambda: f"({e('int', d)} {r.choice(['//', '%'])} {divisor()})",
            lambda: f"{r.choice(['T.truncdiv', 'T.truncmod'])}({e('int', d)}, {divisor()})",
            lambda: f"T.{r.choice(['min', 'max'])}({e('int', d)}, {e('int', d)})",
            lambda: f"T.int32({e('float', d)})",  # truncates, saturating (cvt.rzi.s32.f32)
            lambda: f"T.int32(T.cast({e(r.choice(['float', 'int']), d)}, \"{r.choice(['int8', 'uint8', 'int16', 'uint16'])}\"))",
            lambda: f"T.if_then_else({self.cond(d)}, {e('int', d)}, {e('int', d)})",
        ])()  # fmt: skip

    def _uint(self, d: int) -> str:
        r, e = self.r, self.expr
        u = "T.uint32"
        return r.choice([
            lambda: f"({e('uint', d)} {r.choice(['+', '-', '*'])} {e('uint', d)})",
            lambda: f"({e('uint', d)} {r.choice(['&', '|', '^'])} {e('uint', d)})",
            lambda: f"({e('uint', d)} {r.choice(['<<', '>>'])} ({e('uint', d)} & {u}(31)))",
            lambda: f"({e('uint', d)} {r.choice(['//', '%'])} ({e('uint', d)} | {u}(1)))",
            lambda: f'T.cast({e("int", d)}, "uint32")',
            # of a value read or converted, not computed: a computed NaN's payload is the one
            # thing the simulator does not model (docs/simulator.md)
            lambda: f'T.reinterpret(T.float32({r.choice(LEAVES["float"])}), ty="uint32")',
            lambda: f"{u}(T.reinterpret(T.{r.choice(['float16', 'bfloat16'])}({e('float', d)}), ty=\"uint16\"))",
            lambda: f"{u}({e('float', d)})",  # cvt.rzi.u32.f32, saturating
        ])()  # fmt: skip

    def _int64(self, d: int) -> str:
        r, e = self.r, self.expr
        return r.choice([
            # shifted first: an int64 of a float saturates to the extremes, and a sum there
            # overflows (undefined in C; the simulator stops)
            lambda: f"(({e('int64', d)} >> 2) {r.choice(['+', '-'])} T.int64({e('int', d)}))",
            lambda: f"({e('int64', d)} {r.choice(['&', '|', '^'])} {e('int64', d)})",
            lambda: f"({e('int64', d)} >> (T.int64({e('int', d)}) & T.int64(63)))",
            lambda: f"T.int64({e('uint', d)})",
            lambda: f"T.int64({e('float', d)})",
            lambda: f'T.int64(T.cast({e("float", d)}, "uint64"))',  # (a NaN: unmeasured yet)
            lambda: f'T.int64(T.cast(T.float64({e("float", d)}) * 1e10, "int64"))',
        ])()  # fmt: skip

    def _f32(self, d: int) -> str:
        return f"T.float32({self.expr('float', d)})"

    def _arith(self, d: int) -> str:
        r, e = self.r, self.expr
        op, rhs = r.choice(["+", "-", "*", "/", "//", "%"]), e("float", d)
        if op in ("/", "//", "%") and rhs.lstrip("-")[:1].isdigit():
            rhs = "F[i]"  # not a literal: a constant zero divisor is refused, by design
        return f"({e('float', d)} {op} {rhs})"

    def _narrow(self, d: int) -> str:
        t = self.r.choice(["float16", "bfloat16", "float8_e4m3fn", "float8_e5m2"])
        cast = f"T.{t}({self.expr(self.r.choice(['float', 'float', 'int', 'uint']), d)})"
        return f"T.float32({cast})" if t.startswith("float8") else cast  # fp8 only stores

    def _float(self, d: int) -> str:
        r, e, f = self.r, self.expr, self._f32
        bits16 = "T.uint16({0} & T.uint32(65535))"
        return r.choice([
            lambda: self._arith(d),
            lambda: f"{r.choice(['T.sqrt', 'T.fabs', 'T.floor', 'T.ceil', 'T.trunc'])}({f(d)})",
            lambda: f"T.fma({f(d)}, {f(d)}, {f(d)})",
            lambda: f"T.{r.choice(['min', 'max'])}({f(d)}, {f(d)})",
            lambda: self._narrow(d),
            lambda: f"T.float32({e(r.choice(['int', 'uint', 'int64']), d)})",
            lambda: f'T.reinterpret({e("uint", d)}, ty="float32")',
            lambda: f"T.float32(T.reinterpret({bits16.format(e('uint', d))}, ty=\"{r.choice(['float16', 'bfloat16'])}\"))",
            lambda: f"T.if_then_else({self.cond(d)}, {f(d)}, {f(d)})",
            lambda: f"T.float32(T.float64({e('float', d)}) * T.float64({e('float', d)}))",
            lambda: f"(-{e('float', d)})",
        ])()  # fmt: skip

    def cond(self, d: int) -> str:
        r = self.r
        kind = r.choice(["int", "uint", "float"])
        op = r.choice(["<", "<=", "==", "!=", ">", ">="])
        c = f"({self.expr(kind, d)} {op} {self.expr(kind, d)})"
        if r.random() < 0.3:
            c = f"({c} {r.choice(['and', 'or'])} ({self.expr('int', d)} > 0))"
        return c


def _kernel_source(seed: int) -> tuple[str, list[str]]:
    gen = _Gen(random.Random(seed))
    lines, kinds = [], []
    for n in range(PER_KERNEL):
        kind = ["int", "uint", "int64", "float"][n % 4]
        e = gen.expr(kind, 3)
        if kind == "float":
            lines.append(f"    Of[{n // 4}, i] = T.float32({e})")
        else:
            lines.append(f"    Oi[{n // 4 * 3 + n % 4}, i] = T.int64({e})")
        kinds.append(kind)
    params = ", ".join(f'{k}: T.Tensor(({LANES},), "{d}")' for k, d in INPUTS.items())
    text = (
        "@T.function\n"
        f'def k({params}, Oi: T.Tensor(({PER_KERNEL // 4 * 3}, {LANES}), "int64"), '
        f'Of: T.Tensor(({PER_KERNEL // 4}, {LANES}), "float32")):\n'
        f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={LANES}))\n"
        '    i = T.cuda.thread_idx("x")\n' + "\n".join(lines) + "\n"
    )
    return text, lines


def _inputs(seed: int):
    """Numpy arrays (bfloat16 and fp8 as their bits: uint16, uint8) and the two outputs."""
    rng = np.random.default_rng(seed)
    a = rng.integers(-1000, 1000, LANES).astype(np.int32)
    a[:4] = [0, -1, 2**31 - 1, -(2**31)]
    b = rng.integers(0, 2**32, LANES, dtype=np.uint64).astype(np.uint32)
    b[:3] = [0, 1, 2**32 - 1]
    long = rng.integers(-(2**40), 2**40, LANES).astype(np.int64)
    f = (rng.standard_normal(LANES) * 10.0 ** rng.integers(-6, 7, LANES)).astype(np.float32)
    f[:8] = [0.0, -0.0, np.inf, -np.inf, np.nan, 1e-40, 3e38, 0.5]
    h = (rng.standard_normal(LANES) * 100).astype(np.float16)
    h[:3] = [np.inf, np.nan, 6e-8]
    g = (f.view(np.uint32) >> 16).astype(np.uint16)  # bfloat16 bits of f, truncated
    e = rng.integers(0, 256, LANES).astype(np.uint8)
    return [a, b, long, f, h, g, e, np.zeros((PER_KERNEL // 4 * 3, LANES), np.int64),
            np.zeros((PER_KERNEL // 4, LANES), np.float32)]  # fmt: skip


def _kernel(seed: int, tmp_path):
    text, _ = _kernel_source(seed)
    return define(text, tmp_path, "k")


def _simulate(k, seed: int):
    args = _inputs(seed)
    tirx.compile(k, target="sim")(*args)
    return args[-2], args[-1]


@pytest.mark.parametrize("seed", range(KERNELS_CPU))
def test_random_expressions_compile_and_simulate(seed, tmp_path):
    k = _kernel(seed, tmp_path)
    oi, of = _simulate(k, seed)
    assert oi.shape == (PER_KERNEL // 4 * 3, LANES) and of.shape == (PER_KERNEL // 4, LANES)
    exe = tirx.compile(k, target="cuda -arch=sm_90")
    assert ".entry k" in exe.ptx


def _torch_inputs(seed: int):
    import torch

    arrays = _inputs(seed)
    out = [torch.from_numpy(a).cuda() for a in arrays]
    out[5] = out[5].view(torch.bfloat16)
    out[6] = out[6].view(torch.float8_e4m3fn)
    return out


@pytest.mark.gpu
def test_gpu_random_expressions_equal_the_simulator(tmp_path):
    """Each differing expression is listed with its lanes' values, GPU and simulator."""
    import torch

    differ = []
    for seed in range(KERNELS_GPU):
        k = _kernel(seed, tmp_path)
        oi, of = _simulate(k, seed)
        args = _torch_inputs(seed)
        tirx.compile(k, target="cuda")(*args)
        torch.cuda.synchronize()
        gi, gf = args[-2].cpu().numpy(), args[-1].cpu().numpy()
        _, lines = _kernel_source(seed)
        for n, line in enumerate(lines):
            if n % 4 == 3:
                got, want = gf[n // 4], of[n // 4]
                nan = np.isnan(got) & np.isnan(want)
                bad = ~nan & (got.view(np.uint32) != want.view(np.uint32))
            else:
                got, want = gi[n // 4 * 3 + n % 4], oi[n // 4 * 3 + n % 4]
                bad = got != want
            if bad.any():
                lane = int(np.argmax(bad))
                differ.append(f"seed {seed}: {line.strip()}\n  lane {lane}: GPU {got[lane]!r} "
                              f"sim {want[lane]!r} ({int(bad.sum())} lanes differ)")  # fmt: skip
    assert not differ, "\n".join(differ)


# ----------------------------------------------------------- folding keeps the run-time value

# (template, constants): each expression computed once from literals (folded when the kernel
# is built) and once from the same values read from a tensor (computed as the kernel runs)
FOLDED = [
    ("T.float32({0}) + T.float32({1}) + T.float32({1})", (16777216.0, 1.0)),
    ("T.float32({0}) * T.float32({1}) - T.float32({0})", (1.0000001, 3.0)),
    ("T.float32({0}) // T.float32({1})", (1.0, 0.1)),
    ("T.float32({0}) % T.float32({1})", (1.0, 0.1)),
    ("T.float32({0}) % T.float32({1})", (-7.5, 2.0)),
    ("T.float32({0}) / T.float32({1})", (1.0, 3.0)),
    ("T.float32(T.int32(T.float32({0})))", (1e30,)),
    ("T.float32(T.int32(T.float32({0})))", (-3e9,)),
    ("T.float32(T.uint32(T.float32({0})))", (-2.5,)),
    ("T.float32(T.uint8(T.float32({0})))", (300.0,)),
    ("T.float32(T.int64(T.float32({0})))", (1e30,)),
    ("T.float32(T.float16(T.float32({0})))", (0.1,)),
    ("T.float32(T.float16(T.float32({0})))", (1e6,)),
    ("T.float32(T.float64(T.float32({0})) * T.float64(T.float32({1})))", (0.1, 0.2)),
]


def test_constant_folding_gives_the_run_time_value(tmp_path):
    """Folding a constant expression when the kernel is built gives what the same operations
    compute at run time (float32 rounding at each step, C's float floor division, saturating
    float-to-integer conversion), on both targets: the simulator runs both forms, and the C of
    the folded form holds the constant."""
    n = len(FOLDED)
    folded = "\n".join(
        f"    O[0, {k}] = {t.format(*map(repr, c))}" for k, (t, c) in enumerate(FOLDED)
    )
    loaded = "\n".join(
        f"    O[1, {k}] = {t.format(*(f'V[{k}, {j}]' for j in range(len(c))))}"
        for k, (t, c) in enumerate(FOLDED)
    )  # fmt: skip
    text = (f'@T.function\ndef k(V: T.Tensor(({n}, 2), "float32"), O: T.Tensor((2, {n}), "float32")):\n'
            "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))\n"
            f"{folded}\n{loaded}\n")  # fmt: skip
    k = define(text, tmp_path, "k")
    v = np.zeros((n, 2), np.float32)
    for i, (_, c) in enumerate(FOLDED):
        v[i, : len(c)] = c
    o = np.zeros((2, n), np.float32)
    tirx.compile(k, target="sim")(v, o)
    np.testing.assert_array_equal(o[0].view(np.uint32), o[1].view(np.uint32))
    assert o[0, 0] == 16777216.0 and o[0, 2] == 10.0 and o[0, 3] == 0.0
    assert o[0, 6] == 2**31 - 1 and o[0, 8] == 0.0 and o[0, 9] == 300 % 256  # via 32 bits
    body = tirx.compile(k, target="cuda -arch=sm_90").source.split('extern "C"')[1]
    assert "O[0] = 0x1.0000000000000p+24f;" in body and "O[2] = 10.0f;" in body  # folded


def _literal(name: str, value) -> str:
    """Source text of the constant ``value`` of input ``name`` (one lane's element)."""
    if name in ("A", "B", "L"):
        return f"T.{INPUTS[name]}({int(value)})"
    if name == "F" and np.isfinite(value):
        return f"T.float32({float(value)!r})"
    if name == "H" and np.isfinite(value):
        return f"T.float16({float(value)!r})"
    bits = {"F": ("uint32", np.float32), "H": ("uint16", np.float16)}.get(name)
    if bits is not None:  # an infinity or NaN: its bits
        return f'T.reinterpret(T.{bits[0]}({int(np.asarray(value, bits[1]).view(bits[0]))}), ty="{INPUTS[name]}")'
    width = "uint16" if name == "G" else "uint8"
    return f'T.reinterpret(T.{width}({int(value)}), ty="{INPUTS[name]}")'


@pytest.mark.parametrize("seed", range(KERNELS_CPU))
def test_folding_a_random_expression_gives_its_run_time_value(seed, tmp_path):
    """Each expression of a fuzz kernel again with one lane's inputs written as constants, so
    that the kernel's builder folds what it can: the simulator's result is the lane's own, bit
    for bit (a NaN a NaN). An expression whose folding is refused (a constant zero divisor,
    where the run-time division gives an infinity) is skipped."""
    _, lines = _kernel_source(seed)
    lane = (7 * seed + 5) % LANES
    args = _inputs(seed)
    k = _kernel(seed, tmp_path)
    tirx.compile(k, target="sim")(*args)
    oi, of = args[-2], args[-1]
    values = dict(zip(INPUTS, (a[lane] for a in args)))
    checked = 0
    for line in lines:
        target, expr = line.strip().split(" = ", 1)
        for name in INPUTS:
            expr = expr.replace(f"{name}[i]", _literal(name, values[name]))
        expr = expr.replace("T.int32(i)", f"T.int32({lane})")
        out_dtype = "float32" if target.startswith("Of") else "int64"
        text = (f'@T.function\ndef c(O: T.Tensor((1,), "{out_dtype}")):\n'
                "    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=1))\n"
                f"    O[0] = {expr}\n")  # fmt: skip
        try:
            c = define(text, tmp_path, "c")
            out = np.zeros(1, np.dtype(out_dtype))
            tirx.compile(c, target="sim")(out)
        except tirx.TirxError as e:
            assert "division by zero in a constant expression" in str(e), (line, str(e))
            continue
        row, col = target[3:-4].split(", ")[0], lane
        want = (of if out_dtype == "float32" else oi)[int(row), col]
        if out_dtype == "float32" and np.isnan(want):
            assert np.isnan(out[0]), line
        else:
            assert out[0] == want and np.signbit(out[0]) == np.signbit(want), (line, out[0], want)
        checked += 1
    assert checked >= PER_KERNEL // 2


def test_a_float_to_8_or_16_bits_goes_through_32_bits_in_the_ptx(tmp_path):
    """The rule the simulator and the folder follow, read from NVRTC's PTX: a float stored as
    uint8 (int16) is converted by ``cvt.rzi.u32.f32`` (``cvt.rzi.s32.f32``), saturating at 32
    bits, and its low bits are stored: 300.0 becomes 44 in a uint8, 1e10 255, -200.0 0."""
    k = define(
        """
        @T.function
        def k(F: T.Tensor((8,), "float32"), U: T.Tensor((8,), "uint8"),
              S: T.Tensor((8,), "int16")):
            T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=8))
            i = T.cuda.thread_idx("x")
            U[i] = T.uint8(F[i])
            S[i] = T.int16(F[i])
        """,
        tmp_path,
        "k",
    )
    ptx = tirx.compile(k, target="cuda -arch=sm_90").ptx
    assert "cvt.rzi.u32.f32" in ptx and "st.global.u8" in ptx
    assert "cvt.rzi.s32.f32" in ptx and "st.global.u16" in ptx
    assert ".sat" not in ptx and "cvt.rzi.u8" not in ptx and "cvt.rzi.s16" not in ptx
    f = np.array([300, -5, 1e10, np.nan, 127.9, -200, 70000, -70000], np.float32)
    u, s = np.zeros(8, np.uint8), np.zeros(8, np.int16)
    tirx.compile(k, target="sim")(f, u, s)
    np.testing.assert_array_equal(u, [44, 0, 255, 0, 127, 0, 70000 % 256, 0])
    np.testing.assert_array_equal(s, [300, -5, -1, 0, 127, -200, 4464, -4464])
