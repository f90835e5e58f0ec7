"""Named barriers: the CTA's sixteen hardware barriers, shared by a chosen number of threads
(PTX ISA, "Parallel Synchronization and Communication Instructions: bar, barrier").

The forms tirx has, as the ISA spells them::

    bar{.cta}.sync      a{, b}       barrier{.cta}.sync.aligned    a{, b}
    bar{.cta}.arrive    a, b         barrier{.cta}.arrive.aligned  a, b

``a`` is the barrier, 0 .. 15; ``b`` the number of threads that take part, a multiple of the
warp size (without ``b``, every thread of the block). ``bar`` is the other name of
``barrier.*.aligned``: every thread of a warp executes the instruction together, and the
barrier counts whole warps. ``sync`` arrives and waits until ``b`` threads have arrived;
``arrive`` arrives without waiting (a producer signalling consumers that ``sync``). When the
count is reached the barrier completes, its waiters go on, and it starts over. The memory
accesses a thread made before its arrival are performed for the threads that wait on that
completion.

Barrier 0 is the one ``__syncthreads()`` (``T.cuda.cta_sync()``) uses with every thread, so a
named barrier of fewer threads takes 1 .. 15. ``T.cuda.warpgroup_sync(i)`` (the real TIRx's
spelling) is ``bar.sync i, 128``: the four warps of one warpgroup meet.

Not here: ``bar.red`` (``T.cuda.syncthreads_and``/``_or`` and ``T.cuda.cta_reduce`` cover
it), the non-aligned ``barrier.sync``/``arrive`` (a warp that reaches the barrier in parts),
``bar.warp.sync`` (``T.cuda.warp_sync()``).
"""

from __future__ import annotations

from ...errors import ContractError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...isa.core import Contract, Family, FamilySpec, ModifierSlot, OperandSpec, Role
from ...isa.raw_forms import no_tile_form

__all__ = ["SPECS", "BARRIERS", "MIN_ARCH", "NOTES"]

MIN_ARCH = 70  # bar.sync with a thread count: sm_20; the .cta and barrier.* spellings: sm_70
BARRIERS = 16  # "each CTA instance has sixteen barriers numbered 0..15"
MAX_THREADS = 1024  # a block's threads (the count can name no more)

_ACTIONS = ("sync", "arrive", "red", "warp")
_CTA = ModifierSlot("cta", ("cta",), optional=True)
_ACTION = ModifierSlot("action", _ACTIONS)
# only to name bar.warp.sync, the warp barrier, which tirx spells otherwise
BAR_SLOTS = (_CTA, _ACTION, ModifierSlot("warp_sync", ("sync",), optional=True))
BARRIER_SLOTS = (_CTA, _ACTION, ModifierSlot("aligned", ("aligned",), optional=True))


def _reject_action(mnemonic: str, mods: dict) -> str | None:
    act = mods["action"]
    if act == "red":
        return (
            f"tirx has no {mnemonic}.red: use T.cuda.syncthreads_and / syncthreads_or, or "
            "T.cuda.cta_reduce for a sum, max or min over the block"
        )
    if act == "warp":
        return "bar.warp.sync is T.cuda.warp_sync() in tirx"
    return None


def bar_reject(mods: dict) -> str | None:
    if mods["warp_sync"] is not None and mods["action"] != "warp":
        return f"bar.{mods['action']} takes no further modifier"
    return _reject_action("bar", mods)


def barrier_reject(mods: dict) -> str | None:
    why = _reject_action("barrier", mods)
    if why is None and mods["aligned"] is None:
        act = mods["action"]
        return (
            f"tirx has the aligned form, where every thread of a warp executes the barrier "
            f"together: barrier.{act}.aligned, or bar.{act}, its other name"
        )
    return why


def _operands(action: str) -> tuple[OperandSpec, ...]:
    a = OperandSpec("a", Role.SCALAR_IN, "uint32", (), 0, about=f"the barrier, 0 .. {BARRIERS - 1}")
    b = OperandSpec(
        "b", Role.SCALAR_IN, "uint32", (), 0,
        about="the threads that take part, a multiple of 32"
        + ("" if action == "arrive" else " (left out: every thread of the block)"),
    )  # fmt: skip
    return (a, b)


def build_for(family: Family):
    def build(text: str, mods: dict) -> Contract:
        return Contract(text, family, _operands(mods["action"]), MIN_ARCH, tuple(mods.items()))

    return build


