"""A fuzzer of synchronisation: edit one synchronisation statement of a pipelined kernel and
require that the simulator either computes exactly what the unedited kernel computes or
reports the edit (a ``TirxError``), never a clean wrong answer.

Edits are made on the lowered IR (the program the GPU would run and the simulator runs): each
*synchronisation statement* -- a CTA or warp barrier, and the PtxCalls of cp.async's commit
and waits, the mbarrier operations, the proxy fences, wgmma's fence, commit and wait, and the
bulk groups' commit and waits -- is

* ``delete``\\ d;
* moved ``up`` one statement (out of its block, before the enclosing ``if``/loop, when it is
  the block's first) or ``down`` one statement (after the enclosing statement when last);
* ``swap``\\ ped with the next synchronisation statement of the same block;
* moved into the ``if`` just before it (``into-prev``, as its then-branch's last statement)
  or just after it (``into-next``, as the first): only that branch's threads execute it;
* given the other ``parity`` (an mbarrier wait), or a wait count one ``more`` or one ``less``
  (``wait_group N``, within the range the instruction allows).

An exact result is accepted only for an edit reviewed as harmless (tests/goldens/
sync_fuzz_benign.txt says why, edit by edit): the simulator runs threads in lockstep, so an
edit that leaves a hazard can still compute the right numbers there, and the list is what
tells such luck from a harmless edit (a stricter wait, an empty commit group, a move across
an assignment). An exact edit not on the list is ``unreviewed``, a failure like a wrong one.

``python -m tests.sync_fuzz [--seed S] [--per-kernel N] [--exact] [KERNEL ...]`` runs every
edit (or a seeded sample of N per kernel) and prints, per kernel, the edits tried, reported,
exact, unreviewed, wrong and internal, and each failure (``--exact``: each exact edit too).
tests/test_sync_fuzz.py runs a short seeded sample in the suite.
"""

from __future__ import annotations

import argparse
import dataclasses
import linecache
import random
import re
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from tests.sync_fuzz_kernels import KERNELS
from tirx.errors import TirxError
from tirx.ir import nodes as ir

__all__ = ["Edit", "Outcome", "KERNELS", "benign", "edits", "sync_statements", "try_edit", "fuzz"]

SYNC_PREFIXES = (
    "cp.async.commit_group",
    "cp.async.wait_group",
    "cp.async.wait_all",
    "cp.async.mbarrier.arrive",
    "cp.async.bulk.commit_group",
    "cp.async.bulk.wait_group",
    "mbarrier.",
    "fence.proxy.",
    "fence.mbarrier_init",
    "wgmma.fence",
    "wgmma.commit_group",
    "wgmma.wait_group",
)
WAIT_RANGE = {  # the wait counts an instruction takes
    "cp.async.wait_group": (0, 7),
    "cp.async.bulk.wait_group": (0, 7),
    "cp.async.bulk.wait_group.read": (0, 7),
    "wgmma.wait_group.sync.aligned": (0, 7),
}
BUDGET = 30.0  # seconds of simulation per edited kernel (a runaway loop is reported)


def is_sync(s: ir.Stmt) -> bool:
    if isinstance(s, ir.Barrier):
        return True
    return isinstance(s, ir.PtxCall) and s.instruction.startswith(SYNC_PREFIXES)


def describe(s: ir.Stmt) -> str:
    line = f"line {s.span.line}" if s.span is not None else "no line"
    what = f"Barrier({s.scope})" if isinstance(s, ir.Barrier) else s.instruction
    return f"{what} at {line}"


def source_text(s: ir.Stmt) -> str:
    """The statement's source line, stripped (what names it in the list of benign edits:
    unlike its line number, it survives edits elsewhere in the file)."""
    span = s.span
    text = linecache.getline(span.file, span.line) if span is not None else ""
    text = re.sub(r"\s+#.*$", "", text.strip())  # without a trailing comment
    return text or describe(s)


# -------------------------------------------------------------------- paths in the tree

# A path is a tuple of steps from the function body: ("stmts", i) into a Seq, ("then_body",),
# ("else_body",) or ("body",) into an If / For / While.


def _children(s: ir.Stmt) -> Iterator[tuple[tuple, ir.Stmt]]:
    if isinstance(s, ir.Seq):
        for i, c in enumerate(s.stmts):
            yield ("stmts", i), c
    elif isinstance(s, ir.If):
        yield ("then_body",), s.then_body
        if s.else_body is not None:
            yield ("else_body",), s.else_body
    elif isinstance(s, (ir.For, ir.While)):
        yield ("body",), s.body


def sync_statements(body: ir.Stmt) -> list[tuple[tuple, ir.Stmt]]:
    """Every synchronisation statement of ``body`` with its path, in program order."""
    found, todo = [], [((), body)]
    while todo:
        path, s = todo.pop()
        if is_sync(s):
            found.append((path, s))
        todo.extend(reversed([(path + (step,), c) for step, c in _children(s)]))
    return found


