"""The kernel-wide rules of setmaxnreg, checked once the kernel is lowered, and the registers
its launch reserves.

**The registers at launch.** setmaxnreg moves registers between the warps of a CTA through a
pool that holds only what ``.dec`` released (PTX ISA, setmaxnreg: "A pool of available
registers is maintained per-CTA"), so the warps trade in what the launch gave them: ``R``
registers per thread, for every thread of the block. The ISA asks for a kernel launched "with a
valid value of maximum number of per-thread registers"; ptxas knows it from
``__launch_bounds__(threads, 1)`` (one block per multiprocessor), which codegen writes for such a
kernel (without the second argument ptxas ignores setmaxnreg: "unable to determine register
count at entry"). Measured with ptxas 13.0 for sm_90a, ``R`` is then

    cap = min(255, 65536 // threads, rounded down to a multiple of 8)
    R   = min(cap, the largest .inc count)      (cap when the kernel has no .inc)

(65536: the 32-bit registers of a multiprocessor and the most one block may use, the CUDA
programming guide's technical specifications for compute capability 9.0; 255 its per-thread
maximum). A warp owns its registers in units of 8 per thread, so 255 counts as 256.
``Function.launch_registers`` is ``R``; ``tests/test_setmaxnreg.py`` reads ptxas's "Used N
registers" to show that it is.

**The rules**, over what :mod:`.lower_paths` can tell of each warpgroup (a ``ContractError`` at
the call, showing the arithmetic):

* every thread of a warpgroup executes the same calls (``.aligned``);
* ``.dec`` never raises and ``.inc`` never lowers what the warpgroup holds (the ISA leaves both
  undefined);
* two calls of one warpgroup have a CTA barrier between them ("all warps in the warpgroup must
  synchronize explicitly before executing subsequent setmaxnreg instructions");
* the counts the warpgroups hold add up to no more than the launch reserved: with a sum of
  ``H`` per thread over ``W`` warpgroups, ``H x 128 <= R x 128 W``. Otherwise some ``.inc``
  waits forever for registers no warp will release. A warpgroup holds the largest count any
  of its calls may set (``R`` when it calls none, or when its calls may not run).
"""

from __future__ import annotations

from dataclasses import replace

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.visitor import walk
from .lower_paths import Event, events_by_thread, is_setmaxnreg

__all__ = ["finish_kernel", "launch_registers", "REGISTERS_PER_SM", "MOST_PER_THREAD"]

REGISTERS_PER_SM = 65536  # 64K 32-bit registers per multiprocessor, and per block (sm_90)
MOST_PER_THREAD = 255
GRANULE = 8  # registers are allocated per warp, 256 at a time: 8 per thread
WARPGROUP = 128


def _count(call: ir.PtxCall) -> int:
    return int(call.operands[0].value)


def _action(call: ir.PtxCall) -> str:
    return call.instruction.split(".")[1]  # "inc" or "dec"


