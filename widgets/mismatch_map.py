"""A failed ``--check`` drawn: which output elements are wrong, by how much, and the first
one's indices, expected and got value.

The output is drawn as the matrix it is (its last dimension across, every other dimension
down), each cell coloured by how far ``|out - ref|`` is past the tolerance ``atol + rtol ·
|ref|``, on a heat scale with its key: white within the tolerance, then yellow to dark red by
decades past it. A wrong cell says its error; a right one shows ``·``. A large output is drawn
in blocks of elements (each cell its block's worst element) so the map stays at most 64 x 32
cells: a picture at 100 %. The text form (what an untrusted notebook and nbval see) says the
same in words and draws the map with ``X`` and ``.``.
"""

from __future__ import annotations

import html
import math

import numpy as np

from . import faces, picture
from .fragment import Element, Fragment
from .looks import CellLook
from .model import text_color

__all__ = ["Mismatch", "mismatch", "HEAT"]

HEAT = ("#ffffff", "#fff3b0", "#fdd06a", "#f9a03f", "#e8552a", "#c0162b", "#7a0019")
MAX_ROWS, MAX_COLS = 64, 32


def _heat(ratio: float) -> str:
    """The colour of an error ``ratio`` times the tolerance (<= 1: white)."""
    if not ratio > 1:
        return HEAT[0]
    if not math.isfinite(ratio):  # a NaN, or an infinity on one side only
        return HEAT[-1]
    return HEAT[min(1 + int(math.log10(ratio)), len(HEAT) - 1)]


