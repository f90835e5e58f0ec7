"""A simulated run's profile: per source line, what executed and what its memory accesses cost.

``tirx.sim.run(fn, args, profile=True).profile`` (or ``exe.profile(*args)`` on a ``sim``
executable) is a :class:`SimProfile`: one :class:`LineProfile` per source line that executed
something, holding

* ``instructions``: warp-level instructions executed, by class (one count per warp that
  executes the statement or expression, as a GPU counts issued warp instructions): memory
  accesses by space (``ld.global``, ``st.shared``, ...), ``int``/``float`` arithmetic,
  ``convert``, ``barrier``, ``printf``, each PTX instruction family by its mnemonic (``mma``,
  ``ldmatrix``, ``cp.async``, ...) and each family of calls by its folder
  (``warp_collectives``: shuffles, votes and reductions; ``math``; ``cta_ops``;
  ``thread_ops``: sleeps, clock reads, device asserts);
* ``memory``: per (space, load or store) a :class:`~tirx.sim.access_cost.Cost`: global
  requests and the 32-byte sectors they touch against the fewest possible, shared requests
  and the wavefronts the 32 banks need against one per request part (the rest are
  bank-conflict replays), and the bytes the lanes asked for.

:data:`METRICS` names the per-line numbers the notebook's heat column can show. Nothing here
runs unless a run asks for it (the recorder, :mod:`tirx.sim.recorder`, does the counting).
"""

from __future__ import annotations

import html
import linecache
import numbers
from collections.abc import Callable
from dataclasses import dataclass, field

from ..dtypes import StrKind
from .access_cost import Cost

__all__ = [
    "Space", "Access", "Instr", "LineProfile", "SimProfile", "Metric", "METRICS",
    "UnknownKey",
]  # fmt: skip


class UnknownKey(KeyError, ValueError):
    """A profile look-up by a name the profile does not have (a metric, a memory space or an
    access kind): a KeyError and a ValueError, whose text names the key and the valid ones."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def _known(value, kind, what: str):
    """``value`` as a member of the StrKind ``kind``, or an UnknownKey listing the members."""
    for member in kind:
        if value == member:
            return member
    names = ", ".join(repr(str(m)) for m in kind)
    raise UnknownKey(f"unknown {what} {value!r}; choose from {names}")


class Space(StrKind):
    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"  # T.alloc_local arrays: registers unless the compiler spills them


class Access(StrKind):
    LOAD = "load"
    STORE = "store"


class Instr(StrKind):
    """The fixed instruction classes (PTX families and call families add their own names)."""

    LD_GLOBAL = "ld.global"
    ST_GLOBAL = "st.global"
    LD_SHARED = "ld.shared"
    ST_SHARED = "st.shared"
    LD_LOCAL = "ld.local"
    ST_LOCAL = "st.local"
    INT = "int"
    FLOAT = "float"
    CONVERT = "convert"
    BARRIER = "barrier"
    PRINTF = "printf"


MEMORY_INSTR = {
    (Space.GLOBAL, Access.LOAD): Instr.LD_GLOBAL,
    (Space.GLOBAL, Access.STORE): Instr.ST_GLOBAL,
    (Space.SHARED, Access.LOAD): Instr.LD_SHARED,
    (Space.SHARED, Access.STORE): Instr.ST_SHARED,
    (Space.LOCAL, Access.LOAD): Instr.LD_LOCAL,
    (Space.LOCAL, Access.STORE): Instr.ST_LOCAL,
}


@dataclass(frozen=True)
class LineProfile:
    """What one source line executed (``file``, ``line``) over the whole run."""

    file: str | None
    line: int
    instructions: dict = field(default_factory=dict)  # class -> warp-level instructions
    memory: dict = field(default_factory=dict)  # (Space, Access) -> Cost

    def cost(self, space: Space, access: Access | None = None) -> Cost:
        """The cost of this line's accesses to ``space`` (``"global"``, ``"shared"`` or
        ``"local"``; loads, stores, or both: ``access`` ``"load"``, ``"store"`` or None). A
        name that is none of those raises :class:`UnknownKey`; a space the line did not
        touch costs zero."""
        space = _known(space, Space, "memory space")
        access = None if access is None else _known(access, Access, "access")
        total = Cost()
        for (sp, acc), c in self.memory.items():
            if sp == space and (access is None or acc == access):
                total = total + c
        return total

    @property
    def executed(self) -> int:
        """Warp-level instructions executed, all classes."""
        return sum(self.instructions.values())

    def source(self) -> str:
        """The line's text (through linecache, which also holds notebook cells)."""
        if not self.file:
            return ""
        return linecache.getline(self.file, self.line).strip()

    def mix(self) -> str:
        """The instruction classes, most executed first: ``ld.global 4 · int 8``."""
        pairs = sorted(self.instructions.items(), key=lambda kv: (-kv[1], str(kv[0])))
        return " · ".join(f"{k} {v}" for k, v in pairs)


