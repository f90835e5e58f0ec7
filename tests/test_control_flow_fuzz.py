"""Random control flow, the simulator against a reference: a seeded generator writes kernels
whose threads each run a small random program over int32 variables and a local array:
assignments (to the array at an index computed at run time too), ``if`` / ``elif`` /
``else``, loops over static and per-thread ranges (``range`` with a start and a step,
``T.serial``, ``T.unroll``), ``while`` loops, ``break`` and ``continue`` at any depth,
conditions joined with ``and`` / ``or`` / ``not``, and conditions that differ between the
lanes of a warp (they read the thread's own input and index), so the warp diverges and
reconverges inside loops.

Each program is also run here, thread by thread, by a small interpreter of the generated tree
(:class:`_Program`), with Python's integers; every value stays far from the int32 limits (the
generator draws again where an intermediate would not), so C and Python agree on every
operation and the interpreter's answer is the one the GPU gives. On the CPU the simulator must
give it for every thread, and the kernel must compile with NVRTC; the GPU test runs the same
kernels there.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

import tirx
from tests.helpers import define

LANES = 64  # two warps
VARS = 4  # v0..v3, each thread's results
CELLS = 4  # r[0..3], a local array (results too)
WHILES = 3  # while counters w0..w2
KERNELS_CPU = 8
KERNELS_GPU = 40
MOD = 4096  # every assignment is taken modulo this: the values stay small
LIMIT = 2**31


class _Overflow(Exception):
    """An intermediate the interpreter met is not far inside int32: draw another program."""


class _Break(Exception):
    pass


class _Continue(Exception):
    pass


# --------------------------------------------------------------------------- the generator
# Expressions and statements are tuples: ("op", ...). _render writes one as tirx source,
# _Program evaluates one for a thread.


class _Gen:
    def __init__(self, rng: random.Random):
        self.r = rng
        self.loops: list[str] = []  # loop variables in scope, innermost last
        self.whiles = 0  # while counters used so far

    def expr(self, depth: int):
        r = self.r
        if depth == 0 or r.random() < 0.3:
            leaves = [("var", f"v{r.randrange(VARS)}"), ("var", "a"), ("var", "t")]
            leaves += [("var", j) for j in self.loops]
            if r.random() < 0.15:
                return ("cell", self.index())
            return ("const", r.randint(0, 9)) if r.random() < 0.2 else r.choice(leaves)
        e = self.expr
        kind = r.choice(["+", "-", "*", "^", "&", "|", ">>", "//", "%", "min", "max"])
        if kind == "*":
            return ("*", e(depth - 1), ("const", r.randint(0, 5)))
        if kind == ">>":
            return (">>", e(depth - 1), ("const", r.randint(0, 4)))
        if kind in ("//", "%"):  # floor division by a positive constant (Python's and tirx's)
            return (kind, e(depth - 1), ("const", r.randint(1, 7)))
        return (kind, e(depth - 1), e(depth - 1))

    def index(self):
        """An index of r: a constant, or a value taken modulo the array's size (floor: 0..3)."""
        if self.r.random() < 0.4:
            return ("const", self.r.randrange(CELLS))
        return ("%", self.expr(1), ("const", CELLS))

    def cond(self, depth: int = 1):
        r = self.r
        roll = r.random()
        if depth > 0 and roll < 0.15:
            return (r.choice(["and", "or"]), self.cond(depth - 1), self.cond(depth - 1))
        if depth > 0 and roll < 0.22:
            return ("not", self.cond(depth - 1))
        if roll < 0.4:  # an odd/even test: half the lanes each way
            return ("==", ("&", self.expr(1), ("const", 1)), ("const", r.randint(0, 1)))
        op = r.choice(["<", "<=", ">", ">=", "==", "!="])
        return (op, self.expr(2), self.expr(1))

    def block(self, depth: int, n_max: int = 4) -> list:
        return [self.stmt(depth) for _ in range(self.r.randint(1, n_max))]

    def stmt(self, depth: int):
        r = self.r
        roll = r.random()
        in_loop = bool(self.loops) or self.whiles_open > 0
        if in_loop and roll < 0.12:
            jump = r.choice(["break", "continue"])
            return ("if", self.cond(), [(jump,)], []) if r.random() < 0.8 else (jump,)
        if depth > 0 and roll < 0.35:
            other = self.block(depth - 1, 2) if r.random() < 0.5 else []
            if r.random() < 0.25:  # an elif: the else holds one if
                other = [("if", self.cond(), self.block(depth - 1, 2), other)]
            return ("if", self.cond(), self.block(depth - 1), other)
        if depth > 0 and roll < 0.55:
            j = f"j{len(self.loops)}"
            start, step = r.choice([0, 0, 0, 1, 2]), r.choice([1, 1, 1, 2])
            stop = r.choice([
                ("const", r.randint(0, 4)),
                ("%", ("var", f"v{r.randrange(VARS)}"), ("const", 5)),
                ("min", ("var", "a"), ("const", 4)),
                ("%", ("var", "t"), ("const", 4)),
            ])  # fmt: skip
            form = "range"
            if stop[0] == "const" and r.random() < 0.4:
                form = "T.unroll"  # compile-time bounds only
            elif step == 1 and r.random() < 0.25:
                form = "T.serial"
            self.loops.append(j)
            body = self.block(depth - 1)
            self.loops.pop()
            return ("for", j, start, stop, step, form, body)
        if depth > 0 and roll < 0.65 and self.whiles < WHILES:
            w = f"w{self.whiles}"
            self.whiles += 1
            limit = r.choice([("const", r.randint(1, 4)),
                              ("+", ("%", ("var", "a"), ("const", 4)), ("const", 1))])  # fmt: skip
            test = ("<", ("var", w), limit)
            if r.random() < 0.3:
                test = ("and", test, self.cond(0))
            self.whiles_open += 1
            body = self.block(depth - 1)
            self.whiles_open -= 1
            return ("while", w, test, body)
        if roll > 0.85:
            index = self.index()
            value = self.expr(2)
            if r.random() < 0.4:
                value = ("+", ("cell", index), value)
            return ("store", index, value)
        target = f"v{r.randrange(VARS)}"
        value = self.expr(2)
        if r.random() < 0.4:
            value = ("+", ("var", target), value)
        return ("assign", target, value)

    whiles_open = 0


