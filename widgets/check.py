"""``check_layout``: does the picture match the machine?

A probe kernel (each family's, :mod:`widgets.families`) runs the real instruction with codes that say where
every value came from, and the answer is compared with the drawing, element by element:

* ldmatrix: shared memory holds each 16-bit element's own index; a lane's register then says
  which element (and so which logical word) landed in it;
* stmatrix: lane ``l`` writes ``(l * slots + s) * 2 + h`` into half ``h`` of slot ``s``; shared
  memory then says which lane and slot each element came from;
* mma: the operand under test carries such codes and the others are chosen so that D reveals
  them (``A`` against a one-hot ``B``, ``B`` against an identity ``A``, ``C`` with zero A and
  B); to test ``D`` itself, ``D[r, c] = 8r + c`` from ``A[r, 0:2] = (r, 1)``, ``B[c, 0:2] = (8, c)``.

When the compiler rejects the layout (a ContractError), the probe runs the canonical fragment
instead and the drawing is compared with the native registers (slot = register number).
"""

from __future__ import annotations

import math

import tirx
from tirx.errors import TirxError

from . import args, families, probe
from .linking import link
from .model import Cell, Grid, contract_grid, layout_grid
from .views import GridView

__all__ = ["CheckView", "check_layout"]


class CheckView(GridView):
    """The drawing with every element where the machine disagrees marked (``!`` / red)."""

    def __init__(self, grid: Grid, machine: dict, where: str, rejected: str = ""):
        self.machine = machine  # atom coord -> (lane, slot) or None (value not found)
        self.where = where
        self.rejected = rejected
        self.disagreements = [
            (cell.coord, (cell.lane, cell.slot), machine.get(cell.coord))
            for cell in grid.cells
            if (cell.lane, cell.slot) != machine.get(cell.coord)
        ]
        marks = [
            i for i, c in enumerate(grid.cells) if c.coord in {d[0] for d in self.disagreements}
        ]
        labels = [
            grid.label(c) if i not in marks else f"{grid.label(c)}→{_owner(machine.get(c.coord))}"
            for i, c in enumerate(grid.cells)
        ]
        super().__init__(grid, labels=labels, marks=marks, summary=self._summary(grid))
        self.machine_view = None  # where the machine put each element, beside a wrong drawing
        if self.disagreements:
            self.machine_view = GridView(machine_grid(grid, machine, where), marks=marks)
            link(self, self.machine_view)  # a click on an element lights it on both sides

    @property
    def ok(self) -> bool:
        return not self.disagreements

    def _build(self):
        drawing = super()._build()
        if self.machine_view is None:
            return drawing
        import ipywidgets as w

        machine = self.machine_view.widget
        for side in (drawing, machine):  # side by side, each wrapping its text, until too narrow
            side.layout.flex = "1 1 320px"
            side.layout.min_width = "0"
        return w.HBox([drawing, machine],
                      layout=w.Layout(flex_flow="row wrap", align_items="flex-start",
                                      grid_gap="24px"))  # fmt: skip

    def _repr_html_(self) -> str:
        if self.machine_view is None:
            return super()._repr_html_()
        return (
            '<div style="display:flex;flex-wrap:wrap;gap:24px;align-items:flex-start">'
            f"{super()._repr_html_()}{self.machine_view._repr_html_()}</div>"
        )

    def still(self) -> str:
        if self.machine_view is None:
            return super().still()
        return super().still() + self.machine_view.still()

    def _summary(self, grid: Grid) -> str:
        head = f"probe ran on the {self.where}: "
        if self.rejected:
            head = f"the compiler rejects this layout ({self.rejected.splitlines()[0]}); " + head
        if not self.disagreements:
            return head + f"all {len(grid.cells)} elements agree with the drawing"
        coord, drawn, got = self.disagreements[0]
        return head + (
            f"{len(self.disagreements)} of {len(grid.cells)} elements disagree; first {coord}: "
            f"drawn lane:slot {_owner(drawn)}, machine {_owner(got)}"
        )

    def formula(self, index: int) -> str:
        cell = self.grid.cells[index]
        got = self.machine.get(cell.coord)
        verdict = "agree" if got == (cell.lane, cell.slot) else "DISAGREE"
        return (
            f"element {cell.coord}: drawn lane:slot {_owner((cell.lane, cell.slot))}, "
            f"machine {_owner(got)} ({verdict})"
        )


def machine_grid(drawn: Grid, machine: dict, where: str) -> Grid:
    """The machine's answer as a grid over the drawing's elements: each cell the lane and
    slot the probe found it in (``-`` where the value was not found)."""
    cells = tuple(
        Cell(c.coord, *(machine.get(c.coord) or (None, None)),
             (machine[c.coord],) if machine.get(c.coord) else ())
        for c in drawn.cells
    )  # fmt: skip
    return Grid(f"what the {where} did", drawn.shape, cells, slot_name=drawn.slot_name)


def _owner(pair) -> str:
    return "?" if pair is None else f"{pair[0]}:{pair[1]}"


def check_layout(instr, operand: str = None, layout=None, *, shape=None, target=None):
    """Run ``instr`` on the machine (``target`` None: GPU if visible, else the simulator) and
    compare where each element of ``operand`` lands with ``layout`` (default: the contract's
    canonical fragment, i.e. what :func:`show_instruction` draws; spec text is read as
    :func:`show_layout` reads it). Returns a CheckView."""
    contract = tirx.instruction_contract(getattr(args.instruction(instr, "instr"), "text", instr))
    families.require_fragment(contract)
    probe.require_target(target)
    names = [op.name for op in contract.operands if op.owner is not None]
    operand = operand or names[0]
    if not isinstance(operand, str) or operand not in names:
        raise TirxError(
            f"check_layout probes register operands; {contract.text} has {', '.join(names)}",
            hint="the shared operand of ldmatrix/stmatrix is drawn by show_instruction",
        )
    families.require_probed(contract)
    vshape = families.view_shape(contract, operand)
    if layout is None:
        drawn = contract_grid(contract, operand)
    else:
        layout = args.layout(layout)
        shape = args.shape(shape)
        n = math.prod(shape) if shape is not None else layout.size()
        if n != math.prod(vshape):
            raise TirxError(
                f"the layout covers {n} elements but one {contract.text} {operand} operand has "
                f"{math.prod(vshape)} (shape {vshape})",
                hint="check one instruction's worth: the operand's atom with repeat dims of 1",
            )
        grid = layout_grid(layout, vshape)
        atom = contract.operand(operand).atom
        cells = tuple(
            Cell(c.coord[len(vshape) - len(atom) :], c.lane, c.slot, c.copies) for c in grid.cells
        )
        title = f"{contract.text} · {operand} drawn by {layout!r}"
        drawn = Grid(title, tuple(atom), cells, slot_name="slot")
    try:
        kernel, slots = families.kernel_for(contract, {} if layout is None else {operand: layout})
        tirx.compile(kernel, target=target)
        rejected = ""
    except tirx.ContractError as e:
        kernel, slots = families.kernel_for(contract, {})
        rejected = e.message
    machine, where = families.picture(contract).check(contract, operand, kernel, slots, target)
    return CheckView(drawn, machine, where, rejected)
