"""Real register values over the fragment grids.

``show_trace(run)`` draws what a simulator run recorded (``exe(*args, trace=True)``): pick an
instruction execution (step), an operand and before/after; each cell of the operand's
canonical fragment shows the value its lane's register held. With ``layout=`` the values are
drawn over your own view of a register array instead (found through the register names the
trace records, e.g. ``ar[2]``).

``run_instruction(instr, A=..., B=...)`` runs one instruction through a probe kernel on the
GPU when one is visible (else the simulator) and returns the same kind of record, so GPU
registers can be shown the same way.
"""

from __future__ import annotations

import os
import re
from dataclasses import replace

import numpy as np

import tirx
from tirx.errors import LayoutError, TirxError

from . import args, families, probe
from .model import contract_grid, layout_grid
from .probe import ProbeRun, ProbeStep
from .views import GridView

__all__ = ["TraceView", "show_trace", "run_instruction", "ProbeRun"]

WHEN = ("before", "after")
FORMATS = ("auto", "hex", "u32", "f32", "f16x2", "bf16x2")
_SHOWN = {  # how each format shows a register (a float32 one as its number, but in hex)
    "auto": "a packed word as its two 16-bit halves lo|hi, a float32 as its number",
    "hex": "the 32 bits in hex",
    "u32": "the 32 bits as an unsigned integer, a float32 as its number",
    "f32": "the 32 bits as a float32",
    "f16x2": "the word's two float16 halves lo|hi, a float32 as its number",
    "bf16x2": "the word's two bfloat16 halves lo|hi, a float32 as its number",
}


def _steps(source) -> list:
    if hasattr(source, "traces"):
        return list(source.traces)
    if isinstance(source, (list, tuple)):
        return list(source)
    if hasattr(source, "registers") and hasattr(source, "instruction"):
        return [source]
    raise TirxError(
        f"show_trace needs a traced run, got {type(source).__name__}",
        hint="run the kernel with exe(*args, trace=True) on the sim target, or use "
        "widgets.run_instruction(...)",
    )


def _format(bits: int, dtype: str, fmt: str, ab_type: str) -> str:
    bits = int(bits) & 0xFFFFFFFF
    if fmt == "hex":
        return f"{bits:08x}"
    if dtype == "float32" or fmt == "f32":
        return f"{np.array(bits, np.uint32).view(np.float32).item():.4g}"
    if fmt == "u32":
        return str(bits)
    kind = "bf16" if fmt == "bf16x2" or (fmt == "auto" and ab_type == "bf16") else "f16"
    lo, hi = probe.half_values(np.array([bits & 0xFFFF, bits >> 16]), kind)
    return f"{lo:.3g}|{hi:.3g}"


class TraceView(GridView):
    """Per-lane register values of one traced instruction, over a fragment grid."""

    def __init__(self, source, step=None, operand=None, *, when="after", layout=None,
                 shape=None, fmt="auto", lane=None):  # fmt: skip
        self.steps = _steps(source)
        if not self.steps:
            raise TirxError("the run recorded no warp-matrix instructions",
                            hint="trace a kernel that uses T.cuda.tile.apply")  # fmt: skip
        self.where = getattr(source, "where", "") or "simulator"
        self.fmt = args.choice(fmt, "fmt", FORMATS)
        self.when = args.choice(when, "when", WHEN)
        self.layout = None if layout is None else args.layout(layout)
        self.shape = args.shape(shape)
        takes = f"an int in 0..{len(self.steps) - 1} (a step of the run)"
        self.step_index = 0 if step is None else args.integer(step, "step", takes)
        if not 0 <= self.step_index < len(self.steps):
            raise TirxError(f"step {step} is out of range: the run has {len(self.steps)} steps")
        self.operand = operand
        grid, labels = self._compute()
        super().__init__(grid, labels=labels, lane=lane, summary=self._summary_text())

    # ---------------------------------------------------------------- the model

    @property
    def trace(self):
        return self.steps[self.step_index]

    def _operands(self, trace) -> dict:
        contract = tirx.instruction_contract(trace.instruction)
        return {contract.operands[rt.operand].name: rt for rt in trace.registers}

    def _compute(self):
        trace = self.trace
        contract = tirx.instruction_contract(trace.instruction)
        regs = self._operands(trace)
        if self.operand not in regs:
            if self.operand is not None and self.layout is None:
                raise TirxError(
                    f"step {self.step_index} ({trace.instruction}) has no operand "
                    f"{self.operand!r}", hint="its operands are " + ", ".join(regs),
                )  # fmt: skip
            self.operand = next(iter(regs))
        rt = regs[self.operand]
        values = rt.after if self.when == "after" else rt.before
        ab = dict(contract.params).get("ab_type", "f16")
        if self.layout is None:
            grid = replace(contract_grid(contract, self.operand), legend=self._legend())
            labels = [
                _format(values[c.lane, c.slot], rt.dtypes[c.slot], self.fmt, ab) for c in grid.cells
            ]
            return grid, labels
        grid = replace(layout_grid(self.layout, self.shape), legend=self._legend())
        _within_warp(grid)
        by_name = {}
        for other in trace.registers:
            for j, name in enumerate(other.sources):
                vals = other.after if self.when == "after" else other.before
                by_name.setdefault(name, (vals, j, other.dtypes[j]))
        buffer = re.sub(r"\[\d+\]$", "", rt.sources[0]) if rt.sources else ""
        labels = []
        for c in grid.cells:
            hit = by_name.get(f"{buffer}[{c.slot}]")
            labels.append("·" if hit is None or c.lane is None
                          else _format(hit[0][c.lane, hit[1]], hit[2], self.fmt, ab))  # fmt: skip
        return grid, labels

    def _legend(self) -> str:
        return f"cell = the value the lane's register holds ({_SHOWN[self.fmt]}); colour = lane"

    def _summary_text(self) -> str:
        t = self.trace
        span = getattr(t, "span", None)
        # the file's own name, not its directory (a notebook cell's changes every run)
        where = f" at {os.path.basename(span.file)}:{span.line}" if span else ""
        regs = self._operands(t)[self.operand] if self.operand in self._operands(t) else None
        names = f" ({', '.join(regs.sources)})" if regs is not None else ""
        return (
            f"step {t.step}: {t.instruction}{where}, warp {t.warp}; operand {self.operand}"
            f"{names}, {self.when}; ran on the {self.where}"
        )

    def formula(self, index: int) -> str:
        cell = self.grid.cells[index]
        return (
            f"element {cell.coord}: lane {cell.lane}, {self.grid.slot_name} {cell.slot}, "
            f"value {self.labels[index]}"
        )

    def select(self, step=None, operand=None, when=None) -> None:
        """Show another step, operand or moment (before/after) and redraw."""
        if step is not None and step != self.step_index:
            self.step_index = step
            if operand is None and self.layout is None:
                self.operand = None
        if operand is not None:
            self.operand = operand
        if when is not None:
            self.when = when
        grid, self.labels = self._compute()
        self.summary = self._summary_text()
        self.redraw(grid)
        if self._widget is not None:
            self._operand.options = list(self._operands(self.trace))
            self._operand.value = self.operand

    # ---------------------------------------------------------------- the widget

    def _controls(self) -> list:
        import ipywidgets as w

        steps = [
            (f"{t.step}: {t.instruction.split('.sync')[0]} {_short(t.instruction)}", i)
            for i, t in enumerate(self.steps)
        ]
        step = w.Dropdown(options=steps, value=self.step_index, description="step")
        step.add_class("tirx-step")
        step.observe(lambda ch: self.select(step=ch["new"]), names="value")
        self._operand = w.ToggleButtons(options=list(self._operands(self.trace)),
                                        value=self.operand)  # fmt: skip
        self._operand.style.button_width = "80px"
        self._operand.observe(
            lambda ch: ch["new"] != self.operand and self.select(operand=ch["new"]), names="value"
        )
        when = w.ToggleButtons(options=["before", "after"], value=self.when)
        when.style.button_width = "72px"  # "before" whole, not "bef…"
        when.observe(lambda ch: self.select(when=ch["new"]), names="value")
        return [step, self._operand, when]


