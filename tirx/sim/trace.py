"""What a traced run records: every PTX instruction each warp executed, as plain data.

One :class:`PtxTrace` per (PtxCall execution, warp). Register contents are ``[32, n]``
arrays (lane, register) of uint32 bit patterns; ``*_f32`` holds the same registers as
float32 where the register's dtype is float32 and NaN elsewhere. The notebook layer draws
these; nothing here depends on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..errors import Span

__all__ = ["RegisterTrace", "PtxTrace", "CopyTrace", "RunResult", "record_copy", "stamp"]


@dataclass(frozen=True, eq=False)
class RegisterTrace:
    """One register-vector operand of one instruction execution, for one warp.

    ``role``: ``"d"``, ``"a"``, ``"b"``, ``"c"`` for mma; ``"r"`` for the registers of
    ldmatrix (output) and stmatrix (input). ``sources`` names each register: ``"ar[2]"``
    for slot 2 of local ``ar`` or ``"value"`` for a value operand.
    """

    operand: int
    role: str
    is_output: bool
    dtypes: tuple[str, ...]
    sources: tuple[str, ...]
    before: np.ndarray  # uint32 [32, n]
    after: np.ndarray  # uint32 [32, n]
    before_f32: np.ndarray  # float32 [32, n], NaN where the register is not float32
    after_f32: np.ndarray


@dataclass(frozen=True, eq=False)
class PtxTrace:
    """One warp's execution of one PTX instruction.

    ``addresses``: the uint32 shared address each lane supplied (``None`` for mma);
    ``address_used``: the lanes whose address the instruction used (lanes ``0 .. 8*num-1``).
    ``step`` orders traces within a run.
    """

    step: int
    instruction: str
    span: Span | None
    block: tuple[int, int, int]
    warp: int
    registers: tuple[RegisterTrace, ...]
    addresses: np.ndarray | None = None
    address_used: np.ndarray | None = None
    seq: int = -1  # the run's order of every record, of every kind (stamp)


@dataclass(frozen=True, eq=False)
class CopyTrace:
    """One warp's execution of one asynchronous-copy statement (``cp.async*``, including the
    bulk stores ``cp.async.bulk*`` and ``fence.proxy.async*``).

    ``event``: ``"copy"`` (a ``cp.async`` or ``cp.async.bulk``), ``"commit_group"``,
    ``"wait_group"`` (also for ``wait_all`` and ``wait_group.read``) or ``"fence"``. Per-lane
    int64 arrays ``[32]`` (-1 for inactive lanes): for a copy ``dst`` (shared address),
    ``src`` (byte offset in the global tensor) and ``nbytes`` (bytes read; the rest of the
    cp-size is zero-filled) — for a bulk store ``dst`` is the byte offset in the global tensor,
    ``src`` the shared address and ``nbytes`` the size; for a commit ``group`` (the number of
    the group it closed, counting from 0 per thread); for a wait ``completed`` (copies that
    landed, or for ``.read`` whose reads finished).
    ``step`` orders copy traces; ``ptx_before`` is how many :class:`PtxTrace` came before.
    """

    step: int
    event: str
    instruction: str
    span: Span | None
    block: tuple[int, int, int]
    warp: int
    active: np.ndarray  # bool [32]
    dst: np.ndarray | None = None
    src: np.ndarray | None = None
    nbytes: np.ndarray | None = None
    group: np.ndarray | None = None
    completed: np.ndarray | None = None
    ptx_before: int = 0
    seq: int = -1  # the run's order of every record, of every kind (stamp)


@dataclass(eq=False)
class RunResult:
    """The result of :func:`tirx.sim.run`: outputs were written in place into the arguments.

    ``traces``: the PTX warp-instruction traces; ``copies``: the asynchronous-copy traces;
    ``barriers``: the mbarrier events (init, arrive, phase completion, wait); ``profile``:
    the per-line counts of a run with ``profile=True`` (:class:`tirx.sim.profile.SimProfile`).
    """

    traces: list[PtxTrace] = field(default_factory=list)
    blocks: int = 0
    seconds: float = 0.0
    copies: list[CopyTrace] = field(default_factory=list)
    barriers: list = field(default_factory=list)  # tirx.families.mbarrier.sim.BarrierTrace
    profile: object | None = None  # tirx.sim.profile.SimProfile, with profile=True


def stamp(m) -> int:
    """The next number of the run's one clock of trace records: PTX, copy and barrier records
    each keep their own list, and ``seq`` orders them all as the run made them (only one
    strand of a block runs at a time), so a timeline can interleave them. The blocks of a
    cluster, which run together, share the clock of the machine of rank 0."""
    if m.cluster is not None:
        m = m.cluster.machines[0]
    m.trace_clock += 1
    return m.trace_clock


def as_float(bits: np.ndarray, is_f32: np.ndarray) -> np.ndarray:
    """``bits`` viewed as float32 where ``is_f32`` (per register), NaN elsewhere."""
    out = np.ascontiguousarray(bits, dtype=np.uint32).view(np.float32).copy()
    out[:, ~is_f32] = np.nan
    return out


def record_copy(m, stmt, event, idx, *, dst=None, src=None, nbytes=None, groups=None, landed=None):
    """One :class:`CopyTrace` per warp that executed ``stmt``, an asynchronous copy's or group
    statement (``event``: an enum member whose value names what it did, or that name)."""
    warps = idx >> 5
    for w in np.unique(warps).tolist():
        sel = warps == w
        lanes = np.zeros(32, dtype=bool)
        lanes[idx[sel] & 31] = True

        def per_lane(values, sel=sel):
            if values is None:
                return None
            out = np.full(32, -1, dtype=np.int64)
            out[idx[sel] & 31] = values[sel]
            return out

        m.copy_traces.append(
            CopyTrace(
                step=len(m.copy_traces),
                event=getattr(event, "value", event),
                instruction=stmt.instruction,
                span=stmt.span,
                block=tuple(int(x) for x in m.block_idx),
                warp=int(w),
                active=lanes,
                dst=per_lane(dst),
                src=per_lane(src),
                nbytes=per_lane(nbytes),
                group=per_lane(groups),
                completed=per_lane(landed),
                ptx_before=len(m.traces),
                seq=stamp(m),
            )
        )