def _render_expr(e) -> str:
    op = e[0]
    if op == "const":
        return str(e[1])
    if op == "var":
        return e[1]
    if op == "cell":
        return f"r[{_render_expr(e[1])}]"
    if op in ("min", "max"):
        return f"T.{op}({_render_expr(e[1])}, {_render_expr(e[2])})"
    if op == "not":
        return f"(not {_render_expr(e[1])})"
    return f"({_render_expr(e[1])} {op} {_render_expr(e[2])})"


def _render(stmts: list, indent: str, out: list[str]) -> None:
    for s in stmts:
        op = s[0]
        if op == "assign":
            out.append(f"{indent}{s[1]} = {_render_expr(s[2])} % {MOD}")
        elif op == "store":
            out.append(f"{indent}r[{_render_expr(s[1])}] = {_render_expr(s[2])} % {MOD}")
        elif op in ("break", "continue"):
            out.append(f"{indent}{op}")
        elif op == "if":
            _render_if(s, indent, "if", out)
        elif op == "for":
            _, j, start, stop, step, form, body = s
            bounds = [str(start)] if start or step != 1 else []
            bounds.append(_render_expr(stop))
            if step != 1:
                bounds.append(str(step) if form == "range" else f"step={step}")
            out.append(f"{indent}for {j} in {form}({', '.join(bounds)}):")
            _render(body, indent + "    ", out)
        elif op == "while":
            _, w, test, body = s
            out.append(f"{indent}{w} = 0")
            out.append(f"{indent}while {_render_expr(test)}:")
            out.append(f"{indent}    {w} += 1")  # first: a continue cannot skip it
            _render(body, indent + "    ", out)
        else:  # pragma: no cover - the generator makes no other statement
            raise AssertionError(op)


