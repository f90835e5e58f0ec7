"""What the notebook tools accept, checked once before any work: lanes, shapes, element widths,
layouts, choices, pages, and the size of a picture.

A bad argument is a :class:`ArgumentError` (also a ``ValueError``) or an
:class:`ArgumentTypeError` (also a ``TypeError``): both are tirx errors, so a notebook shows
them as it shows any other, the message naming the argument in the user's words and the hint
saying what it takes. A picture larger than :data:`MAX_CELLS` elements is refused as the
``tirx layout`` command refuses it (a :class:`~tirx.errors.LayoutError`), before anything is
allocated.
"""

from __future__ import annotations

import math
import operator

from tirx.errors import LayoutError, TirxError

__all__ = [
    "MAX_CELLS", "MAX_COPIES", "LANES", "DTYPE_BYTES", "ArgumentError", "ArgumentTypeError",
    "integer", "lane", "shape", "dtype_bytes", "layout", "instruction", "parse_layout", "text", "choice", "page", "bound",
    "refuse_cells",
]  # fmt: skip

# The most elements one picture draws (128 x 128): the table and the SVG take ~30 us per
# element. The same bound as ``tirx layout`` (tirx/cli.py MAX_CELLS; a test keeps them equal).
MAX_CELLS = 16384
MAX_COPIES = 8 * MAX_CELLS  # elements x replicas: every copy of every element is computed
LANES = 32
# 16: a 16-byte chunk (8 halves) as one element, how notebooks/01_layouts.ipynb draws a
# swizzle's chunks; the CLI's --dtype-bytes takes 1, 2, 4 or 8
DTYPE_BYTES = (1, 2, 4, 8, 16)
SHOW_ONE_TILE = "show one tile of it: a layout (or repeat) over fewer elements"


class ArgumentError(TirxError, ValueError):
    """An argument of a notebook tool has a value the tool cannot use."""


class ArgumentTypeError(TirxError, TypeError):
    """An argument of a notebook tool is of a type the tool does not take."""


def _is_int(value) -> bool:
    return not isinstance(value, bool) and hasattr(type(value), "__index__")


def integer(value, name: str, takes: str) -> int:
    """``value`` as an int, or an ArgumentTypeError saying that ``name`` takes ``takes``."""
    if not _is_int(value):
        raise ArgumentTypeError(f"{name} must be {takes}, got {value!r}",
                                hint=f"pass {name}= as {takes}")  # fmt: skip
    return operator.index(value)


def lane(value, name: str = "lane", count: int = LANES, what: str = "lane"):
    """A lane number in ``0..count-1`` (None: all lanes)."""
    if value is None:
        return None
    takes = f"an int in 0..{count - 1}"
    value = integer(value, name, takes)
    if not 0 <= value < count:
        raise ArgumentError(
            f"{name}={value} is not a {what} of this picture: {name} must be {takes}",
            hint=f"pick a {what} in 0..{count - 1}, or {name}=None for all of them",
        )
    return value


def shape(value, name: str = "shape"):
    """A tuple of positive ints (an int is a 1-D shape; None: the layout's own)."""
    if value is None:
        return None
    if _is_int(value):
        value = (value,)
    if not isinstance(value, (tuple, list)) or not value:
        raise ArgumentTypeError(
            f"{name} must be a tuple of positive ints like (16, 8), got {value!r}",
            hint=f"write {name}=(4, 8, 4), not {name}='4,8,4'",
        )
    if not all(_is_int(e) and operator.index(e) > 0 for e in value):
        raise ArgumentError(
            f"{name} extents are positive ints; got {tuple(value)!r}",
            hint=f"give every extent of {name} as a whole number of at least 1",
        )
    return tuple(operator.index(e) for e in value)


def dtype_bytes(value, name: str = "dtype_bytes") -> int:
    """The bytes of one shared-memory element: 1, 2, 4, 8 or 16 (a 16-byte chunk)."""
    allowed = ", ".join(map(str, DTYPE_BYTES[:-1])) + f" or {DTYPE_BYTES[-1]}"
    value = integer(value, name, f"{allowed} (the element's bytes)")
    if value not in DTYPE_BYTES:
        raise ArgumentError(
            f"{name}={value} is not the size of an element: {name} is {allowed}",
            hint="2 for f16/bf16 elements, 4 for f32, 1 for s8/fp8, 8 for f64, 16 for "
            "16-byte chunks",
        )
    return value


