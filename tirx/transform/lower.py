"""Lower a script-level function to the level the backends consume.

* element accesses through views become flat ``Load``/``Store`` (index in the access dtype);
* tile operations are checked against their contracts and become per-lane ``PtxCall``s;
* shared buffers get byte offsets in the block's shared memory.

Errors raised while lowering a statement are located at that statement's line.
"""

from __future__ import annotations

from dataclasses import replace

from .. import catalog
from ..errors import CompileError, TirxError, TirxSyntaxError
from ..ir import nodes as ir
from ..ir.simplify import static_value
from ..ir.visitor import DESCEND, Transformer, rebuild
from ..isa import lookup
from ..isa.registry import spec_of
from ..isa.shared_rows import element_offset, known_definitions
from .inline_indices import inline_indices
from .limits import check_limits
from .raw_ptx import lower_raw_ptx
from .shared_memory import check_shared_limits
from .tile_ops import lower_tile_op
from .unroll import picks_registers, unrolled

# The families' lowering rules for their own node classes (atomics, warp collectives, ...)
# are in tirx/families/<family>/lower.py, found through the catalog at the first such node;
# a family's check(body, arch) runs once over the body as written (before lowering) of a
# kernel whose lowering met one of its nodes, and its finish_kernel(fn, arch) once over a
# kernel that holds one of its nodes or instructions.

__all__ = ["lower_function"]


def lower_function(fn: ir.Function, arch: int = 80) -> ir.Function:
    if fn.lowered:
        return fn
    _check_cluster_arch(fn, arch)
    lowerer = _Lowerer(arch)
    with known_definitions(fn):
        body = inline_indices(fn, lowerer.visit(fn.body))
    if lowerer.vectorized:  # T.vectorized
        from .vectorize import check_vectorized

        check_vectorized(body)
    offsets, total = _plan_shared(fn)
    check_shared_limits(fn, offsets, total, arch)
    check_limits(replace(fn, body=body))
    for row in lowerer.families:  # the families whose nodes the body holds
        check = catalog.rule(row, "lower", "check")
        if check is not None:
            check(fn.body, arch)  # as written: a fraction of the lowered body's nodes
    contracts = [lookup(t) for t in lowerer.instructions]
    lowered = replace(
        fn, body=body, lowered=True, shared_offsets=offsets, shared_bytes=total,
        arch_specific=any(c.arch_specific for c in contracts),  # sm_90a's wgmma
        tensor_maps=any(spec_of(c.family).tensor_maps for c in contracts),
    )  # fmt: skip
    # the families the kernel uses (a node class or an instruction of theirs) decide what they
    # decide about the kernel as a whole (setmaxnreg: the registers its launch reserves)
    rows = (lowerer.families | {catalog.row_of_ptx(t) for t in lowerer.instructions}) - {None}
    for row in sorted(rows, key=lambda r: r.folder):
        finish = catalog.rule(row, "lower", "finish_kernel")
        if finish is not None:
            lowered = finish(lowered, arch)
    return lowered


def _check_cluster_arch(fn: ir.Function, arch: int) -> None:
    """Thread-block clusters (``cluster=`` of the launch) exist from sm_90 on."""
    if fn.launch.cluster is not None and arch < 90:
        raise CompileError(
            f"'{fn.name}' is launched in clusters of {fn.launch.cluster} blocks, which need "
            f"sm_90 or newer; the target is sm_{arch}",
            fn.span,
            hint='compile with target="cuda -arch=sm_90" (or the simulator, which models '
            "sm_90), or drop cluster= from T.cuda.LaunchConfig",
        )


def _plan_shared(fn: ir.Function):
    offsets, cursor = {}, 0
    for buf in fn.allocations:
        if buf.scope is ir.Scope.SHARED:
            align = max(buf.align, 16)
            cursor = (cursor + align - 1) // align * align
            offsets[buf] = cursor
            cursor += buf.nbytes
    return offsets, cursor


def _noted(rule, family):
    """``rule``, which first notes that the lowering met a node of ``family`` (its ``check``
    and ``finish_kernel`` run after the lowering)."""

    def noted(lowerer, *args):
        lowerer.families.add(family)
        return rule(lowerer, *args)

    return noted


