"""The script side of wgmma: ``T.cuda.wgmma.encode_matrix_descriptor`` and the accumulator
tensor of a raw ``T.ptx["wgmma.mma_async..."]`` call, one operand per element (docs/instructions.md, wgmma).

``T.cuda.wgmma.encode_matrix_descriptor(desc, addr, ldo, sdo, swizzle)`` is the real TIRx's
helper: it writes into ``desc`` (a local ``uint64`` element, ``desc[0]``, or its address
``desc.ptr_to([0])``) the 64-bit shared-memory matrix descriptor of the PTX ISA ("Matrix
Descriptor Format") whose start is the shared element ``addr`` (``tile[r, c]``,
``tile.ptr_to([r, c])`` or ``T.address_of(tile[r, c])``), with leading- and stride-dimension
byte offsets ``ldo`` and ``sdo`` in 16-byte units and ``swizzle`` numbered as the helper numbers
it: 0 none, 1 32-byte, 2 64-byte, 3 128-byte. The descriptor's bits 62-63 hold the ISA's own
numbering (0 none, 1 128B, 2 64B, 3 32B), ``(4 - swizzle) % 4``; the base offset is 0. It is
an ordinary store of an integer expression, so both targets run it as they run any other.
Where ``addr``'s buffer was declared with a hardware swizzle and ``swizzle`` is a compile-time
value, the call is checked against that layout (``_against_layout``: the mode, the buffer's
alignment, the start's row phase; docs/wgmma.md, "Raw descriptors are checked ...").
"""

from __future__ import annotations

import ast
import itertools

from ...errors import ContractError, TirxSyntaxError
from ...ir import nodes as ir
from ...ir.simplify import static_value
from ...ir.simplify_index import simplify_index
from ...isa.operands import passed
from ...isa.shared_rows import element_offset, residue
from ...layout.swizzle import ComposeLayout
from .isa_descriptor import Swizzle, check_align, mode_of

__all__ = ["parse_call", "raw_operands", "encode_descriptor"]

_USE = "T.cuda.wgmma.encode_matrix_descriptor(desc[0], tile[r, c], ldo, sdo, swizzle)"
_FIELD = (1 << 14) - 1


def parse_call(ev, key: str, node: ast.Call, name_hint=None) -> None:
    """``T.cuda.wgmma.encode_matrix_descriptor(...)`` (or its flat spelling
    ``T.cuda.wgmma_encode_matrix_descriptor``)."""
    return encode_descriptor(ev, node, ev.p.span(node))


def encode_descriptor(ev, node: ast.Call, span) -> None:
    if len(node.args) != 5 or node.keywords:
        raise TirxSyntaxError(
            "T.cuda.wgmma.encode_matrix_descriptor takes five operands: desc, addr, ldo, sdo, "
            "swizzle",
            span,
            hint=_USE,
        )
    desc_node, addr_node, *field_nodes = node.args
    dview, didx = _element(ev, desc_node, "desc")
    if dview.buffer.scope is not ir.Scope.LOCAL or dview.dtype.name != "uint64":
        raise TirxSyntaxError(
            f"desc must be an element of a local uint64 tensor, got a {dview.dtype} element of "
            f"{dview.buffer.scope.value} tensor {dview.buffer.name!r}",
            ev.p.span(desc_node),
            hint='desc = T.alloc_local((1,), "uint64"); then ' + _USE,
        )
    aview, aidx = _element(ev, addr_node, "addr")
    if aview.buffer.scope is not ir.Scope.SHARED:
        raise TirxSyntaxError(
            f"addr must be an element of a shared tensor (the matrix's start), got one of "
            f"{aview.buffer.scope.value} tensor {aview.buffer.name!r}",
            ev.p.span(addr_node),
            hint="pass the first element of the shared tile: tile[r, c]",
        )
    ldo, sdo, swizzle = (
        _field(ev, n, name, hi)
        for n, name, hi in zip(field_nodes, ("ldo", "sdo", "swizzle"), (_FIELD, _FIELD, 3))
    )
    _against_layout(ev, aview, aidx, swizzle, node)
    start = ir.ElemSharedAddress(aview, tuple(aidx))
    value = ir.cast((start & 0x3FFFF) >> 4, ir.U64)
    value = value | (ir.cast(ldo, ir.U64) & _FIELD) << 16 | (ir.cast(sdo, ir.U64) & _FIELD) << 32
    mode = ir.cast((4 - ir.cast(swizzle, ir.I32)) & 3, ir.U64)
    ev.b.emit(ir.ElemStore(dview, tuple(didx), value | mode << 62, span))


# The helper's swizzle numbering (0 none, 1 32B, 2 64B, 3 128B) and the modes it names.
_MODES = {0: Swizzle.NONE, 1: Swizzle.B32, 2: Swizzle.B64, 3: Swizzle.B128}
_NUMBER = {mode: n for n, mode in _MODES.items()}