def _number(text: str, e, span, what: str, example: str):
    """A u32 operand: an integer value (compile-time or not), as a ScalarOperand."""
    e = ir.as_expr(e)
    if e.dtype.kind not in ("int", "uint"):
        raise ContractError(
            f"{text}: {what} is a {e.dtype} value; it is an integer", hint=example
        ).with_span(span)
    return ir.ScalarOperand(ir.cast(e, ir.U32)), static_value(e)


def lower_raw(contract: Contract, op: ir.RawPtx, address, arch: int) -> ir.PtxCall:
    """``T.ptx["bar.sync"](a)``, ``(a, b)``; ``T.ptx["bar.arrive"](a, b)``. Compile-time values
    are checked here: ``a`` in 0 .. 15 (and not 0 with a count: that barrier is every
    thread's), ``b`` a positive multiple of 32 up to 1024. The simulator checks the others."""
    text = contract.text
    arrive = contract.modifier("action") == "arrive"
    example = f'e.g. T.ptx["{text}"](1, 256)' + ("" if arrive else f', or T.ptx["{text}"](0)')
    n = len(op.operands)
    if n not in ((2,) if arrive else (1, 2)):
        want = (
            "two operands, the barrier and the thread count"
            if arrive
            else ("the barrier, and optionally the thread count")
        )
        raise ContractError(f'T.ptx["{text}"] takes {want}, got {n}', hint=example).with_span(
            op.span
        )
    spans = list(op.operand_spans) + [None] * n
    a, a_value = _number(text, op.operands[0], spans[0], "the barrier a", example)
    if a_value is not None and not 0 <= a_value < BARRIERS:
        raise ContractError(
            f"{text}: barrier {a_value} does not exist; a block has barriers 0 .. {BARRIERS - 1}",
            hint=example,
        ).with_span(spans[0])
    if n == 1:
        return ir.PtxCall(text, (a,), op.span)
    b, b_value = _number(text, op.operands[1], spans[1], "the thread count b", example)
    if b_value is not None and not (0 < b_value <= MAX_THREADS and b_value % 32 == 0):
        raise ContractError(
            f"{text}: the thread count {b_value} is not a multiple of 32 in 32 .. {MAX_THREADS}",
            hint="the barrier counts whole warps: b is 32 times the number of warps that take part",
        ).with_span(spans[1])
    if a_value == 0:
        raise ContractError(
            f"{text}: barrier 0 is the one T.cuda.cta_sync() (__syncthreads) uses with every "
            f"thread of the block; a barrier of {b_value if b_value is not None else 'b'} "
            "threads there would meet it",
            hint=f"take a barrier of 1 .. {BARRIERS - 1} for a group of threads",
        ).with_span(spans[0])
    return ir.PtxCall(text, (a, b), op.span)


def lower_tile(contract: Contract, op: ir.TileOp) -> list[ir.Stmt]:
    raise no_tile_form(contract, "a, b")


NOTES = """
`T.ptx["bar.sync"](a, b)` / `T.ptx["bar.arrive"](a, b)` (and `barrier.sync.aligned`,
`barrier.arrive.aligned`, with or without `.cta`): barrier `a` (1 .. 15; 0 is
`T.cuda.cta_sync()`'s) for `b` threads, a multiple of 32. `T.ptx["bar.sync"](a)` is every
thread of the block; `T.cuda.warpgroup_sync(i)` is `bar.sync i, 128`. Values known at compile
time are checked at the operand (`ContractError`); the simulator checks the others. The
simulator counts whole warps (a warp that reaches it in part is a fault), completes the barrier
when `b / 32` warps have arrived, runs the other warps while one waits, and orders the
arrivals' earlier accesses before the accesses each waiter makes after its wait (an `arrive`
releases, a `sync` releases and acquires). Faults: a barrier outside 0 .. 15, a count that is
not a multiple of 32 or exceeds the block, a barrier in use with another count, a warp whose
threads name different barriers, and the deadlock of a barrier whose count is never reached.
"""

_NO_PICTURE = "it has no register operands: a barrier number and a thread count"
SPECS = tuple(
    FamilySpec(
        family,
        mnemonic,
        slots,
        reject,
        build_for(family),
        lower_tile,
        "PTX ISA, Parallel Synchronization and Communication Instructions (bar, barrier)",
        exec_scope=ir.ExecScope.WARP,
        lower_raw=lower_raw,
        notes=NOTES
        if mnemonic == "bar"
        else "The aligned `barrier` spelling of the named barriers above.",
        no_picture=_NO_PICTURE,
    )  # fmt: skip
    for family, mnemonic, slots, reject in (
        (Family.BAR, "bar", BAR_SLOTS, bar_reject),
        (Family.BARRIER, "barrier", BARRIER_SLOTS, barrier_reject),
    )
)