class Mismatch:
    """The comparison of ``out`` with ``ref`` (numpy arrays of one shape), element by element
    as ``torch.isclose`` compares: equal values (infinities of one sign included) are right, a
    NaN is wrong, and a finite pair is right within ``atol + rtol · |ref|``."""

    def __init__(self, out, ref, atol: float, rtol: float, name: str = "out"):
        self.out = np.asarray(out, dtype=np.float64)
        self.ref = np.asarray(ref, dtype=np.float64)
        if self.out.shape != self.ref.shape:
            raise ValueError(
                f"{name} has shape {self.out.shape} and the reference {self.ref.shape}: "
                "a mismatch map compares arrays of one shape"
            )
        self.atol, self.rtol, self.name = atol, rtol, name
        with np.errstate(invalid="ignore", over="ignore"):  # inf - inf, inf / inf: NaN
            err = np.abs(self.out - self.ref)
            tol = atol + rtol * np.abs(self.ref)
            finite = np.isfinite(self.out) & np.isfinite(self.ref)
            good = (self.out == self.ref) | (finite & (err <= tol))
            ratio = np.where(finite, err / np.maximum(tol, 1e-300), np.inf)
        self.ratio = np.where(good, np.minimum(ratio, 1.0), np.maximum(ratio, np.nextafter(1, 2)))
        err = np.where(good, np.where(finite, err, 0.0), np.where(np.isnan(err), np.inf, err))
        self.bad = ~good
        flat = np.flatnonzero(self.bad.reshape(-1))
        self.first = np.unravel_index(flat[0], self.out.shape) if flat.size else None
        self.count = int(flat.size)
        # (err holds no NaN now: a right pair's is 0, a wrong NaN's infinite)
        self.worst = np.unravel_index(int(np.argmax(err)), self.out.shape) if err.size else None
        self.max_error = float(np.max(err)) if err.size else 0.0

    # ---------------------------------------------------------------- words

    def verdict(self) -> str:
        if not self.count:
            return f"all {self.out.size} elements of {self.name} within atol {self.atol:g}, rtol {self.rtol:g}"
        i = tuple(int(x) for x in self.first)
        w = tuple(int(x) for x in self.worst)
        return (
            f"{self.count} of {self.out.size} elements of {self.name} are wrong (atol "
            f"{self.atol:g}, rtol {self.rtol:g}); the first is {self.name}{list(i)}: expected "
            f"{self.ref[i]:.6g}, got {self.out[i]:.6g}; the worst {self.name}{list(w)}: "
            f"|out - ref| = {self.max_error:.3g}"
        )

    def _matrix(self):
        """The errors as a 2-d matrix (last dim across), and the block size of a cell."""
        shape = self.out.shape or (1,)
        cols = shape[-1]
        rows = int(np.prod(shape[:-1])) if len(shape) > 1 else 1
        ratio = self.ratio.reshape(rows, cols)
        br, bc = math.ceil(rows / MAX_ROWS), math.ceil(cols / MAX_COLS)
        return ratio, br, bc

    def _cells(self):
        ratio, br, bc = self._matrix()
        rows, cols = math.ceil(ratio.shape[0] / br), math.ceil(ratio.shape[1] / bc)
        shape = self.out.shape or (1,)
        out = []
        for R in range(rows):
            for C in range(cols):
                block = ratio[R * br : (R + 1) * br, C * bc : (C + 1) * bc]
                worst = float(np.max(block))
                r, c = np.unravel_index(int(np.argmax(block)), block.shape)
                flat = (R * br + int(r)) * ratio.shape[1] + C * bc + int(c)
                idx = tuple(int(x) for x in np.unravel_index(flat, shape))
                got, want = float(self.out[idx]), float(self.ref[idx])  # inf - inf: nan, quietly
                where = f"{self.name}{list(idx)}" + (
                    f" (worst of a {br}x{bc} block)" if br * bc > 1 else ""
                )
                info = f"{where}: expected {want:.6g}, got {got:.6g}, |out - ref| = {abs(got - want):.3g}"
                text = "·" if worst <= 1 else f"{abs(got - want):.3g}"
                out.append((Element((R, C), text=text, info=info), worst))
        return rows, cols, br, bc, out

    def fragment(self) -> Fragment:
        rows, cols, br, bc, cells = self._cells()
        key = tuple(
            (HEAT[i], t) for i, t in enumerate(("ok", "1", "10", "100", "1e3", "1e4", "1e5"))
        )
        block = f"; cell = a block of {br} x {bc} elements, its worst" if br * bc > 1 else ""
        return Fragment(
            f"--check: {self.name} against the reference", rows, cols,
            tuple(e for e, _ in cells), axes=("row", "column"),
            caption=f"colour = |out - ref| past the tolerance (white: within it){block}; "
            "a wrong cell says its error, a right one ·", key=key, key_name="|out-ref|/tol ≥",
        )  # fmt: skip

    def looks(self) -> list[CellLook]:
        """The heat colours; the first wrong element's cell outlined and bold."""
        cells = self._cells()[4]
        first = next((i for i, (_, w) in enumerate(cells) if w > 1), None)
        return [CellLook(_heat(w), text_color(_heat(w)), e.text, i == first, False)
                for i, (e, w) in enumerate(cells)]  # fmt: skip

    # ---------------------------------------------------------------- faces

    def __str__(self) -> str:
        rows, cols, br, bc, cells = self._cells()
        lines = [self.verdict()]
        if self.count:
            marks = ["X" if w > 1 else "." for _, w in cells]
            lines.append(
                f"map of {self.name} (X = wrong"
                + (f", a cell = {br}x{bc} elements" if br * bc > 1 else "")
                + "):"
            )
            lines += ["  " + "".join(marks[r * cols : (r + 1) * cols]) for r in range(rows)]
        return "\n".join(lines)

    def __repr__(self) -> str:
        return str(self)

    def svg(self, path=None) -> str:
        return picture.svg(self.fragment(), cell_looks=self.looks(), note=self.verdict(),
                           path=path, max_rows=10**6)  # fmt: skip

    def figure(self):
        return picture.figure(self.fragment(), cell_looks=self.looks(), note=self.verdict(),
                              max_rows=10**6)  # fmt: skip

    def png(self, path=None, *, dpi: int = 150) -> bytes:
        return picture.png(self.fragment(), cell_looks=self.looks(), note=self.verdict(),
                           dpi=dpi, path=path, max_rows=10**6)  # fmt: skip

    def _repr_html_(self) -> str:
        return f'<div class="tirx-view tirx-mismatch">{self.svg()}</div>'

    def still(self) -> str:
        rows, cols, _, _, cells = self._cells()
        table = [(str(r), [(e.text, _heat(w), text_color(_heat(w))) for e, w in cells[r * cols : (r + 1) * cols]])
                 for r in range(rows)]  # fmt: skip
        return faces.coloured_text(
            html.unescape(self.verdict()), [str(c) for c in range(cols)], table
        )

    def _repr_mimebundle_(self, include=None, exclude=None):
        return faces.static_bundle(self)


def mismatch(out, ref, atol: float = 1e-3, rtol: float = 1e-3, name: str = "out") -> Mismatch:
    """The mismatch map of ``out`` against ``ref`` (arrays or tensors of one shape)."""

    def arr(x):
        x = getattr(x, "detach", lambda: x)()
        x = getattr(x, "cpu", lambda: x)()
        return np.asarray(x.double() if hasattr(x, "double") else x, dtype=np.float64)

    return Mismatch(arr(out), arr(ref), atol, rtol, name)