def _get(body: ir.Stmt, path: tuple) -> ir.Stmt:
    for step in path:
        body = body.stmts[step[1]] if step[0] == "stmts" else getattr(body, step[0])
    return body


def _put(body: ir.Stmt, path: tuple, new: ir.Stmt) -> ir.Stmt:
    """``body`` with the statement at ``path`` replaced by ``new`` (the nodes on the way
    rebuilt; the statements are frozen dataclasses)."""
    if not path:
        return new
    step, rest = path[0], path[1:]
    if step[0] == "stmts":
        stmts = list(body.stmts)
        stmts[step[1]] = _put(stmts[step[1]], rest, new)
        return dataclasses.replace(body, stmts=tuple(stmts))
    return dataclasses.replace(body, **{step[0]: _put(getattr(body, step[0]), rest, new)})


def _block(body: ir.Stmt, path: tuple) -> tuple[tuple, list[ir.Stmt], int]:
    """The statement list holding the statement at ``path``: (the list's own path, its
    statements, the index). A statement that is an If's or loop's whole body counts as a
    list of one."""
    if path and path[-1][0] == "stmts":
        parent = path[:-1]
        return parent, list(_get(body, parent).stmts), path[-1][1]
    return path, [_get(body, path)], 0


def _set_block(body: ir.Stmt, where: tuple, stmts: list[ir.Stmt]) -> ir.Stmt:
    old = _get(body, where)
    span = old.span if isinstance(old, ir.Seq) else None
    return _put(body, where, ir.Seq(tuple(stmts), span))


# ----------------------------------------------------------------------------- edits


@dataclass(frozen=True)
class Edit:
    kind: str  # delete, up, down, swap, into-prev, into-next, parity, more, less
    target: str  # the statement, as describe() names it
    key: str  # the statement by its source text and occurrence: "<text> #n"
    body: ir.Stmt

    def __str__(self) -> str:
        return f"{self.kind} {self.target}"


def _delete(body, path):
    where, stmts, i = _block(body, path)
    return _set_block(body, where, stmts[:i] + stmts[i + 1 :])


def _move(body, path, step: int):
    """Move the statement one place up (-1) or down (+1); out of its block at its edge."""
    where, stmts, i = _block(body, path)
    j = i + step
    if 0 <= j < len(stmts):
        stmts[i], stmts[j] = stmts[j], stmts[i]
        return _set_block(body, where, stmts)
    if not where:
        return None  # the function body's own first or last statement
    s = stmts.pop(i)
    body = _set_block(body, where, stmts)
    # the enclosing compound statement: ``where`` ends in the If's or loop's body field
    outer = where[:-1]
    o_where, o_stmts, k = _block(body, outer)
    o_stmts.insert(k if step < 0 else k + 1, s)
    return _set_block(body, o_where, o_stmts)


def _into(body, path, step: int):
    """Move the statement into the ``if`` just before it (-1: as the last statement of its
    then-branch) or just after it (+1: as the first): only that branch's threads execute it."""
    where, stmts, i = _block(body, path)
    j = i + step
    if not 0 <= j < len(stmts) or not isinstance(stmts[j], ir.If):
        return None
    target = stmts[j]
    inner = target.then_body.stmts if isinstance(target.then_body, ir.Seq) else (target.then_body,)
    moved = (*inner, stmts[i]) if step < 0 else (stmts[i], *inner)
    stmts[j] = dataclasses.replace(target, then_body=ir.Seq(moved, target.then_body.span))
    del stmts[i]
    return _set_block(body, where, stmts)


def _swap(body, path):
    where, stmts, i = _block(body, path)
    for j in range(i + 1, len(stmts)):
        if is_sync(stmts[j]):
            stmts[i], stmts[j] = stmts[j], stmts[i]
            return _set_block(body, where, stmts)
    return None


def _parity(s: ir.PtxCall):
    if not s.instruction.startswith(("mbarrier.try_wait.parity", "mbarrier.test_wait.parity")):
        return None
    last = s.operands[-1]
    flipped = ir.ScalarOperand(ir.as_expr(last.value) ^ ir.const(1, last.value.dtype))
    return dataclasses.replace(s, operands=(*s.operands[:-1], flipped))


def _count(s: ir.PtxCall, delta: int):
    lo_hi = WAIT_RANGE.get(s.instruction)
    if lo_hi is None or len(s.operands) != 1 or not isinstance(s.operands[0], ir.Immediate):
        return None
    n = s.operands[0].value + delta
    if not lo_hi[0] <= n <= lo_hi[1]:
        return None
    return dataclasses.replace(s, operands=(ir.Immediate(n),))


