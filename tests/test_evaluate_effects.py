"""``T.evaluate(<call that acts>)`` as a statement (tirx/script/cta_ops.py, tirx/script/forms.py):
the real TIRx's spelling of an atomic, vote, fence or CTA reduction whose value is dropped. It
must generate the CUDA of the bare statement and simulate the same; inside a larger
expression, or as a value, the call stays refused; a pure value in it still emits nothing."""

from __future__ import annotations

import re

import numpy as np
import pytest

import tirx
from tests.helpers import caret_line, define
from tirx.errors import TirxError

KERNEL = """
@T.function
def kernel(A: T.Tensor((4,), "int32"), U: T.Tensor((2,), "uint32"), F: T.Tensor((64,), "float32"),
           V: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=2, block=64))
    tx = T.cuda.thread_idx("x")
    s = T.alloc_shared((2,), "float32")
    {line}
"""

# Each call that acts, as a bare statement; the wrapped twin is T.evaluate(<it>).
ACTING = [
    "T.cuda.atomic_add(A.ptr_to([0]), 1)",
    "T.atomic_add(T.address_of(A[1 + tx % 3]), tx)",
    "T.cuda.atomic_cas(U.ptr_to([0]), T.uint32(0), T.uint32(tx + 1))",
    "T.cuda.atomic_add(F.ptr_to([tx % 4]), T.float32(V[tx]))",
    "T.cuda.thread_fence()",
    "T.cuda.syncthreads_or(V[tx] > 5)",
    "T.cuda.cta_sum(F[tx], 2, s.data)",
]


def _kernel(tmp_path, line):
    return define(KERNEL.format(line=line), tmp_path, "kernel")


def _cuda(tmp_path, line):
    src = tirx.compile(_kernel(tmp_path, line), target="cuda -arch=sm_90").source
    return re.sub(r'#line (\d+) "[^"]*"', r"#line \1", src)  # the files differ, not the code


def _inputs():
    rng = np.random.default_rng(3)
    return (
        np.zeros(4, np.int32),
        np.zeros(2, np.uint32),
        rng.integers(-50, 50, 64).astype(np.float32),
        rng.integers(0, 10, 64).astype(np.int32),
    )


def _simulate(tmp_path, line):
    arrays = _inputs()
    tirx.compile(_kernel(tmp_path, line), target="sim")(*arrays)
    return arrays


@pytest.mark.parametrize("call", ACTING)
def test_evaluate_generates_the_bare_statements_cuda(tmp_path, call):
    bare, wrapped = _cuda(tmp_path, call), _cuda(tmp_path, f"T.evaluate({call})")
    assert wrapped == bare
    # and the action is there: the kernel without it differs
    assert bare != _cuda(tmp_path, "pass")


@pytest.mark.parametrize(
    "wrapped",
    [
        "T.evaluate(T.evaluate({call}))",  # a receipt passed through again, as the real TIRx does
        "T.evaluate(value={call})",  # its parameter's name
    ],
)
def test_evaluate_spellings(tmp_path, wrapped):
    call = ACTING[0]
    assert _cuda(tmp_path, wrapped.format(call=call)) == _cuda(tmp_path, call)


@pytest.mark.parametrize("call", ACTING)
def test_evaluate_simulates_the_bare_statement(tmp_path, call):
    bare = _simulate(tmp_path, call)
    wrapped = _simulate(tmp_path, f"T.evaluate({call})")
    for b, w in zip(bare, wrapped):
        assert b.tobytes() == w.tobytes()


def test_evaluate_atomics_count_every_thread(tmp_path):
    """The wrapped atomics act once per thread: 2 blocks of 64 threads."""
    lines = (
        "T.evaluate(T.cuda.atomic_add(A.ptr_to([0]), 1))\n"
        "    T.evaluate(T.cuda.atomic_cas(U.ptr_to([1]), T.uint32(0), T.uint32(tx + 1)))\n"
        "    T.evaluate(T.cuda.atomic_add(U.ptr_to([0]), T.uint32(tx)))"
    )
    a, u, _, _ = _simulate(tmp_path, lines)
    assert a[0] == 128
    assert u[0] == 2 * sum(range(64))
    assert u[1] == 1  # the first thread of the first block wins the CAS; the rest see nonzero


def test_evaluate_of_a_pure_value_emits_nothing(tmp_path):
    # the rule for pure values is unchanged: computed for nothing, no code
    nothing = _cuda(tmp_path, "pass")
    for pure in (
        "tx + 1",
        "F[tx]",
        "T.cuda.warp_sum(tx)",
        "T.cuda.__shfl_xor_sync(0xFFFFFFFF, tx, 1)",
    ):
        assert _cuda(tmp_path, f"T.evaluate({pure})") == nothing


@pytest.mark.parametrize(
    ("line", "words", "hint"),
    [
        # the acting call as a value: assigned, inside a larger expression, or a conditional
        (
            "x = T.evaluate(T.cuda.atomic_add(A.ptr_to([0]), 1))",
            "statement of its own",
            "assign it first",
        ),
        (
            "T.evaluate(T.cuda.atomic_add(A.ptr_to([0]), 1) + 1)",
            "statement of its own",
            "assign it first",
        ),
        (
            "T.evaluate(T.cuda.cta_sum(F[tx], 2, s.data) if tx > 0 else 0.0)",
            "statement of its own",
            "assign it first",
        ),
        ("T.evaluate(A)", "takes a value, not a tensor", None),
        ("T.evaluate(T.cuda.atomic_add(A.ptr_to([0]), 1), 2)", "T.evaluate", None),
    ],
)
def test_evaluate_misuse_is_refused(tmp_path, line, words, hint):
    with pytest.raises(TirxError) as e:
        tirx.compile(_kernel(tmp_path, line), target="sim")
    msg = str(e.value)
    assert words in msg
    assert caret_line(msg) == line.strip()
    if hint is not None:
        assert hint in (e.value.hint or "")


# ---------------------------------------------------------------------------- the GPU


@pytest.mark.gpu
def test_gpu_evaluate_form_matches_bare_form_and_simulator(tmp_path):
    import torch

    calls = [ACTING[0], ACTING[1], ACTING[3], ACTING[5]]
    wrapped = "\n    ".join(f"T.evaluate({c})" for c in calls)
    sim = _simulate(tmp_path, wrapped)
    for source in (wrapped, "\n    ".join(calls)):
        exe = tirx.compile(_kernel(tmp_path, source), target="cuda")
        host = _inputs()
        a, f, v = (torch.from_numpy(host[i].copy()).cuda() for i in (0, 2, 3))
        u = torch.zeros(2, dtype=torch.int32, device="cuda").view(torch.uint32)  # (no uint32 fill)
        exe(a, u, f, v)
        torch.cuda.synchronize()
        np.testing.assert_array_equal(a.cpu().numpy(), sim[0])
        # sums of integer-valued floats are exact in any order
        np.testing.assert_array_equal(f.cpu().numpy(), sim[2])