def _within_warp(grid) -> None:
    """A LayoutError for a layout that gives an element to a lane a warp does not have."""
    for c in grid.cells:
        if c.lane is not None and not 0 <= c.lane < 32:
            raise LayoutError(
                f"the layout gives element {c.coord} to lane {c.lane}; a warp has lanes 0..31",
                hint="pass layout= as one warp's view of the operand's registers (laneid 0..31)",
            )


def _short(instruction: str) -> str:
    m = re.search(r"\.(m\d+n\d+k?\d*)\.(x\d)?", instruction)
    return " ".join(g for g in (m.groups() if m else ()) if g)


def show_trace(source, step=None, operand=None, *, when="after", layout=None, shape=None,
               fmt="auto", lane=None) -> TraceView:  # fmt: skip
    """Draw the register values of a traced run: ``source`` is ``exe(*args, trace=True)``'s
    result (simulator), a :func:`run_instruction` result (GPU or simulator), or one step.

    ``when``: ``"before"`` or ``"after"`` the instruction. ``fmt``: ``"auto"`` (f32 values,
    u32 words as two halves ``lo|hi``), ``"hex"``, ``"u32"``, ``"f32"``, ``"f16x2"``,
    ``"bf16x2"``. ``layout``/``shape`` draw the operand's register array through
    your own layout instead of the canonical fragment."""
    return TraceView(source, step, operand, when=when, layout=layout, shape=shape, fmt=fmt,
                     lane=lane)  # fmt: skip


def run_instruction(instr, *, A=None, B=None, C=None, shared=None, registers=None,
                    target=None) -> ProbeRun:  # fmt: skip
    """Run one instruction on the machine (GPU when visible, else simulator) with the given
    operands in their canonical fragments and return its registers as a trace.

    mma: ``A`` (16 x k), ``B`` (8 x k, N-major), ``C`` (16 x 8, default 0); ldmatrix:
    ``shared`` (count x 8 x 8 16-bit values); stmatrix: ``registers`` ([32, count] u32)."""
    contract = tirx.instruction_contract(getattr(args.instruction(instr, "instr"), "text", instr))
    probe.require_target(target)
    kernel, slots = families.kernel_for(contract, {})
    given = dict(A=A, B=B, C=C, shared=shared, registers=registers)
    takes = families.picture(contract).inputs
    extra = [name for name, value in given.items() if value is not None and name not in takes]
    if extra:
        family = contract.text.split(".")[0]
        raise args.ArgumentError(
            f"{family} takes {', '.join(f'{n}=' for n in takes)}, not "
            f"{', '.join(f'{n}=' for n in extra)}",
            hint=f"{contract.text} has no operand {' or '.join(extra)}: leave it out",
        )
    regs, where = families.picture(contract).run(contract, kernel, slots, given, target)
    return ProbeRun([ProbeStep(0, contract.text, regs)], where)