@dataclass(frozen=True)
class Metric:
    """A per-line number: its title, unit, meaning, and whether a high value is the bad end
    (the heat column colours the bad end hot)."""

    title: str
    unit: str
    meaning: str
    value: Callable[[LineProfile], float | None]
    high_is_bad: bool = True


def _coalescing(lp: LineProfile) -> float | None:
    eff = lp.cost(Space.GLOBAL).efficiency
    return None if eff is None else 100.0 * eff


METRICS: dict[str, Metric] = {
    "instructions": Metric(
        "instructions", "warp instr", "warp-level instructions executed",
        lambda lp: lp.executed,
    ),
    "sectors": Metric(
        "global sectors", "sectors", "32-byte sectors the line's global accesses touch",
        lambda lp: lp.cost(Space.GLOBAL).units,
    ),
    "excess_sectors": Metric(
        "excess sectors", "sectors", "global sectors beyond the fewest the bytes need",
        lambda lp: lp.cost(Space.GLOBAL).excess,
    ),
    "coalescing": Metric(
        "coalescing", "%", "fewest sectors / sectors touched (100 %: coalesced)",
        _coalescing, high_is_bad=False,
    ),
    "wavefronts": Metric(
        "shared wavefronts", "wavefronts", "shared-memory wavefronts the line's accesses need",
        lambda lp: lp.cost(Space.SHARED).units,
    ),
    "conflicts": Metric(
        "bank conflicts", "replays", "shared wavefronts beyond one per request (part)",
        lambda lp: lp.cost(Space.SHARED).excess,
    ),
    "global_bytes": Metric(
        "global bytes", "B", "bytes the lanes asked of global memory",
        lambda lp: lp.cost(Space.GLOBAL).bytes,
    ),
    "shared_bytes": Metric(
        "shared bytes", "B", "bytes the lanes asked of shared memory",
        lambda lp: lp.cost(Space.SHARED).bytes,
    ),
}  # fmt: skip


def _sum_lines(lines, file=None, line=0) -> LineProfile:
    instr: dict = {}
    memory: dict = {}
    for lp in lines:
        for k, v in lp.instructions.items():
            instr[k] = instr.get(k, 0) + v
        for k, c in lp.memory.items():
            memory[k] = memory.get(k, Cost()) + c
    return LineProfile(file, line, instr, memory)


_COLUMNS = (  # header, width, value of a LineProfile, meaning
    ("instr", 7, lambda lp: lp.executed, "warp-level instructions executed"),
    ("g.req", 6, lambda lp: lp.cost(Space.GLOBAL).requests, "global requests (warp-level)"),
    ("sectors", 8, lambda lp: lp.cost(Space.GLOBAL).units, "32-byte global sectors touched"),
    ("ideal", 6, lambda lp: lp.cost(Space.GLOBAL).ideal, "fewest sectors for those bytes"),
    ("coal%", 6, _coalescing, "ideal / sectors, percent"),
    ("s.req", 6, lambda lp: lp.cost(Space.SHARED).requests, "shared requests (warp-level)"),
    ("wavefr", 7, lambda lp: lp.cost(Space.SHARED).units, "shared-memory wavefronts"),
    ("ideal", 6, lambda lp: lp.cost(Space.SHARED).ideal, "one wavefront per request part"),
    ("confl", 6, lambda lp: lp.cost(Space.SHARED).excess, "bank-conflict replays"),
    ("global B", 9, lambda lp: lp.cost(Space.GLOBAL).bytes, "bytes asked of global memory"),
    ("shared B", 9, lambda lp: lp.cost(Space.SHARED).bytes, "bytes asked of shared memory"),
    ("local B", 8, lambda lp: lp.cost(Space.LOCAL).bytes, "bytes of local arrays"),
)