def layout(value, name: str = "layout"):
    """A layout object, spec text (parsed) or a bare spec (``S[...]``), else a TypeError."""
    import tirx.layout as L

    if isinstance(value, str):
        return parse_layout(value)
    if isinstance(value, L.LayoutSpec):
        return L.TileLayout(value)
    if isinstance(value, (L.TileLayout, L.ComposeLayout)):
        return value
    raise ArgumentTypeError(
        f"{name} must be a layout, got {type(value).__name__} {value!r}",
        hint="pass a TileLayout, a ComposeLayout or spec text like 'S[(8, 4) : (4 @ laneid, 1)]'",
    )


def instruction(value, name: str = "instr", takes: str = "a PTX instruction"):
    """``value`` if it can name an instruction (text, ``T.ptx[...]`` or a contract)."""
    if isinstance(getattr(value, "text", value), str) or (
        hasattr(value, "operands") and hasattr(value, "family")
    ):
        return value
    raise ArgumentTypeError(
        f"{name} must be {takes}, got {type(value).__name__} {value!r:.60}",
        hint="pass its text, e.g. 'mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32', "
        "or T.ptx[...]",
    )


def parse_layout(text: str):
    """A layout from the text in an edit box: ``S[...] + R[...]``, ``TileLayout(...)`` or
    ``ComposeLayout(...)``. Raises LayoutError with a readable message."""
    import tirx.layout as L

    names = {name: getattr(L, name) for name in L.__all__}
    text = text.strip()
    if not text:
        raise LayoutError(
            "the layout text is empty", hint="for example S[(8, 4) : (4 @ laneid, 1)]"
        )
    try:
        value = eval(compile(text, "<layout>", "eval"), {"__builtins__": {}}, names)  # noqa: S307
    except LayoutError:
        raise
    except SyntaxError as e:
        raise LayoutError(
            f"cannot read {text!r}: {e.msg} at column {e.offset}",
            hint="write a spec like S[(8, 4) : (4 @ laneid, 1)] or TileLayout(...)",
        ) from None
    except Exception as e:  # a NameError, TypeError ... from the user's text
        raise LayoutError(
            f"cannot evaluate {text!r}: {type(e).__name__}: {e}",
            hint="use S, R, TileLayout, ComposeLayout and the axes of tirx.layout",
        ) from None
    if isinstance(value, L.LayoutSpec):
        value = L.TileLayout(value)
    if not isinstance(value, (L.TileLayout, L.ComposeLayout)):
        raise LayoutError(
            f"{text!r} is a {type(value).__name__}, not a layout",
            hint="write a spec like S[(8, 4) : (4 @ laneid, 1)]",
        )
    return value


def text(value, name: str):
    """A piece of text the picture shows (None: the default)."""
    if value is not None and not isinstance(value, str):
        raise ArgumentTypeError(f"{name} must be text (a str), got {value!r}",
                                hint=f"write {name}='...' or leave it out")  # fmt: skip
    return value


def choice(value, name: str, choices) -> object:
    """One of ``choices``, or an ArgumentError listing them."""
    if not isinstance(value, str) or value not in choices:
        raise ArgumentError(f"unknown {name} {value!r}",
                            hint=f"{name} is " + _either(choices))  # fmt: skip
    return value


def _either(choices) -> str:
    words = [repr(c) if c is not None else "None" for c in choices]
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " or " + words[-1]


def page(value, pages: int, name: str = "page") -> int:
    """A page number in ``0..pages-1``."""
    value = integer(value, name, "an int (a page number from 0)")
    if not 0 <= value < pages:
        span = "page=0 only" if pages == 1 else f"page=0..{pages - 1}"
        raise ArgumentError(f"{name}={value} is out of range: the picture has {pages} "
                            f"page{'s' if pages != 1 else ''} ({span})",
                            hint="view.pages says how many pages a picture has")  # fmt: skip
    return value


def refuse_cells(cells: int, what: str = "the picture") -> None:
    """A LayoutError when a picture would draw more than :data:`MAX_CELLS` elements."""
    if cells > MAX_CELLS:
        raise LayoutError(
            f"{what} covers {cells} elements; the notebook views show at most {MAX_CELLS} "
            "(128 x 128)",
            hint=SHOW_ONE_TILE,
        )


def bound(layout, per: int = 1) -> None:
    """Refuse, before any work, a layout whose picture would be too large: more than
    :data:`MAX_CELLS` elements (``per`` drawn per layout element), or more than
    :data:`MAX_COPIES` copies of them (replicas)."""
    tile = getattr(layout, "tile_layout", layout)
    cells = layout.size() * per
    refuse_cells(cells, "the layout")
    copies = math.prod(it.extent for it in tile.replica)
    if cells * copies > MAX_COPIES:
        raise LayoutError(
            f"the layout holds {copies} copies of each of its {cells} elements "
            f"({cells * copies} in all); the notebook views draw at most {MAX_COPIES}",
            hint="draw the layout without its replicas (R[...]), or " + SHOW_ONE_TILE,
        )