def _owned(r: int) -> int:
    """The registers per thread a warp owns for a count of ``r`` (allocated 8 at a time)."""
    return -(-r // GRANULE) * GRANULE


def launch_registers(threads: int, calls) -> int:
    """``R``, the registers per thread that ptxas gives a kernel of ``threads`` threads per
    block with these setmaxnreg ``calls`` under ``__launch_bounds__(threads, 1)``."""
    cap = min(MOST_PER_THREAD, REGISTERS_PER_SM // threads // GRANULE * GRANULE)
    incs = [_count(c) for c in calls if _action(c) == "inc"]
    return min(cap, max(incs)) if incs else cap


def finish_kernel(fn: ir.Function, arch: int) -> ir.Function:
    """``fn`` with ``launch_registers`` set, once the rules above hold (else ContractError)."""
    calls = [n for n in walk(fn.body) if is_setmaxnreg(n)]
    if not calls:
        return fn
    bx, by, bz = fn.launch.block
    threads = bx * by * bz  # a multiple of 128 (transform/limits.py checked it)
    r = launch_registers(threads, calls)
    events = events_by_thread(fn)
    held = []
    for g in range(threads // WARPGROUP):
        mine = events[g * WARPGROUP : (g + 1) * WARPGROUP]
        _check_aligned(g, mine)
        held.append(_holds(g, mine[0], r, threads))
    _check_total(held, r, threads)
    return replace(fn, launch_registers=r)


def _where(call: ir.PtxCall) -> str:
    n = _count(call)
    line = f" at line {call.span.line}" if call.span is not None else ""
    return f"setmaxnreg.{_action(call)} {n}{line}"


def _check_aligned(g: int, per_thread: list[list[Event]]) -> None:
    """Every thread of warpgroup ``g`` executes the same calls in order (barriers reached by
    part of a block are the barrier's own fault, which the simulator reports)."""
    calls = [[e for e in events if e.call is not None] for events in per_thread]
    first = calls[0]
    for k, mine in enumerate(calls[1:], 1):
        if mine == first:
            continue
        i = next(
            (i for i, (a, b) in enumerate(zip(first, mine)) if a != b), min(len(first), len(mine))
        )
        ours, theirs = (first[i] if i < len(first) else None), (mine[i] if i < len(mine) else None)
        tid, lead = g * WARPGROUP + k, g * WARPGROUP
        who = f"thread {tid} (warp {tid // 32}, lane {tid % 32})"
        event = theirs if theirs is not None else ours
        call = event.call
        does = "executes" if event is theirs else "does not execute"
        other = "does not" if event is theirs else "does"
        raise ContractError(
            f"{who} {does} {_where(call)}, but thread {lead} (warp {lead // 32}) of its "
            f"warpgroup {g} {other}: setmaxnreg is executed by all 128 threads of a "
            "warpgroup together (.sync.aligned)",
            call.span,
            hint="branch on the warpgroup (wg = T.cuda.warpgroup_id(); if wg == 0: ...), so "
            "that its 4 warps take the same path to the same setmaxnreg",
        )


def _holds(g: int, seq: list[Event], r: int, threads: int) -> tuple:
    """What warpgroup ``g`` holds once its calls ran (the largest count they may set, ``r``
    when none surely runs), the call that sets it and whether that call may not run; the order
    rules checked on the way."""
    possible = {r}  # the counts the warpgroup may hold at this point
    prev: ir.PtxCall | None = None  # its last call that surely ran
    synced = True
    most, by, unsure = None, None, False
    for event in seq:
        call = event.call
        if call is None:
            synced = True
            continue
        n, act = _count(call), _action(call)
        if not event.maybe and len(possible) == 1:
            (have,) = possible
            since = f"since {_where(prev)}" if prev is not None else "from the launch"
            if act == "dec" and n > have or act == "inc" and n < have:
                verb = "raise" if act == "dec" else "lower"
                raise ContractError(
                    f"{_where(call)} would {verb} warpgroup {g}'s registers: it holds {have} "
                    f"per thread {since}; .{act} needs a count "
                    f"{'at most' if act == 'dec' else 'at least'} {have}",
                    call.span,
                    hint=_launch_note(r, threads)
                    + f"; use setmaxnreg.{'inc' if act == 'dec' else 'dec'} to go that way",
                )
            if prev is not None and not synced:
                raise ContractError(
                    f"{_where(call)} follows {_where(prev)} in warpgroup {g} with no barrier "
                    "between them: the warpgroup's warps must synchronize before its next "
                    "setmaxnreg",
                    call.span,
                    hint="put a T.cuda.cta_sync() between the two (reached by every thread), or "
                    "give each warpgroup role one setmaxnreg",
                )
        possible = possible | {n} if event.maybe else {n}
        if not event.maybe:
            prev = call
        synced = False
        top = max(possible)
        if most is None or top > most:
            most, by, unsure = top, call, event.maybe
    return (r, None, False) if most is None else (most, by, unsure)


def _launch_note(r: int, threads: int) -> str:
    return (
        f"the launch reserves {r} registers per thread (__launch_bounds__({threads}, 1): "
        f"{REGISTERS_PER_SM} registers of the multiprocessor over {threads} threads, a multiple "
        f"of {GRANULE}, at most {MOST_PER_THREAD}, and no more than the largest .inc asks)"
    )


def _check_total(held: list[tuple], r: int, threads: int) -> None:
    counts = [_owned(n) for n, _, _ in held]
    have = _owned(r) * len(held)
    if sum(counts) <= have:
        return
    g_top = max(range(len(held)), key=lambda g: counts[g])
    call = held[g_top][1]
    parts = []
    for n in sorted(set(counts), key=counts.index):
        groups = [g for g, c in enumerate(counts) if c == n]
        by = {held[g][1] for g in groups} - {None}
        why = ", ".join(sorted({_where(c) for c in by})) if by else "the launch's"
        name = "warpgroup" + ("s" if len(groups) > 1 else "")
        parts.append(
            f"{name} {', '.join(map(str, groups))} hold{'' if len(groups) > 1 else 's'} {n} ({why})"
        )
    raising = [g for g, c in enumerate(counts) if c > _owned(r)]
    spare = have - sum(c for g, c in enumerate(counts) if g not in raising)
    fit = spare // len(raising) // GRANULE * GRANULE
    fix = (
        f"with the others as they are, .inc to at most {fit} in warpgroup"
        f"{'s' if len(raising) > 1 else ''} {', '.join(map(str, raising))}"
        if fit >= _owned(r)
        else "release more registers in the other warpgroups (a lower .dec count)"
    )
    unsure = sorted({_where(c) for _, c, maybe in held if maybe})
    note = (
        f" (the compiler cannot tell which warpgroups execute {', '.join(unsure)}: its "
        "condition depends on a value known only when the kernel runs, so it counts it for "
        "every warpgroup that may reach it)"
        if unsure
        else ""
    )
    raise ContractError(
        f"the warpgroups would hold more registers than the launch reserves, so "
        f"{_where(call)} would wait forever for registers no warp releases: "
        + "; ".join(parts)
        + f": ({' + '.join(map(str, counts))}) x {WARPGROUP} = {sum(counts) * WARPGROUP} "
        f"registers, but the block has {_owned(r)} x {threads} = {have * WARPGROUP}{note}",
        call.span,
        hint=_launch_note(r, threads)
        + f"; the counts may add up to {have} per thread over {len(held)} warpgroups: {fix}",
    )