def _render_if(s, indent: str, word: str, out: list[str]) -> None:
    out.append(f"{indent}{word} {_render_expr(s[1])}:")
    _render(s[2], indent + "    ", out)
    other = s[3]
    if len(other) == 1 and other[0][0] == "if":  # else: if ... is written elif
        _render_if(other[0], indent, "elif", out)
    elif other:
        out.append(f"{indent}else:")
        _render(other, indent + "    ", out)


class _Program:
    """Runs a generated program for one thread: ``run(a, t)`` gives v0..v3 and r[0..3]."""

    def __init__(self, stmts: list):
        self.stmts = stmts

    def run(self, a: int, t: int) -> list[int]:
        env = {"a": a, "t": t, **{f"v{k}": (a * (k + 1) + t) % MOD for k in range(VARS)}}
        env.update({f"w{k}": 0 for k in range(WHILES)})
        env["r"] = [(t + k) % MOD for k in range(CELLS)]
        self._block(self.stmts, env)
        return [env[f"v{k}"] for k in range(VARS)] + env["r"]

    def _block(self, stmts, env) -> None:
        for s in stmts:
            self._stmt(s, env)

    def _stmt(self, s, env) -> None:
        op = s[0]
        if op == "assign":
            env[s[1]] = self._expr(s[2], env) % MOD
        elif op == "store":
            index = self._expr(s[1], env)
            env["r"][index] = self._expr(s[2], env) % MOD
        elif op == "break":
            raise _Break
        elif op == "continue":
            raise _Continue
        elif op == "if":
            self._block(s[2] if self._expr(s[1], env) else s[3], env)
        elif op == "for":
            _, j, start, stop, step, _form, body = s
            for value in range(start, self._expr(stop, env), step):
                env[j] = value
                if not self._iteration(body, env):
                    break
        elif op == "while":
            _, w, test, body = s
            env[w] = 0
            while self._expr(test, env):
                env[w] += 1
                if not self._iteration(body, env):
                    break

    def _iteration(self, body, env) -> bool:
        """One pass of a loop's body; False when it breaks out of the loop."""
        try:
            self._block(body, env)
        except _Continue:
            pass
        except _Break:
            return False
        return True

    def _expr(self, e, env) -> int:
        op = e[0]
        if op == "const":
            return e[1]
        if op == "var":
            return env[e[1]]
        if op == "cell":
            return env["r"][self._expr(e[1], env)]
        if op == "not":
            return int(not self._expr(e[1], env))
        x = self._expr(e[1], env)
        if op == "and":  # (side-effect free: both sides may be evaluated, as C may not)
            return int(bool(x) and bool(self._expr(e[2], env)))
        if op == "or":
            return int(bool(x) or bool(self._expr(e[2], env)))
        y = self._expr(e[2], env)
        value = {
            "+": lambda: x + y, "-": lambda: x - y, "*": lambda: x * y, "^": lambda: x ^ y,
            "&": lambda: x & y, "|": lambda: x | y, ">>": lambda: x >> y,
            "//": lambda: x // y, "%": lambda: x % y, "min": lambda: min(x, y),
            "max": lambda: max(x, y), "<": lambda: int(x < y), "<=": lambda: int(x <= y),
            ">": lambda: int(x > y), ">=": lambda: int(x >= y), "==": lambda: int(x == y),
            "!=": lambda: int(x != y),
        }[op]()  # fmt: skip
        if not -LIMIT // 4 < value < LIMIT // 4:
            raise _Overflow
        return value


def _inputs(seed: int) -> np.ndarray:
    return np.random.default_rng(seed).integers(-20, 21, LANES).astype(np.int32)