def edits(fn: ir.Function) -> list[Edit]:
    """Every edit of ``fn``'s synchronisation statements (duplicates of one program kept)."""
    out, seen = [], {}
    for path, s in sync_statements(fn.body):
        name = describe(s)
        text = source_text(s)
        seen[text] = seen.get(text, 0) + 1
        key = f"{text} #{seen[text]}"
        candidates = [
            ("delete", _delete(fn.body, path)),
            ("up", _move(fn.body, path, -1)),
            ("down", _move(fn.body, path, +1)),
            ("swap", _swap(fn.body, path)),
            ("into-prev", _into(fn.body, path, -1)),
            ("into-next", _into(fn.body, path, +1)),
        ]
        if isinstance(s, ir.PtxCall):
            for kind, new in (
                ("parity", _parity(s)),
                ("more", _count(s, 1)),
                ("less", _count(s, -1)),
            ):
                if new is not None:
                    candidates.append((kind, _put(fn.body, path, new)))
        out.extend(Edit(kind, name, key, body) for kind, body in candidates if body is not None)
    return out


# -------------------------------------------------------------------------- running


@dataclass(frozen=True)
class Outcome:
    edit: str
    key: str  # "<kernel> | <kind> | <source text> #n", as the list of benign edits names it
    verdict: str  # "reported", "exact", "unreviewed", "wrong", "internal"
    detail: str = ""


BENIGN_FILE = Path(__file__).parent / "goldens" / "sync_fuzz_benign.txt"
VERDICTS = ("reported", "exact", "unreviewed", "wrong", "internal")
FAILURES = ("unreviewed", "wrong", "internal")


def benign() -> dict[str, str]:
    """The edits reviewed as harmless (an exact result is then no luck of the schedule):
    ``<kernel> | <kind> | <source text> #n | <why>`` per line of BENIGN_FILE."""
    out = {}
    for line in BENIGN_FILE.read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            *key, why = line.split(" | ")
            out[" | ".join(key)] = why
    return out


def _run(fn: ir.Function, input_sets: tuple[Callable[[], list], ...]) -> list[np.ndarray]:
    """The outputs of ``fn`` run with each of ``input_sets``, one after the other."""
    from tirx.sim import run

    out = []
    for inputs in input_sets:
        args = inputs()
        run(fn, args, stdout=None, budget=BUDGET)
        out += [np.array(a, copy=True) for a in args]
    return out


def _same(a: list[np.ndarray], b: list[np.ndarray]) -> bool:
    return all(x.tobytes() == y.tobytes() for x, y in zip(a, b))


def try_edit(kernel: str, fn: ir.Function, edit: Edit, inputs, expected, reviewed) -> Outcome:
    """Run ``fn`` with ``edit``: reported, exact (and reviewed as harmless), exact but not
    reviewed, wrong (a clean wrong answer), or internal (an error that is no TirxError)."""
    edited = dataclasses.replace(fn, body=edit.body)
    key = f"{kernel} | {edit.kind} | {edit.key}"
    try:
        got = _run(edited, inputs)
    except TirxError as e:
        return Outcome(str(edit), key, "reported", str(e).splitlines()[0][:200])
    except Exception as e:  # an internal error reached the user: a bug of its own
        return Outcome(str(edit), key, "internal", f"{type(e).__name__}: {e}"[:300])
    if not _same(got, expected):
        return Outcome(str(edit), key, "wrong", "the outputs differ from the unedited kernel's")
    if key in reviewed:
        return Outcome(str(edit), key, "exact", reviewed[key])
    return Outcome(
        str(edit),
        key,
        "unreviewed",
        f"exact, but not in {BENIGN_FILE.name}: if the edit is harmless, add '{key} | <why>'",
    )


def fuzz(name: str, sample: int | None = None, seed: int = 0) -> list[Outcome]:
    """Run every edit of kernel ``name`` (or a seeded sample of ``sample`` of them)."""
    kernel = KERNELS[name]
    fn = kernel.build()
    expected = _run(fn, kernel.input_sets())
    todo = edits(fn)
    if sample is not None and sample < len(todo):
        todo = random.Random(f"{seed}:{name}").sample(todo, sample)
    reviewed = benign()
    return [try_edit(name, fn, e, kernel.input_sets(), expected, reviewed) for e in todo]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernels", nargs="*", default=list(KERNELS))
    parser.add_argument("--per-kernel", type=int, default=None, help="a sample of N edits")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--exact", action="store_true", help="list the exact edits too")
    args = parser.parse_args(argv)
    totals = dict.fromkeys(("tried", *VERDICTS), 0)
    for name in args.kernels:
        t0 = time.perf_counter()
        outcomes = fuzz(name, args.per_kernel, args.seed)
        counts = {v: sum(o.verdict == v for o in outcomes) for v in VERDICTS}
        totals["tried"] += len(outcomes)
        for v, n in counts.items():
            totals[v] += n
        summary = ", ".join(f"{counts[v]} {v}" for v in VERDICTS)
        print(f"{name}: {len(outcomes)} edits: {summary} ({time.perf_counter() - t0:.0f} s)")
        for o in outcomes:
            if o.verdict in FAILURES or (args.exact and o.verdict == "exact"):
                print(f"  {o.verdict.upper()}: {o.key}: {o.detail}", flush=True)
    print("total: " + ", ".join(f"{totals[k]} {k}" for k in ("tried", *VERDICTS)))
    return 1 if any(totals[v] for v in FAILURES) else 0


if __name__ == "__main__":
    sys.exit(main())
