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
"""

from __future__ import annotations

import ast
import itertools

from ...errors import TirxSyntaxError
from ...ir import nodes as ir
from ...ir.simplify import static_value

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
    start = ir.ElemSharedAddress(aview, tuple(aidx))
    value = ir.cast((start & 0x3FFFF) >> 4, ir.U64)
    value = value | (ir.cast(ldo, ir.U64) & _FIELD) << 16 | (ir.cast(sdo, ir.U64) & _FIELD) << 32
    mode = ir.cast((4 - ir.cast(swizzle, ir.I32)) & 3, ir.U64)
    ev.b.emit(ir.ElemStore(dview, tuple(didx), value | mode << 62, span))


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
