"""CUDA for the TMA tensor copies (``cp.async.bulk.tensor``, ``cp.reduce.async.bulk.tensor``):
the inline PTX of each copy. It takes the map's generic address (``"l"(&tirx_tmapK)``, the
hidden parameter that tirx/backend/cuda/tensor_maps.py declares), the coordinates innermost
first as ``.s32`` registers and the shared addresses: a load's destination and barrier
(``[dst], [map, {c..}], [mbar]``, then a multicast's 16-bit ``ctaMask``), a store's or
reduction's source (``[map, {c..}], [src]``).
Every copy clobbers memory: shared or global bytes change behind the C compiler's back."""

from __future__ import annotations

from ...backend.cuda.tensor_maps import map_index, map_name
from ...ir import nodes as ir
from ...ir.tensor_map import fields_count, map_position, tensor_map_of

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit the tensor copy ``st`` through ``gen`` (the codegen's line and operand printers)."""
    index = map_index(gen.fn)
    tm = tensor_map_of(st)
    at, rank = map_position(st)
    ops = st.operands
    first = at + 1 + fields_count(rank)
    coords = [("r", gen.operand(op.value, ir.I32)) for op in ops[first : first + rank]]
    tmap = ("l", f"&{map_name(index[tm])}")
    cs = ", ".join(f"%{1 + i + at}" for i in range(rank))
    if at == 0:  # a store or a reduction: [map, {coords}], [src]
        src = ops[-1].address
        ins = [tmap, *coords, ("r", f"(unsigned int)({gen.e(src)})")]
        body = f"{st.instruction} [%0, {{{cs}}}], [%{1 + rank}];"
    else:  # a load: [dst], [map, {coords}], [mbar]{, ctaMask}
        dst, mbar = ops[0].address, ops[first + rank].address
        ins = [("r", f"(unsigned int)({gen.e(dst)})"), tmap, *coords]
        ins.append(("r", f"(unsigned int)({gen.e(mbar)})"))
        body = f"{st.instruction} [%0], [%1, {{{cs}}}], [%{2 + rank}];"
        if len(ops) > first + rank + 1:  # .multicast::cluster: the 16-bit mask of ranks
            ins.append(("h", f"(unsigned short)({gen.operand(ops[-1].value, ir.U16)})"))
            body = body[:-1] + f", %{3 + rank};"
    args = ", ".join(f'"{c}"({x})' for c, x in ins)
    gen.line(f'asm volatile("{body}" : : {args} : "memory");')
