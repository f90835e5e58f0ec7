"""CUDA for the TMA tensor copies (``cp.async.bulk.tensor``): the inline PTX of each copy. It
takes the map's generic address (``"l"(&tirx_tmapK)``, the hidden parameter that
tirx/backend/cuda/tensor_maps.py declares), the coordinates innermost first as ``.s32``
registers and the barrier's shared address. The copy clobbers memory: shared bytes change
behind the C compiler's back."""

from __future__ import annotations

from ...backend.cuda.tensor_maps import map_index, map_name
from ...ir import nodes as ir
from ...ir.tensor_map import fields_count, tensor_map_of

__all__ = ["emit"]


def emit(gen, st: ir.PtxCall) -> None:
    """Emit the tensor copy ``st`` through ``gen`` (the codegen's line and operand printers)."""
    index = map_index(gen.fn)
    tm = tensor_map_of(st)
    rank = tm.fields.rank
    ops = st.operands
    dst, mbar = ops[0].address, ops[-1].address
    coords = [op.value for op in ops[2 + fields_count(rank) : -1]]
    ins = [("r", f"(unsigned int)({gen.e(dst)})"), ("l", f"&{map_name(index[tm])}")]
    ins += [("r", gen.operand(c, ir.I32)) for c in coords]
    ins.append(("r", f"(unsigned int)({gen.e(mbar)})"))
    cs = ", ".join(f"%{2 + i}" for i in range(rank))
    body = f"{st.instruction} [%0], [%1, {{{cs}}}], [%{2 + rank}];"
    args = ", ".join(f'"{c}"({x})' for c, x in ins)
    gen.line(f'asm volatile("{body}" : : {args} : "memory");')