def _program(seed: int):
    """The seed's program (the first draw whose every thread stays in range) and its source."""
    a = _inputs(seed)
    rng = random.Random(seed)
    while True:
        gen = _Gen(rng)
        stmts = gen.block(3)
        program = _Program(stmts)
        try:
            expected = np.array([program.run(int(a[t]), t) for t in range(LANES)], np.int32)
        except _Overflow:
            continue
        lines: list[str] = []
        _render(stmts, "    ", lines)
        return "\n".join(lines), expected


def _kernel_source(seed: int) -> tuple[str, np.ndarray]:
    body, expected = _program(seed)
    init = "\n".join(f"    v{k}: T.int32 = (a * {k + 1} + t) % {MOD}" for k in range(VARS))
    whiles = "\n".join(f"    w{k}: T.int32 = 0" for k in range(WHILES))
    width = VARS + CELLS
    stores = "\n".join(f"    Out[t * {width} + {k}] = v{k}" for k in range(VARS))
    stores += "".join(f"\n    Out[t * {width} + {VARS + k}] = r[{k}]" for k in range(CELLS))
    cells = "".join(f"\n    r[{k}] = (t + {k}) % {MOD}" for k in range(CELLS))
    src = f"""
@T.function
def k(A: T.Tensor(({LANES},), "int32"), Out: T.Tensor(({LANES * width},), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block={LANES}))
    t: T.int32 = T.int32(T.cuda.thread_idx("x"))
    a: T.int32 = A[t]
{init}
{whiles}
    r = T.alloc_local(({CELLS},), "int32"){cells}
{body}
{stores}
"""
    return src, expected


def _result_name(k: int) -> str:
    return f"v{k}" if k < VARS else f"r[{k - VARS}]"


def _check(out: np.ndarray, expected: np.ndarray, src: str, where: str) -> None:
    got = out.reshape(LANES, VARS + CELLS)
    bad = np.argwhere(got != expected)
    if len(bad):
        t, k = bad[0]
        raise AssertionError(
            f"{where}: thread {t} {_result_name(k)} = {got[t, k]}, the program gives "
            f"{expected[t, k]} "
            f"({len(bad)} values differ)\n{src}"
        )


@pytest.mark.parametrize("seed", range(KERNELS_CPU))
def test_random_control_flow_simulates_as_the_program_runs(seed, tmp_path):
    src, expected = _kernel_source(seed)
    k = define(src, tmp_path, "k")
    out = np.zeros(LANES * (VARS + CELLS), np.int32)
    tirx.compile(k, target="sim")(_inputs(seed), out)
    _check(out, expected, src, "simulator")
    tirx.compile(k, target="cuda -arch=sm_90")  # NVRTC builds it


def test_the_generator_reaches_every_construct():
    # the fuzzer is only as good as what it draws: over the CPU seeds, each construct appears
    text = "\n".join(_kernel_source(seed)[0] for seed in range(KERNELS_CPU))
    for word in ("if ", "elif ", "else:", "in range(", "T.serial(", "T.unroll(", ", 2)",
                 "while ", "break", "continue", " and ", " or ", "not ", "T.min(", "T.max(",
                 " // ", " >> ", "] = "):  # fmt: skip
        assert word in text, word


@pytest.mark.gpu
def test_gpu_random_control_flow_runs_as_the_program(tmp_path):
    import torch

    failures = []
    for seed in range(KERNELS_GPU):
        src, expected = _kernel_source(seed)
        k = define(src, tmp_path, "k")
        a = torch.from_numpy(_inputs(seed)).cuda()
        out = torch.zeros(LANES * (VARS + CELLS), dtype=torch.int32, device="cuda")
        tirx.compile(k, target="cuda")(a, out)
        torch.cuda.synchronize()
        try:
            _check(out.cpu().numpy(), expected, src, f"GPU, seed {seed}")
        except AssertionError as e:
            failures.append(str(e))
    assert not failures, f"{len(failures)} of {KERNELS_GPU} kernels differ:\n" + failures[0]