def _against_layout(ev, view: ir.View, idx, swizzle, node: ast.Call) -> None:
    """A raw descriptor of a shared buffer declared with a hardware swizzle (a
    ``ComposeLayout``, as TMA's ``swizzle=`` fills it) holds that buffer as the tile form's
    would: the same swizzle mode, the buffer aligned to its period, and a start whose row
    phase is 0 (the address the helper takes is the element's, after the swizzle; the
    hardware swizzles the addresses it computes from the start again). A ContractError at
    the call where one of these is known at compile time to fail; nothing where it is not
    known (a run-time swizzle argument or start) or the buffer is not swizzled."""
    buf, number = view.buffer, static_value(swizzle)
    if number not in _MODES or not isinstance(buf.layout, ComposeLayout):
        return
    try:
        mode = passed(
            ("raw descriptor mode", buf.layout, buf.dtype.bytes),
            lambda: mode_of(buf.layout, buf.dtype.bytes, buf.name),
        )
    except ContractError:  # a swizzle no descriptor has: no mode to compare with
        return
    if mode is Swizzle.NONE:
        return
    span, where = ev.p.span(node), f"the descriptor of {_text(node.args[1], buf)}"
    layout = buf.layout
    if _MODES[number] is not mode:
        raise ContractError(
            f"{where}: {buf.name!r} is laid out with the {mode.label} (ComposeLayout("
            f"{layout.per_element}, {layout.swizzle_len}, {layout.atom_len}, ...)), but the "
            f"swizzle argument {number} says {_MODES[number].label}: the hardware would read "
            "the tile through the wrong pattern",
            span,
            hint=f"pass swizzle {_NUMBER[mode]} (the helper's numbering: 0 none, 1 32-byte, "
            f"2 64-byte, 3 128-byte): {_USE.replace('swizzle)', f'{_NUMBER[mode]})')}",
        )
    check_align(where, buf, mode, span)
    phase = _start_line(view, idx, mode)
    if phase:
        rows = 128 // mode.row_bytes
        first = "row 0" if rows == 1 else f"rows 0-{rows - 1}"
        raise ContractError(
            f"{where}: the start lies in 128-byte line {phase} of the {mode.label}'s "
            f"{mode.period}-byte pattern, where the swizzle moves the element; the descriptor "
            "takes its address after the swizzle, and the hardware swizzles every address it "
            "computes from the start again, so the rows would be read from the wrong 16-byte "
            "chunks",
            span,
            hint=f"start a raw descriptor in the first 128 bytes of a swizzle pattern ({first} "
            f"of every 8 rows of {mode.row_bytes} bytes, where the swizzle leaves the address "
            "as it is), or use the tile form, T.cuda.tile.apply(T.ptx["
            '"wgmma..."], D, A, B), which passes the address before the swizzle',
        )


def _start_line(view: ir.View, idx, mode: Swizzle) -> int | None:
    """The 128-byte line of the swizzle's pattern the descriptor's start lies in (where the
    swizzle XORs the 16-byte chunk with it), or None where it is not known at compile time.
    A start whose run-time parts move it by whole periods has one; so does ``tile[r, 16 * kk]``
    of a loop variable ``kk`` where every column of row ``r`` lies in the same line."""
    size, lines = view.dtype.bytes, mode.period // 128 - 1

    def line(offset) -> int | None:
        known = residue(simplify_index(ir.as_expr(offset)), mode.period)
        return None if known is None else (known >> 7) & lines

    found = line(element_offset(view, idx, swizzled=False) * size)
    if found is not None or not idx or static_value(idx[-1]) is not None:
        return found
    *head, _ = idx
    row = element_offset(view, (*head, 0), swizzled=False)
    known = residue(simplify_index(ir.as_expr(row * size)), mode.period)
    if known is None:
        return None
    origin = [0] * len(head)
    zero = static_value(element_offset(view, (*origin, 0), swizzled=False))
    found_lines = set()
    for c in range(view.shape[-1]):
        at = static_value(element_offset(view, (*origin, c), swizzled=False))
        if at is None or zero is None:
            return None
        found_lines.add((((known + (at - zero) * size) % mode.period) >> 7) & lines)
    return found_lines.pop() if len(found_lines) == 1 else None


def _text(node, buf) -> str:
    try:
        return ast.unparse(node)
    except Exception:  # noqa: BLE001 - a spread argument (f(*xs)) has no source text
        return f"an element of {buf.name!r}"


def _field(ev, node, name: str, hi: int):
    v = ev.scalar(node)
    if isinstance(v, ir.Expr) and v.dtype.kind not in ("int", "uint"):
        raise TirxSyntaxError(f"{name} must be an integer, got {v.dtype}", ev.p.span(node))
    known = static_value(v)
    if known is not None and not 0 <= known <= hi:
        what = "in 16-byte units, 14 bits" if hi == _FIELD else "0 none, 1 32B, 2 64B, 3 128B"
        raise TirxSyntaxError(
            f"{name} is {known}, outside 0..{hi} ({what})", ev.p.span(node), hint=_USE
        )
    return ir.as_expr(v)


def _element(ev, node, what: str):
    """``(view, indices)`` of ``t[i, ...]``, ``t.ptr_to([i, ...])`` or ``T.address_of(t[...])``."""
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
        attr = node.func.attr
        if attr == "ptr_to" and len(node.args) == 1 and not node.keywords:
            view = ev.value(node.func.value)
            items = node.args[0]
            elts = items.elts if isinstance(items, (ast.List, ast.Tuple)) else [items]
            if isinstance(view, ir.View) and len(elts) == len(view.shape):
                return view, [ev.scalar(e) for e in elts]
        if attr == "address_of" and len(node.args) == 1 and not node.keywords:
            node = node.args[0]
    value = ev.value(node) if not isinstance(node, ast.Call) else None
    if isinstance(value, ir.ElemLoad):
        return value.view, list(value.indices)
    raise TirxSyntaxError(
        f"{what} must be one tensor element (or its address, t.ptr_to([i, ...]))",
        ev.p.span(node),
        hint=_USE,
    )


def raw_operands(view: ir.View) -> list[ir.ElemLoad]:
    """A tensor given as the accumulator of a raw mma_async: its elements in row-major order
    (the lowering checks that they are N/2 local float32 registers)."""
    return [
        ir.ElemLoad(view, idx, view.dtype)
        for idx in itertools.product(*(range(e) for e in view.shape))
    ]