class _Lowerer(Transformer):
    """Script level to lowered level, over :class:`~tirx.ir.visitor.Transformer` (no
    recursion; a node class without a rule here raises)."""

    pass_name = "lowering"
    stage = "lower"
    # rebuilt from their lowered children as they are (a family's own classes: its lower.py's
    # REBUILT and KEPT)
    rebuilt = frozenset(
        {
            "Seq",
            "Assign",
            "While",
            "If",
            "Printf",
            "Logic",
            "Not",
            "Select",
            "Reinterpret",
            "View",
            "ScalarOperand",
        }
    )
    # already lowered (or leaves): returned as they are
    kept = frozenset(
        {
            "Const",
            "Var",
            "Buffer",
            "Load",
            "SharedAddress",
            "GlobalAddress",
            "Store",
            "PtxCall",
            "Break",
            "Continue",
            "Barrier",
            "Immediate",
        }
    )

    def __init__(self, arch: int):
        self.arch = arch
        self.vectorized = False  # met a T.vectorized loop
        self.families: set = set()  # the catalog rows whose node classes it met
        self.instructions: set[str] = set()  # the PTX instructions of its tile ops and raw calls

    def enter_For(self, s):
        # a T.unroll loop whose tile operations pick registers by its variable: one copy of
        # the body per iteration (tirx/transform/unroll.py)
        if picks_registers(s):
            return self.visit(unrolled(s))
        return DESCEND

    def leave_For(self, s, *children):
        self.vectorized = self.vectorized or s.kind is ir.LoopKind.VECTORIZED
        return rebuild(s, children)

    def _named_rule(self, name, family=None):
        rule = super()._named_rule(name, family)
        return rule if rule is None or family is None else _noted(rule, family)

    def _default(self, cls):
        # a family's class rebuilt or kept by its lower.py's REBUILT / KEPT: its family is met
        # as through a rule of its own (its check and finish_kernel run)
        found = super()._default(cls)
        family = catalog.row_of_node(cls.__name__)
        if found is None or family is None:
            return found
        return tuple(None if r is None else _noted(r, family) for r in found)

    def relocate(self, error, path):
        """A user error is located at the innermost statement around it that has a line."""
        if isinstance(error, TirxError):
            for node in reversed(path):
                if isinstance(node, ir.Stmt) and getattr(node, "span", None) is not None:
                    return error.with_span(node.span)
        return error

    def expr(self, e):
        return self.visit(e)

    # ------------------------------------------------------------------ statements

    def leave_ElemStore(self, s, view, indices, value):
        buf, index = self.address(view, indices, lowered=True)
        return ir.Store(buf, index, ir.cast(value, view.dtype), view.dtype, s.span)

    def enter_TileOp(self, s):
        self.instructions.add(s.instruction)
        return ir.Seq(tuple(lower_tile_op(s, self.arch)), s.span)

    def enter_RawPtx(self, s):
        call = lower_raw_ptx(s, self.arch, self.address)
        self.instructions.add(call.instruction)
        return ir.PtxCall(call.instruction, tuple(map(self.visit, call.operands)), call.span)

    # PtxCall operands made by lower_raw_ptx: the values in them are still script level
    def enter_RegVector(self, op):
        return DESCEND

    def leave_RegVector(self, op, regs):
        return ir.RegVector(regs, op.is_output)

    def enter_LocalReg(self, r):
        return r

    def leave_ValueReg(self, r, value):
        return ir.ValueReg(value)

    def enter_AddressOperand(self, op):
        return op

    def enter_Immediate(self, op):
        return op

    def leave_ScalarOperand(self, op, value):
        return ir.ScalarOperand(value)

    # ----------------------------------------------------------------- expressions

    def leaf(self, value):
        return value if value is None else ir.as_expr(value)

    def enter_Special(self, e):
        if e.kind in ir.CLUSTER_BUILTINS and self.arch < 90:
            raise CompileError(
                f"the cluster register {e.kind.value} exists from sm_90 on; the target is "
                f"sm_{self.arch}",
                hint='compile with target="cuda -arch=sm_90" (or the simulator)',
            )
        return e

    def leave_ElemLoad(self, e, view, indices):
        buf, index = self.address(view, indices, lowered=True)
        return ir.Load(buf, index, view.dtype)

    def leave_AddressOf(self, e, view, indices):  # T.address_of (tirx/script/forms.py)
        buf, index = self.address(view, indices, lowered=True)
        if buf.scope is ir.Scope.SHARED:
            return self.shared_address(view, index)
        return ir.GlobalAddress(buf, ir.cast(index, ir.U64) * view.dtype.bytes)

    @staticmethod
    def shared_address(view: ir.View, index) -> ir.SharedAddress:
        """The shared-window address of element ``index`` (in units of the view's dtype)."""
        return ir.SharedAddress(view.buffer, index * view.dtype.bytes)

    # rebuilt through the folding builders; unchanged operands were folded when first built
    def leave_BinOp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.binop(e.op, a, b)

    def leave_Cmp(self, e, a, b):
        return e if a is e.a and b is e.b else ir.cmp(e.op, a, b)

    def leave_Cast(self, e, value):
        return e if value is e.value else ir.cast(value, e.dtype)

    def address(self, view: ir.View, indices, lowered: bool = False):
        """(buffer, element index in view.dtype) of ``view[indices]`` (``lowered``: the view's
        offset and the indices are lowered already)."""
        layout = view.layout
        thread_axes = {a for a in _axes(layout) if a != "m"}
        if thread_axes:
            raise TirxSyntaxError(
                f"{view.name or view.buffer.name!r} is distributed over lanes "
                f"({', '.join(sorted(thread_axes))}); a thread can only index its own storage",
                hint="index the register array itself, e.g. dr[r]",
            )
        for d, (i, extent) in enumerate(zip(indices, view.shape)):
            v = static_value(i)
            if v is not None and not 0 <= v < extent:
                raise TirxSyntaxError(
                    f"index {v} is out of range for dimension {d} of extent {extent} "
                    f"of {view.name or view.buffer.name!r}"
                )
        coords = tuple(indices) if lowered else tuple(self.expr(i) for i in indices)
        return view.buffer, ir.as_expr(element_offset(view, coords))


def _axes(layout):
    inner = getattr(layout, "tile_layout", layout)
    return inner.axes()
