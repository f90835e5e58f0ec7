"""The register-only float instructions (tirx/families/float_ops/): ``ex2``, ``lg2``, ``sin``,
``cos``, ``tanh``, ``rcp``, ``rsqrt`` ``.approx{.ftz}.f32`` and ``max``/``min{.ftz}{.NaN}.f32``.

Their forms, the golden CUDA and what NVRTC makes of it, the simulator against models written
here from the PTX ISA's text (Python's ``math`` for the functions, the ISA's tables of special
values, its NaN and signed-zero rules for max and min), the misuses caught at the user's line,
the real TIRx's spelling (``reference``), and the GPU against the simulator (``gpu``): within
the ISA's maximum error for the approximations, bit for bit for max and min.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

import tirx
from tirx import isa
from tirx.errors import ContractError
from tirx.families.float_ops.sim_values import BOUNDS, within_bound
from tirx.isa import Family, Role

from .helpers import caret_text, define, reference_cuda

INF, NAN = math.inf, math.nan
FUNCTIONS = ("ex2", "lg2", "sin", "cos", "tanh", "rcp", "rsqrt")
UNARY = [
    f"{f}.approx{ftz}.f32" for f in FUNCTIONS for ftz in ("", ".ftz") if f != "tanh" or not ftz
]
BINARY = [f"{op}{ftz}{nan}.f32" for op in ("max", "min") for ftz in ("", ".ftz") for nan in ("", ".NaN")]  # fmt: skip
FORMS = UNARY + BINARY

SUB = float(np.float32(1e-40))  # a float32 subnormal
TINY = 2.0**-149  # the smallest one


def forms_source(forms=FORMS, n=64, chains=False) -> str:
    """``O[k, i]``: form ``k`` applied to ``X[i]`` (and ``Y[i]``), through a register."""
    lines = []
    for k, text in enumerate(forms):
        call = f"T.ptx.{text}" if chains else f'T.ptx["{text}"]'
        args = "s[0], X[i], Y[i]" if text.split(".")[0] in ("max", "min") else "s[0], X[i]"
        lines += [f"    {call}({args})", f"    O[{k}, i] = s[0]"]
    return (
        "@T.function\n"
        f'def k(X: T.Tensor(({n},), "float32"), Y: T.Tensor(({n},), "float32"),\n'
        f'      O: T.Tensor(({len(forms)}, {n}), "float32")):\n'
        f"    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={n}))\n"
        '    i = T.cuda.thread_idx("x")\n'
        '    s = T.alloc_local((1,), "float32")\n' + "\n".join(lines) + "\n"
    )


def forms_kernel(tmp_path, forms=FORMS, n=64, chains=False):
    return define(forms_source(forms, n, chains), tmp_path, "k")


def run_sim(kernel, x, y, nforms: int):
    out = np.zeros((nforms, x.size), np.float32)
    tirx.compile(kernel, target="sim")(x, y, out)
    return out


def ulps(a, b) -> np.ndarray:
    """float32 steps between a and b (±0 coincide; 0 for two NaNs, inf for one)."""
    ia, ib = (np.asarray(v, np.float32).view(np.int32).astype(np.int64) for v in (a, b))
    oa, ob = (np.where(i < 0, -(2**31) - i, i) for i in (ia, ib))
    d = np.abs(oa - ob).astype(float)
    na, nb = np.isnan(a), np.isnan(b)
    return np.where(na & nb, 0, np.where(na | nb, INF, d))


# ---------------------------------------------------------------- models from the ISA text

# Each function's table of special results (PTX ISA 9.7.3.13-22, the notes under each), and
# -2.5 for the negative inputs outside lg2's and rsqrt's domain.
SPECIALS = {
    "ex2": [(-INF, 0.0), (-0.0, 1.0), (0.0, 1.0), (INF, INF), (NAN, NAN)],
    "lg2": [(-INF, NAN), (-2.5, NAN), (-0.0, -INF), (0.0, -INF), (INF, INF), (NAN, NAN)],
    "sin": [(-INF, NAN), (-0.0, -0.0), (0.0, 0.0), (INF, NAN), (NAN, NAN)],
    "cos": [(-INF, NAN), (-0.0, 1.0), (0.0, 1.0), (INF, NAN), (NAN, NAN)],
    "tanh": [(-INF, -1.0), (-0.0, -0.0), (0.0, 0.0), (INF, 1.0), (NAN, NAN)],
    "rcp": [(-INF, -0.0), (-0.0, -INF), (0.0, INF), (INF, 0.0), (NAN, NAN)],
    "rsqrt": [(-INF, NAN), (-2.5, NAN), (-0.0, -INF), (0.0, INF), (INF, 0.0), (NAN, NAN)],
}


def _exact(op: str, x: float) -> float:
    """``op`` at a finite nonzero ``x`` in its domain, in float64 (Python's math)."""
    if op == "ex2":
        return INF if x > 200 else 0.0 if x < -200 else 2.0**x
    return {
        "lg2": math.log2, "sin": math.sin, "cos": math.cos, "tanh": math.tanh,
        "rcp": lambda v: 1.0 / v, "rsqrt": lambda v: 1.0 / math.sqrt(v),
    }[op](x)  # fmt: skip


def flushed(v: float) -> float:
    """``.ftz`` of a float32 value: a subnormal becomes zero of its sign."""
    return math.copysign(0.0, v) if 0 < abs(v) < 2.0**-126 else v


def f32(v: float) -> float:
    with np.errstate(over="ignore"):
        return float(np.array(v).astype(np.float32))


def model_approx(op: str, x: float, ftz: bool) -> float:
    x = flushed(x) if ftz else x
    for s, want in SPECIALS[op]:
        if (math.isnan(s) and math.isnan(x)) or (
            s == x and math.copysign(1, s) == math.copysign(1, x)
        ):
            return want
    if x < 0 and op in ("lg2", "rsqrt"):
        return NAN
    y = f32(_exact(op, x))
    return flushed(y) if ftz else y


def model_minmax(op: str, a: float, b: float, ftz: bool, nan: bool) -> float:
    """PTX ISA 9.7.3.11-12: max_num / max_nan, -0 < +0, .ftz on the operands."""
    if ftz:
        a, b = flushed(a), flushed(b)
    if math.isnan(a) or math.isnan(b):
        if nan or (math.isnan(a) and math.isnan(b)):
            return NAN
        return b if math.isnan(a) else a
    if a == b:  # equal values differ only as ±0: +0 is the larger
        neg_a = math.copysign(1, a) < 0
        return (b if neg_a else a) if op == "max" else (a if neg_a else b)
    return max(a, b) if op == "max" else min(a, b)


def model(text: str, x: np.ndarray, y: np.ndarray) -> np.ndarray:
    op, mods = text.split(".")[0], text.split(".")[1:]
    ftz = "ftz" in mods
    if op in ("max", "min"):
        vals = [model_minmax(op, float(a), float(b), ftz, "NaN" in mods) for a, b in zip(x, y)]
    else:
        vals = [model_approx(op, float(a), ftz) for a in x]
    return np.array(vals, dtype=np.float32)


def same_bits_or_nan(got, want) -> np.ndarray:
    """Bit-equal, or both NaN (the payload of a NaN result is not compared)."""
    got, want = np.asarray(got, np.float32), np.asarray(want, np.float32)
    return (got.view(np.uint32) == want.view(np.uint32)) | (np.isnan(got) & np.isnan(want))


# ------------------------------------------------------------------------------ inputs


def approx_inputs(seed: int = 0, n: int = 256) -> np.ndarray:
    """The special values, subnormals, and values over the functions' useful ranges (none
    where an .ftz result would sit at the edge of the normal range, whose flush the GPU's
    last bit decides)."""
    rng = np.random.default_rng(seed)
    special = [0.0, -0.0, INF, -INF, NAN, SUB, -SUB, TINY, -TINY, 2.0**-126, -(2.0**-126)]
    special += [1.0, -1.0, 0.5, 2.0, -2.5, 1e30, -1e30, 3e38, math.pi, -math.pi / 2]
    k = (n - len(special)) // 3
    mags = 2.0 ** rng.uniform(-20, 20, k) * rng.choice([-1, 1], k)
    mags = np.where((mags > -127.5) & (mags < -124.5), mags / 2, mags)  # ex2's flush edge
    near_one = rng.uniform(0.5, 2.0, k)  # lg2's absolute-error range
    wide = rng.uniform(-100 * math.pi, 100 * math.pi, n - len(special) - 2 * k)
    return np.concatenate([special, mags, near_one, wide]).astype(np.float32)


def minmax_inputs(seed: int = 0, n: int = 128):
    """Pairs that exercise every rule: NaNs, signed zeros, subnormals, infinities, equals."""
    vals = [NAN, 0.0, -0.0, SUB, -SUB, TINY, INF, -INF, 1.0, -1.0]
    pairs = [(a, b) for a in vals for b in vals]  # 100 pairs
    rng = np.random.default_rng(seed)
    rest = rng.normal(0, 10, (n - len(pairs), 2))
    rest[::4, 1] = rest[::4, 0]  # some equal pairs
    x = np.array([a for a, _ in pairs] + list(rest[:, 0]), np.float32)
    y = np.array([b for _, b in pairs] + list(rest[:, 1]), np.float32)
    return x, y


# ------------------------------------------------------------------------------ forms


def test_the_forms_and_their_contracts():
    mine = {m for m in FUNCTIONS} | {"max", "min"}
    forms = [t for t in isa.supported_forms() if t.split(".")[0] in mine]
    assert sorted(forms) == sorted(FORMS) and len(forms) == 21
    for text in FORMS:
        c = tirx.instruction_contract(text)
        assert c.family is Family(text.split(".")[0])
        assert [(o.name, o.role, o.dtype) for o in c.operands][:2] == [
            ("d", Role.REG_OUT, "float32"), ("a", Role.REG_IN, "float32"),
        ]  # fmt: skip
    assert tirx.instruction_contract("tanh.approx.f32").min_arch == 75
    assert tirx.instruction_contract("max.NaN.f32").min_arch == 80
    assert tirx.instruction_contract("min.ftz.f32").min_arch < 80
    with pytest.raises(ContractError, match="has no .ftz") as info:
        tirx.instruction_contract("tanh.approx.ftz.f32")
    assert "tanh.approx.f32" in info.value.hint
    with pytest.raises(ContractError, match="expected .approx"):
        tirx.instruction_contract("ex2.f32")


def test_the_bounds_are_the_isas():
    assert BOUNDS["ex2"].ulps == 2 and BOUNDS["rcp"].ulps == 1
    assert BOUNDS["rsqrt"].relative == 2**-22.9 and BOUNDS["tanh"].relative == 2**-11
    assert BOUNDS["lg2"].relative == 2**-22 and BOUNDS["lg2"].absolute == ((0.5, 2.0, 2**-22),)
    for op in ("sin", "cos"):
        (lo, hi, near), (lo2, hi2, far) = BOUNDS[op].absolute
        assert (near, far) == (2**-20.5, 2**-14.7)
        assert math.isclose(hi, 2 * math.pi) and math.isclose(hi2, 100 * math.pi) and lo == -hi


# ---------------------------------------------------------------------------- CUDA


def test_golden_cuda_and_nvrtc_builds_it_for_sm_90(tmp_path):
    exe = tirx.compile(forms_kernel(tmp_path), target="cuda -arch=sm_90")
    lines = [ln.strip() for ln in exe.source.splitlines() if ln.strip().startswith("asm(")]
    x, y = "X[((int)threadIdx.x)]", "Y[((int)threadIdx.x)]"
    want = []
    for text in FORMS:
        if text.split(".")[0] in ("max", "min"):
            want.append(f'asm("{text} %0, %1, %2;" : "=f"(s[0]) : "f"({x}), "f"({y}));')
        else:
            want.append(f'asm("{text} %0, %1;" : "=f"(s[0]) : "f"({x}));')
    assert lines == want
    assert "volatile" not in "".join(lines) and '"memory"' not in "".join(lines)
    assert exe.cubin  # ptxas took every form
    for text in FORMS:
        assert text in exe.ptx
    if exe.sass is not None:  # the disassembler is installed: the special function unit
        assert "MUFU.EX2" in exe.sass and "MUFU.TANH" in exe.sass and "FMNMX" in exe.sass


def test_both_spellings_and_an_aliased_destination(tmp_path):
    """``T.ptx.ex2.approx.ftz.f32`` is ``T.ptx["ex2.approx.ftz.f32"]``; ``d`` may be ``a``."""
    chained = tirx.compile(forms_kernel(tmp_path, chains=True), "cuda -arch=sm_90").source
    indexed = tirx.compile(forms_kernel(tmp_path), "cuda -arch=sm_90").source
    strip = re.compile(r'#line \d+ "[^"]*"')
    assert strip.sub("", chained) == strip.sub("", indexed)
    kernel = define(ALIASED, tmp_path, "k")
    src = tirx.compile(kernel, "cuda -arch=sm_90").source
    assert 'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(s[0]) : "f"(s[0]));' in src
    assert 'asm("max.f32 %0, %1, %2;" : "=f"(s[1]) : "f"(s[0]), "f"(s[1]));' in src
    x = approx_inputs()[:64]
    out = np.zeros((2, 64), np.float32)
    tirx.compile(kernel, "sim")(x, out)
    e = model("ex2.approx.ftz.f32", x, x)
    assert (ulps(out[0], e) <= 1).all()
    lower = model("min.f32", x, np.zeros_like(x))  # s[1] = min(X[i], 0)
    assert same_bits_or_nan(out[1], model("max.f32", out[0], lower)).all()


ALIASED = """
@T.function
def k(X: T.Tensor((64,), "float32"), O: T.Tensor((2, 64), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    i = T.cuda.thread_idx("x")
    s = T.alloc_local((2,), "float32")
    s[0] = X[i]
    T.ptx["ex2.approx.ftz.f32"](s[0], s[0])
    O[0, i] = s[0]
    T.ptx["min.f32"](s[1], X[i], 0)
    T.ptx["max.f32"](s[1], s[0], s[1])
    O[1, i] = s[1]
"""


# ----------------------------------------------------------------------- simulator


def test_the_special_values_are_the_isas_tables(tmp_path):
    """Every function at each input its ISA table lists, with and without .ftz: the value,
    the sign of a zero, NaN."""
    forms = UNARY
    xs = [-INF, -2.5, -0.0, 0.0, INF, NAN]  # every input of the tables
    x = np.array(xs + [0.0] * (32 - len(xs)), np.float32)
    out = run_sim(forms_kernel(tmp_path, forms, n=32), x, x, len(forms))
    for k, text in enumerate(forms):
        op = text.split(".")[0]
        for s, want in SPECIALS[op]:
            j = next(j for j, v in enumerate(xs) if (math.isnan(v) and math.isnan(s)) or (
                v == s and math.copysign(1, v) == math.copysign(1, s)))  # fmt: skip
            got = float(out[k, j])
            assert same_bits_or_nan(got, want), (text, s, got, want)


def test_ftz_flushes_inputs_and_results(tmp_path):
    forms = ["ex2.approx.f32", "ex2.approx.ftz.f32", "lg2.approx.f32", "lg2.approx.ftz.f32",
             "rcp.approx.f32", "rcp.approx.ftz.f32", "rsqrt.approx.f32", "rsqrt.approx.ftz.f32",
             "sin.approx.f32", "sin.approx.ftz.f32", "tanh.approx.f32"]  # fmt: skip
    x = np.array([SUB, -SUB, -130.0, 3e38] + [1.0] * 28, np.float32)
    o = run_sim(forms_kernel(tmp_path, forms, n=32), x, x, len(forms))
    r = {t: o[k, :4] for k, t in enumerate(forms)}
    assert r["ex2.approx.f32"][0] == 1.0 and r["ex2.approx.ftz.f32"][0] == 1.0
    assert r["ex2.approx.f32"][2] == np.float32(2.0**-130)  # a subnormal result is kept
    assert r["ex2.approx.ftz.f32"][2] == 0 and not np.signbit(r["ex2.approx.ftz.f32"][2])
    assert math.isclose(r["lg2.approx.f32"][0], math.log2(SUB), rel_tol=1e-6)
    assert r["lg2.approx.ftz.f32"][0] == -INF and r["lg2.approx.ftz.f32"][1] == -INF
    assert math.isclose(r["rcp.approx.f32"][2], -1 / 130, rel_tol=1e-6)
    assert r["rcp.approx.f32"][0] == INF  # 1 / 1e-40 overflows float32
    assert r["rcp.approx.ftz.f32"][1] == -INF  # -subnormal -> -0 -> -inf
    assert r["rcp.approx.f32"][3] == np.float32(1 / 3e38) and r["rcp.approx.f32"][3] != 0
    assert r["rcp.approx.ftz.f32"][3] == 0  # the subnormal result flushed
    assert np.isnan(r["rsqrt.approx.f32"][1]) and r["rsqrt.approx.ftz.f32"][1] == -INF
    assert r["sin.approx.f32"][0] == np.float32(SUB)  # sin(x) rounds to x there
    assert r["sin.approx.ftz.f32"][1] == 0 and np.signbit(r["sin.approx.ftz.f32"][1])
    assert r["tanh.approx.f32"][1] == np.float32(-SUB)  # tanh keeps subnormals


def test_max_min_nan_and_signed_zero_rules(tmp_path):
    out = run_sim(forms_kernel(tmp_path, BINARY, n=8), *_rule_pairs(), len(BINARY))
    want = {  # (max, min) for each pair of _rule_pairs, from the ISA's semantics
        "": [
            (1.0, 1.0),
            (NAN, NAN),
            (0.0, -0.0),
            (0.0, -0.0),
            (SUB, -0.0),
            (0.0, -SUB),
            (INF, -INF),
            (2.0, 2.0),
        ],
        ".NaN": [
            (NAN, NAN),
            (NAN, NAN),
            (0.0, -0.0),
            (0.0, -0.0),
            (SUB, -0.0),
            (0.0, -SUB),
            (INF, -INF),
            (NAN, NAN),
        ],
        ".ftz": [
            (1.0, 1.0),
            (NAN, NAN),
            (0.0, -0.0),
            (0.0, -0.0),
            (0.0, -0.0),
            (0.0, -0.0),
            (INF, -INF),
            (2.0, 2.0),
        ],
    }
    for k, text in enumerate(BINARY):
        op, mods = text.split(".")[0], text.split(".")[1:-1]
        key = ".NaN" if "NaN" in mods else ".ftz" if "ftz" in mods else ""
        if mods == ["ftz", "NaN"]:
            rows = [(NAN, NAN) if i in (0, 1, 7) else p for i, p in enumerate(want[".ftz"])]
        else:
            rows = want[key]
        expect = [p[0] if op == "max" else p[1] for p in rows]
        assert same_bits_or_nan(out[k], np.array(expect, np.float32)).all(), (text, out[k])
        assert same_bits_or_nan(out[k], model(text, *_rule_pairs())).all(), text


def _rule_pairs():
    """NaN vs a number, two NaNs, ±0 both ways, a subnormal vs -0, ±inf, NaN vs 2."""
    a = [NAN, NAN, -0.0, 0.0, SUB, -SUB, INF, 2.0]
    b = [1.0, NAN, 0.0, -0.0, -0.0, 0.0, -INF, NAN]
    return np.array(a, np.float32), np.array(b, np.float32)


def test_each_form_against_the_isa_model(tmp_path):
    """The approximations within a step of the model (both round a float64 value once; the
    simulator claims no more than the ISA's bound from the GPU, and is within that of the
    model too); max and min bit for bit."""
    x = approx_inputs()
    out = run_sim(forms_kernel(tmp_path, UNARY, n=x.size), x, x, len(UNARY))
    for k, text in enumerate(UNARY):
        want = model(text, x, x)
        d = ulps(out[k], want)
        assert d.max() <= 1, (text, x[np.argmax(d)], out[k][np.argmax(d)], want[np.argmax(d)])
        op, ftz = text.split(".")[0], ".ftz" in text
        assert within_bound(op, x, out[k], want, ftz).all(), text
    mx, my = minmax_inputs()
    out = run_sim(forms_kernel(tmp_path, BINARY, n=mx.size), mx, my, len(BINARY))
    for k, text in enumerate(BINARY):
        assert same_bits_or_nan(out[k], model(text, mx, my)).all(), text


def test_a_wrong_function_is_outside_the_bound():
    """The bound comparison can fail: ex2 against 2^(x + 1e-6), sin against sin plus its
    bound twice over, NaN against a number."""
    x = np.linspace(-3, 3, 101, dtype=np.float32)
    good = np.exp2(x.astype(np.float64)).astype(np.float32)
    assert within_bound("ex2", x, good, good, False).all()
    off = np.exp2(x.astype(np.float64) + 1e-6).astype(np.float32)
    assert not within_bound("ex2", x, off, good, False).all()
    s = np.sin(x.astype(np.float64))
    assert not within_bound(
        "sin", x, (s + 2**-19.5).astype(np.float32), s.astype(np.float32), False
    ).all()  # noqa: E501
    assert not within_bound("tanh", x[:1], np.float32([NAN]), np.tanh(x[:1]), False).all()


def test_raw_calls_in_an_unrolled_loop(tmp_path):
    kernel = define(UNROLLED, tmp_path, "k")
    src = tirx.compile(kernel, "cuda -arch=sm_90").source
    for j in range(4):
        assert f'asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(s[{j}]) : "f"(s[{j}]));' in src
    x = np.random.default_rng(3).normal(0, 4, (4, 32)).astype(np.float32)
    out = np.zeros((4, 32), np.float32)
    tirx.compile(kernel, "sim")(x, out)
    for j in range(4):
        assert (ulps(out[j], model("ex2.approx.ftz.f32", x[j], x[j])) <= 1).all()


UNROLLED = """
@T.function
def k(X: T.Tensor((4, 32), "float32"), O: T.Tensor((4, 32), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    i = T.cuda.thread_idx("x")
    s = T.alloc_local((4,), "float32")
    for j in T.unroll(4):
        s[j] = X[j, i]
    for j in T.unroll(4):
        T.ptx["ex2.approx.ftz.f32"](s[j], s[j])
    for j in T.unroll(4):
        O[j, i] = s[j]
"""


# -------------------------------------------------------------------------- misuse

MISUSE = """
@T.function
def k(X: T.Tensor((64,), "float32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=64))
    i = T.cuda.thread_idx("x")
    s = T.alloc_local((2,), "float32")
    h = T.alloc_local((2,), "float16")
    s[1] = 1.0
    CALL
    X[i] = s[0]
"""


@pytest.mark.parametrize(
    "call, message, caret, hint",
    [
        ('T.ptx["ex2.approx.f32"](s[0], X[i], X[i])', "takes 2 operands (d, a), got 3",
         'T.ptx["ex2.approx.f32"](s[0], X[i], X[i])', 'T.alloc_local((1,), "float32")'),
        ('T.ptx["max.f32"](s[0], X[i])', "takes 3 operands (d, a, b), got 2",
         'T.ptx["max.f32"](s[0], X[i])', 'T.ptx["max.f32"](s[0], a, b)'),
        ('T.ptx["ex2.approx.f32"](X[i], X[i])', "got an element of the global tensor 'X'",
         "X[i]", "T.alloc_local"),
        ('T.ptx["lg2.approx.f32"](X[i] + 1.0, X[i])', "got a value", "X[i] + 1.0",
         "T.alloc_local"),
        ('T.ptx["sin.approx.f32"](h[0], X[i])', "d is a float16 element of 'h'", "h[0]",
         'allocate h as float32'),
        ('T.ptx["cos.approx.f32"](s[0], h[0])', "a is float16", "h[0]", "T.float32("),
        ('T.ptx["min.f32"](s[0], s[1], i)', "b is int32", "i", "T.float32("),
        ('T.ptx["rcp.approx.f32"](s[0], T.float64(X[i]))', "a is float64",
         "T.float64(X[i])", "rounding"),
        ('T.ptx["max.f32"](s[i % 2], s[1], 2.0)', "not known at compile time", "s[i % 2]",
         "T.unroll"),
        ('T.ptx["tanh.approx.ftz.f32"](s[0], X[i])', "has no .ftz",
         'T.ptx["tanh.approx.ftz.f32"](s[0], X[i])', "tanh.approx.f32"),
        ('T.ptx.max.xorsign.abs.f32(s[0], X[i], X[i])', "unknown or unsupported",
         "T.ptx.max.xorsign.abs.f32(s[0], X[i], X[i])", "max.NaN.f32"),
        ('T.cuda.tile.apply(T.ptx["ex2.approx.f32"], s, s, scope="thread")', "no tile form",
         "T.cuda.tile.apply", 'T.ptx["ex2.approx.f32"](d, a)'),
    ],
)  # fmt: skip
def test_misuse_is_caught_at_the_users_line(tmp_path, call, message, caret, hint):
    kernel = define(MISUSE.replace("CALL", call), tmp_path, "k")
    with pytest.raises(ContractError) as info:
        tirx.compile(kernel, target="sim")
    assert message in info.value.message
    assert caret_text(str(info.value)).startswith(caret)
    assert hint in (info.value.hint or "")


def test_numbers_are_float32_operands(tmp_path):
    """``2`` and ``0.5`` are .f32 operands (a literal, converted at compile time)."""
    source = MISUSE.replace("CALL", 'T.ptx["max.f32"](s[0], 2, 0.5)')
    kernel = define(source, tmp_path, "k")
    assert '"=f"(s[0]) : "f"(2.0f), "f"(0x1' in tirx.compile(kernel, "cuda -arch=sm_90").source
    out = np.zeros(64, np.float32)
    tirx.compile(kernel, "sim")(out)
    assert (out == 2).all()


# -------------------------------------------------------------------------- the real TIRx

_ASM = re.compile(r'asm(?: volatile)?\("([^"]+)"')


@pytest.mark.reference
def test_the_real_tirx_takes_the_same_spelling_and_instructions(tmp_path):
    """The same kernel, spelled with chains (``T.ptx.ex2.approx.ftz.f32(s[0], X[i])``), is
    accepted by the real TIRx, and its asm strings are ours (opt-in: ``TIRX_REFERENCE_PYTHON``
    names a python with apache-tvm-tirx==0.1.0a4)."""
    path = tmp_path / "ref_kernel.py"
    path.write_text("from tvm_tirx.script import tirx as T\n\n" + forms_source(chains=True))
    theirs = reference_cuda(path, "k")
    ours = tirx.compile(forms_kernel(tmp_path, chains=True), "cuda -arch=sm_90").source
    want = {
        f"{t} %0, %1, %2;" if t.split(".")[0] in ("max", "min") else f"{t} %0, %1;" for t in FORMS
    }
    assert {s for s in _ASM.findall(theirs) if s.split(" ")[0] in FORMS} == want
    assert {s for s in _ASM.findall(ours) if s.split(" ")[0] in FORMS} == want


# ------------------------------------------------------------------------------ GPU


def _gpu(kernel, *arrays):
    import torch

    tensors = [torch.from_numpy(np.ascontiguousarray(a)).cuda() for a in arrays]
    tirx.compile(kernel, target="cuda")(*tensors)
    torch.cuda.synchronize()
    return tensors[-1].cpu().numpy()


@pytest.mark.gpu
def test_gpu_approximations_within_the_isas_bound_of_the_simulator(tmp_path):
    """Every .approx form on the GPU against the simulator, within the ISA's maximum error
    (sin and cos beyond ±100π, where the ISA promises nothing, are not compared); the inputs
    of the ISA's special-value tables give exactly the tables' results, zeros' signs included."""
    x = approx_inputs(seed=5)
    kernel = forms_kernel(tmp_path, UNARY, n=x.size)
    sim = run_sim(kernel, x, x, len(UNARY))
    gpu = _gpu(kernel, x, x, np.zeros_like(sim))
    for k, text in enumerate(UNARY):
        op, ftz = text.split(".")[0], ".ftz" in text
        ok = within_bound(op, x, gpu[k], sim[k], ftz)
        bad = np.flatnonzero(~ok)
        assert ok.all(), (text, x[bad[:4]], gpu[k][bad[:4]], sim[k][bad[:4]])
        for s, want in SPECIALS[op]:
            j = next(j for j, v in enumerate(x.tolist()) if (math.isnan(v) and math.isnan(s)) or (
                v == s and math.copysign(1, v) == math.copysign(1, s)))  # fmt: skip
            assert same_bits_or_nan(gpu[k][j], want), (text, s, gpu[k][j])


@pytest.mark.gpu
def test_gpu_max_min_equal_the_simulator(tmp_path):
    """max and min bit for bit: NaN rules, .NaN, the order of ±0, .ftz (a NaN result is
    compared as NaN: the simulator writes the canonical 0x7fffffff)."""
    x, y = minmax_inputs(seed=5)
    kernel = forms_kernel(tmp_path, BINARY, n=x.size)
    sim = run_sim(kernel, x, y, len(BINARY))
    gpu = _gpu(kernel, x, y, np.zeros_like(sim))
    for k, text in enumerate(BINARY):
        ok = same_bits_or_nan(gpu[k], sim[k])
        bad = np.flatnonzero(~ok)
        assert ok.all(), (text, x[bad[:4]], y[bad[:4]], gpu[k][bad[:4]], sim[k][bad[:4]])
