"""``show_pipeline``: what each warp of a simulated block did, step by step, from the run's
trace records: copies issued and landed, barrier arrivals, waits (for which phase) and the
stalls before them, warp and warpgroup matrix instructions, and the fault a run stopped at.

The simulator has no clock; its trace records carry one order (``seq``, :func:`tirx.sim.trace.
stamp`) because only one strand of a block runs at a time. A *step* is one statement executed:
the consecutive records of one statement (every warp that ran it, every thread that arrived)
share a step, so warps in lockstep line up. A warp suspended at a wait has a *stall* from the
step its wait first found the phase incomplete to the step it passed. A tensor copy is *in
flight* from its issue to the completion of the barrier phase it completes bytes on; a
``cp.async`` copy until the ``wait_group`` that covers it.

The rows are the warps, then the barriers (each completed phase marked: the stage ring
turning). :mod:`widgets.pipeline_draw` draws it (SVG with hover, PNG); :meth:`Timeline.
chrome_trace` writes it as a Chrome / Perfetto trace (JSON trace event format: one process
per block, one thread per warp and barrier, one microsecond per step).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from tirx.errors import TirxError

__all__ = ["Event", "Timeline", "timeline", "KINDS"]

# kind -> (glyph, colour, what it is): the key of the picture
KINDS = {
    "tma": ("T", "#1f77b4", "tensor copy issued"),
    "copy": ("C", "#17becf", "cp.async / bulk copy issued"),
    "landed": ("L", "#2ca02c", "a copy's bytes landed"),
    "arrive": ("A", "#9467bd", "mbarrier arrive"),
    "expect": ("E", "#c5b0d5", "arrive.expect_tx / expect_tx"),
    "wait": ("W", "#8c564b", "a wait passed (hover: which phase)"),
    "stall": ("", "#f7b6d2", "stalled at a wait"),
    "mma": ("M", "#ff7f0e", "warp matrix instruction (mma, ldmatrix, ...)"),
    "wgmma": ("G", "#d62728", "wgmma.mma_async issued"),
    "commit": ("c", "#bcbd22", "commit_group"),
    "group_wait": ("w", "#7f7f7f", "wait_group (cp.async or wgmma)"),
    "fence": ("f", "#dbdb8d", "fence"),
    "init": ("I", "#aec7e8", "mbarrier init"),
    "phase": ("P", "#2ca02c", "a barrier phase completed"),
    "fault": ("✗", "#d62728", "the fault the run stopped at"),
    "flight": ("", "#c6dbef", "a copy in flight"),
}


@dataclass(frozen=True)
class Event:
    """One mark: ``kind`` on ``row`` at ``step`` (to ``end`` for a span), with its text."""

    step: int
    row: str
    kind: str
    label: str
    detail: str
    end: int | None = None
    line: int | None = None


@dataclass
class Timeline:
    """The rows (warps, then barriers), the events and the number of steps."""

    title: str
    rows: list[str]
    events: list[Event]
    steps: int
    fault: str = ""
    notes: list[str] = field(default_factory=list)

    def on(self, row: str) -> list[Event]:
        return [e for e in self.events if e.row == row]

    def text(self) -> str:
        """Step by step, what each row did (the text form)."""
        lines = [self.title]
        by_step: dict[int, list[Event]] = {}
        for e in self.events:
            by_step.setdefault(e.step, []).append(e)
        for step in sorted(by_step):
            parts = [f"{e.row}: {e.label}" + (f" (until step {e.end})" if e.end else "")
                     for e in by_step[step]]  # fmt: skip
            lines.append(f"step {step:>4}  " + "; ".join(parts))
        if self.fault:
            lines.append(f"fault: {self.fault}")
        return "\n".join(lines + self.notes)

    def chrome_trace(self, path=None) -> dict:
        """The timeline as a Chrome / Perfetto trace (also written to ``path``): complete
        events ("X") for marks and spans, one microsecond per step, thread names for rows."""
        tid = {row: i for i, row in enumerate(self.rows)}
        out = [{"name": "process_name", "ph": "M", "pid": 0, "args": {"name": self.title}}]
        out += [{"name": "thread_name", "ph": "M", "pid": 0, "tid": tid[r], "args": {"name": r}}
                for r in self.rows]  # fmt: skip
        for e in self.events:
            out.append({
                "name": e.label, "cat": e.kind, "ph": "X", "pid": 0, "tid": tid[e.row],
                "ts": e.step, "dur": max((e.end or e.step + 1) - e.step, 1),
                "args": {"detail": e.detail, **({"line": e.line} if e.line else {})},
            })  # fmt: skip
        trace = {"traceEvents": out, "displayTimeUnit": "ns",
                 "otherData": {"unit": "one microsecond per simulator step"}}  # fmt: skip
        if path is not None:
            Path(path).write_text(json.dumps(trace, indent=1), encoding="utf-8")
        return trace


# --------------------------------------------------------------------------- from a run

_ELEMENT = re.compile(r"'(?P<name>[^']+)'\[(?P<index>[^\]]+)\]")
_NAME = re.compile(r"'(?P<name>[^']+)' byte (?P<byte>\d+)")


def barrier_name(text: str) -> str:
    """The simulator's name of a barrier, short: ``'full'[1] (byte 8, shared address 1032)``
    -> ``full[1]``; one named by its byte, ``'full' byte 8 (shared address 1032)``, the same
    (8-byte barriers)."""
    if m := _ELEMENT.search(text):
        return f"{m.group('name')}[{m.group('index')}]"
    m = _NAME.search(text)
    return f"{m.group('name')}[{int(m.group('byte')) // 8}]" if m else text


def _records(run):
    recs = [("ptx", r) for r in run.traces] + [("copy", r) for r in run.copies]
    recs += [("bar", r) for r in run.barriers]
    if any(getattr(r, "seq", -1) < 0 for _, r in recs):
        raise TirxError(
            "this run's trace records carry no order (seq)",
            hint="run the kernel with trace=True on this version of tirx's simulator",
        )
    return sorted(recs, key=lambda kr: kr[1].seq)


def _key(kind, r):
    """The statement a record comes from (its place in the source), and who made which
    record of it (a thread or a warp, with the record's event)."""
    span = getattr(r, "span", None)
    where = (
        (span.file, span.line, span.col)
        if span is not None
        else (kind, r.instruction if kind != "bar" else r.barrier)
    )
    event = getattr(getattr(r, "event", ""), "value", getattr(r, "event", ""))
    if kind == "bar":
        return where, {(event, t) for t in r.threads}
    return where, {(kind, event, r.warp)}


def _steps(recs) -> list[int]:
    """The step of each record: a new one when the statement changes, or when someone makes
    the same record of it a second time (the statement's next run, in a loop)."""
    steps, step, last, seen = [], -1, None, set()
    for kind, r in recs:
        key, who = _key(kind, r)
        if key != last or seen & who:
            step, last, seen = step + 1, key, set()
        seen |= who
        steps.append(step)
    return steps


def _line(r):
    span = getattr(r, "span", None)
    return span.line if span is not None else None


def timeline(run, *, block=(0, 0, 0), title=None, error=None) -> Timeline:
    """The :class:`Timeline` of ``block`` of a traced run (``exe(..., trace=True)``), or of
    the records a faulting run left on its error (``error.run``), ending in the fault."""
    recs = [(k, r) for k, r in _records(run) if tuple(r.block) == tuple(block)]
    steps = _steps(recs)
    events: list[Event] = []
    warps: set[int] = set()
    bars: list[str] = []
    stalled: dict[tuple[int, str], int] = {}
    in_flight: dict[str, list[tuple[int, int, str]]] = {}  # barrier -> (step, warp, what)
    last_tx: dict[int, str] = {}  # thread -> the barrier its last complete_tx went to
    groups: dict[int, list] = {}  # warp -> its cp.async copies not yet landed: (step, lanes)

    def add(step, warp, kind, label, detail, r, end=None):
        warps.add(warp)
        events.append(Event(step, f"warp {warp}", kind, label, detail, end, _line(r)))

    for (kind, r), step in zip(recs, steps):
        line = f" (line {_line(r)})" if _line(r) else ""
        if kind == "ptx":
            name = r.instruction.split(".")[0]
            add(step, r.warp, "mma", name, f"{r.instruction}{line}", r)
        elif kind == "copy":
            _copy(r, step, line, add, last_tx, in_flight, groups)
        else:
            _barrier(r, step, line, add, events, bars, stalled, in_flight, last_tx)
    fault = ""
    if error is not None:
        fault = getattr(error, "message", str(error)).split("\n")[0]
        warp = getattr(error, "warp", None)
        end = (max(steps) + 1) if steps else 0
        span = getattr(error, "span", None)
        where = f" at line {span.line}" if span is not None else ""
        if warp is not None:
            warps.add(warp)
            events.append(Event(end, f"warp {warp}", "fault", "fault", fault + where, None,
                                span.line if span else None))  # fmt: skip
    events = list(dict.fromkeys(events))  # a warp's threads arrive one record each: one mark
    rows = [f"warp {w}" for w in sorted(warps)] + bars
    n = max([e.end or e.step for e in events] + [-1]) + 1
    name = title or f"block {tuple(block)}: {len(warps)} warps, {n} steps"
    notes = [f"{len(recs)} trace records; a step is one statement executed (the warps that "
             "ran it line up)"]  # fmt: skip
    return Timeline(name, rows, events, n, fault, notes)


def _copy(r, step, line, add, last_tx, in_flight, groups):
    text, ev, warp = r.instruction, r.event, r.warp
    if ev == "mma_async":
        add(step, warp, "wgmma", "wgmma", f"{text}{line}", r)
    elif ev == "copy" and text.startswith("cp.async.bulk.tensor"):
        tids = [32 * warp + lane for lane in range(32) if r.active[lane]]
        bar = next((last_tx[t] for t in tids if t in last_tx), None)
        add(
            step,
            warp,
            "tma",
            "TMA",
            f"{text}{line}" + (f"; its bytes count on {bar}" if bar else ""),
            r,
        )
    elif ev == "copy":
        add(step, warp, "copy", "copy", f"{text}{line}", r)
        if text.startswith("cp.async.") and "bulk" not in text:
            groups.setdefault(warp, []).append((step, r.active))
    elif ev in ("commit_group",):
        add(step, warp, "commit", "commit", f"{text}{line}", r)
    elif ev == "wait_group":
        add(step, warp, "group_wait", "wait_group", f"{text}{line}", r)
        if text.startswith("cp.async.wait"):
            landed, groups[warp] = _landed(groups.get(warp, []), r.completed)
            for issued in landed:
                add(step, warp, "landed", "landed", f"the cp.async of step {issued} landed", r)
    elif ev == "fence":
        add(step, warp, "fence", "fence", f"{text}{line}", r)


def _landed(pending, completed):
    """(steps of the copies a cp.async wait saw land, the copies still in flight) of one warp.
    ``pending``: its copies oldest first, ``(step, active lanes)``; ``completed``: per lane,
    how many of that lane's oldest copies landed at this wait (the simulator's count; groups
    complete in order, so ``wait_group 1`` lands all but the newest group). A copy has landed
    when it has for every lane that issued it."""
    if completed is None:  # a record without the count: everything the warp waited for
        return [step for step, _ in pending], []
    rank = [0] * len(completed)  # per lane: how many of its copies were looked at
    landed, still = [], []
    for copy in pending:
        lanes = [lane for lane in range(len(completed)) if copy[1][lane]]
        done = all(rank[lane] < completed[lane] for lane in lanes)
        (landed if done else still).append(copy)
        for lane in lanes:
            rank[lane] += 1
    return [step for step, _ in landed], still


def _barrier(r, step, line, add, events, bars, stalled, in_flight, last_tx):
    name = barrier_name(r.barrier)
    ev = getattr(r.event, "value", r.event)
    if name not in bars:
        bars.append(name)
    warps = sorted({t // 32 for t in r.threads})
    phase = f"phase {r.phase}"
    if ev == "complete_tx":  # a tensor copy's bytes, counted on this barrier at its issue
        for t in r.threads:
            last_tx[t] = name
            in_flight.setdefault(name, []).append((step, t // 32, "tensor copy"))
        return
    if ev == "phase complete":
        events.append(Event(step, name, "phase", f"{name} phase {r.phase - 1} done",
                            f"{name}: phase {r.phase - 1} completed{line}", None, _line(r)))  # fmt: skip
        for issued, warp, what in in_flight.pop(name, []):
            add(step, warp, "landed", f"landed in {name}", f"the {what} of step {issued} "
                f"landed: {name} phase {r.phase - 1} completed", r)  # fmt: skip
            if issued < step:
                events.append(Event(issued, f"warp {warp}", "flight", "in flight",
                                    f"{what} in flight to step {step}", step, _line(r)))  # fmt: skip
        return
    for w in warps:
        if ev == "blocked":
            stalled[(w, name)] = step
        elif ev in ("wait", "test"):
            waited = f"{name} phase {r.phase - 1}"
            start = stalled.pop((w, name), None)
            if start is not None and start < step:
                add(start, w, "stall", "stall", f"stalled at {name} from step {start} to "
                    f"{step}{line}", r, end=step)  # fmt: skip
            add(step, w, "wait", f"wait {waited}", f"passed the wait for {waited}{line}", r)
        elif ev == "arrive":
            add(step, w, "arrive", f"arrive {name}", f"arrive on {name} in {phase}{line}", r)
        elif ev == "expect_tx":
            add(step, w, "expect", f"expect_tx {name}", f"expect_tx on {name} ({r.tx} bytes "
                f"pending){line}", r)  # fmt: skip
        elif ev == "init":
            add(step, w, "init", f"init {name}", f"mbarrier.init {name}{line}", r)