def _cell(value) -> str:
    if value is None:
        return "·"
    if isinstance(value, float):
        return f"{value:.1f}"
    return str(value) if value else "·"


@dataclass(frozen=True)
class SimProfile:
    """The profile of one simulated run of kernel ``kernel`` (defined in ``file``)."""

    kernel: str
    file: str | None
    blocks: int
    lines: tuple[LineProfile, ...]

    METRICS = METRICS

    def line(self, n: int, file: str | None = None) -> LineProfile | None:
        """Line ``n`` of ``file`` (default: the kernel's file), or None if it ran nothing
        (a line of the file that holds no statement, or one past its end, included). ``n``
        must be a line number (an int): anything else raises a TypeError."""
        if isinstance(n, bool) or not isinstance(n, numbers.Integral):
            raise TypeError(f"a profile line is a line number (an int), got {n!r}")
        file = self.file if file is None else file
        return next((lp for lp in self.lines if lp.line == n and lp.file == file), None)

    def total(self) -> LineProfile:
        """All lines together."""
        return _sum_lines(self.lines)

    def metric(self, name: str) -> dict[int, float]:
        """``{line: value}`` of metric ``name`` (a key of :data:`METRICS`; another name raises
        :class:`UnknownKey`) for the lines of the kernel's file that have a value."""
        if not isinstance(name, str) or name not in METRICS:
            raise UnknownKey(f"unknown profile metric {name!r}; choose from {', '.join(METRICS)}")
        value = METRICS[name].value
        out = {}
        for lp in self.lines:
            if lp.file == self.file and (v := value(lp)) is not None:
                out[lp.line] = v
        return out

    # ------------------------------------------------------------------ faces

    def _where(self, lp: LineProfile) -> str:
        if lp.file == self.file or lp.file is None:
            return str(lp.line)
        return f"{lp.file}:{lp.line}"

    def header(self) -> str:
        t = self.total()
        return (
            f"profile of '{self.kernel}' on the simulator: {self.blocks} block"
            f"{'s' if self.blocks != 1 else ''}, {t.executed} warp instructions, global "
            f"{t.cost(Space.GLOBAL).units} sectors (ideal {t.cost(Space.GLOBAL).ideal}), shared "
            f"{t.cost(Space.SHARED).units} wavefronts (ideal {t.cost(Space.SHARED).ideal})"
        )

    def table(self) -> str:
        """The per-line table as text, a total row, and each line's instruction mix."""
        head = f"{'line':>6} " + " ".join(f"{h:>{w}}" for h, w, _, _ in _COLUMNS) + "  source"
        rows = [self.header(), head]
        for lp in (*self.lines, None):
            shown = lp if lp is not None else self.total()
            label = self._where(lp) if lp is not None else "total"
            cells = " ".join(f"{_cell(f(shown)):>{w}}" for _, w, f, _ in _COLUMNS)
            rows.append(f"{label:>6} {cells}  {lp.source() if lp is not None else ''}".rstrip())
        rows.append("instructions by class (warp-level):")
        rows += [f"{self._where(lp):>6}  {lp.mix()}" for lp in self.lines if lp.instructions]
        return "\n".join(rows)

    def __str__(self) -> str:
        return self.table()

    def _repr_html_(self) -> str:
        e = html.escape
        head = "".join(f'<th title="{e(m, quote=True)}">{e(h)}</th>' for h, _, _, m in _COLUMNS)
        out = [
            f'<div class="tirx-profile"><div>{e(self.header())}</div>'
            "<style>.tirx-profile-table td,.tirx-profile-table th{padding:0 5px}</style>"
            '<table class="tirx-profile-table" style="font-size:12px;border-collapse:collapse">'
            f"<tr><th>line</th>{head}<th style='text-align:left'>source</th>"
            "<th style='text-align:left'>instructions by class</th></tr>"
        ]
        for lp in (*self.lines, None):
            shown = lp if lp is not None else self.total()
            label = self._where(lp) if lp is not None else "total"
            cells = "".join(f"<td style='text-align:right'>{e(_cell(f(shown)))}</td>"
                            for _, _, f, _ in _COLUMNS)  # fmt: skip
            src = e(lp.source()) if lp is not None else ""
            out.append(
                f"<tr><td>{e(label)}</td>{cells}<td><code>{src}</code></td>"
                f"<td style='font-size:11px'>{e(shown.mix())}</td></tr>"
            )
        out.append("</table></div>")
        return "".join(out)
