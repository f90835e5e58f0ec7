"""The IR: expressions, statements, buffers and functions.

Nodes are frozen dataclasses compared by identity (``eq=False``) so that expressions can
overload Python's arithmetic operators: the layout algebra applies layouts to run-time
indices (``lane // 4``) by calling ``+ - * // %`` on these objects, and the operators fold
constants as they build.

Two levels share these classes:

* the *script* level, produced by the parser, still holds views: :class:`ElemLoad`,
  :class:`ElemStore` and :class:`TileOp` refer to a :class:`View` (buffer + dtype + shape +
  layout + element offset);
* the *lowered* level, produced by ``tirx.transform``, holds only flat accesses
  (:class:`Load`, :class:`Store` with an element index in units of the access dtype) and
  per-lane instruction calls (:class:`PtxCall`). The CUDA backend and the simulator consume
  only the lowered level.

Integer ``//`` and ``%`` have floor semantics (Python's, and TVMScript's); ``/`` is true
division and yields a float. See docs/semantics.md.
"""

from __future__ import annotations

import enum
from dataclasses import field

from ..dtypes import DType, StrKind, dtype_of
from ..errors import Span
from ..frozen import Frozen, frozen
from .launch import LaunchConfig

I32 = dtype_of("int32")
U32 = dtype_of("uint32")
U64 = dtype_of("uint64")
U16 = dtype_of("uint16")
F32 = dtype_of("float32")
BOOL = dtype_of("bool")


# --------------------------------------------------------------------------- expressions


class _Enum(enum.Enum):
    """Hashed as the object (members are singletons compared by identity): ``Enum.__hash__``
    is a Python call, and the index simplifier's structural keys hash every operator."""

    __hash__ = object.__hash__


class Op(_Enum):
    ADD = "+"
    SUB = "-"
    MUL = "*"
    DIV = "/"  # true division (floats)
    FLOORDIV = "//"
    FLOORMOD = "%"
    MIN = "min"
    MAX = "max"
    SHL = "<<"
    SHR = ">>"
    BITAND = "&"
    BITOR = "|"
    BITXOR = "^"


class CmpOp(_Enum):
    EQ = "=="
    NE = "!="
    LT = "<"
    LE = "<="
    GT = ">"
    GE = ">="


def node(cls):
    """``@dataclass(frozen=True, eq=False, repr=False)`` for an IR node class (nodes compare by
    identity), made by :func:`tirx.frozen.frozen` at a fraction of the cost."""
    return frozen(cls, eq=False)


class Expr(Frozen):
    """Base of all expressions. Every expression has a ``dtype``."""

    dtype: DType

    # Arithmetic builds (and folds) IR; comparisons are built explicitly with :func:`cmp`.
    def __add__(self, o):
        return binop(Op.ADD, self, o)

    def __radd__(self, o):
        return binop(Op.ADD, o, self)

    def __sub__(self, o):
        return binop(Op.SUB, self, o)

    def __rsub__(self, o):
        return binop(Op.SUB, o, self)

    def __mul__(self, o):
        return binop(Op.MUL, self, o)

    def __rmul__(self, o):
        return binop(Op.MUL, o, self)

    def __truediv__(self, o):
        return binop(Op.DIV, self, o)

    def __rtruediv__(self, o):
        return binop(Op.DIV, o, self)

    def __floordiv__(self, o):
        return binop(Op.FLOORDIV, self, o)

    def __rfloordiv__(self, o):
        return binop(Op.FLOORDIV, o, self)

    def __mod__(self, o):
        return binop(Op.FLOORMOD, self, o)

    def __rmod__(self, o):
        return binop(Op.FLOORMOD, o, self)

    def __lshift__(self, o):
        return binop(Op.SHL, self, o)

    def __rlshift__(self, o):
        return binop(Op.SHL, o, self)

    def __rshift__(self, o):
        return binop(Op.SHR, self, o)

    def __rrshift__(self, o):
        return binop(Op.SHR, o, self)

    def __and__(self, o):
        return binop(Op.BITAND, self, o)

    def __rand__(self, o):
        return binop(Op.BITAND, o, self)

    def __or__(self, o):
        return binop(Op.BITOR, self, o)

    def __ror__(self, o):
        return binop(Op.BITOR, o, self)

    def __xor__(self, o):
        return binop(Op.BITXOR, self, o)

    def __rxor__(self, o):
        return binop(Op.BITXOR, o, self)

    def __neg__(self):
        return binop(Op.SUB, const(0, self.dtype), self)

    def __bool__(self):
        raise TypeError("an IR expression has no truth value at compile time")


@node
class Const(Expr):
    value: int | float | bool
    dtype: DType = I32


@node
class Var(Expr):
    """A scalar: a kernel parameter, a loop variable or a local variable."""

    name: str
    dtype: DType = I32


class Builtin(_Enum):
    LANE_ID = "lane_id"
    WARP_ID = "warp_id"
    THREAD_IDX = "thread_idx"
    BLOCK_IDX = "block_idx"
    BLOCK_DIM = "block_dim"
    GRID_DIM = "grid_dim"
    # clusters (sm_90): %cluster_ctaid, _nctaid, %clusterid, %nclusterid, %cluster_[n]ctarank
    CLUSTER_CTA_ID, CLUSTER_DIM, CLUSTER_ID = "cluster_cta_id", "cluster_dim", "cluster_id"
    CLUSTER_COUNT, CLUSTER_CTA_RANK = "nclusterid", "cluster_ctarank"
    CLUSTER_SIZE = "cluster_nctarank"  # (their sets: expr_nodes.py)


@node
class Special(Expr):
    """A thread-index value: ``kind`` is a :class:`Builtin`, ``dim`` 0/1/2 for x/y/z.

    ``lane_id`` is ``linear_tid % 32`` and ``warp_id`` is ``linear_tid // 32`` where
    ``linear_tid = tx + bdx * (ty + bdy * tz)``.
    """

    kind: Builtin
    dim: int = 0
    dtype: DType = I32


@node
class BinOp(Expr):
    op: Op
    a: Expr
    b: Expr
    dtype: DType


@node
class Cmp(Expr):
    op: CmpOp
    a: Expr
    b: Expr
    dtype: DType = BOOL


@node
class Logic(Expr):
    """``and`` / ``or`` (short-circuit is not observable: operands have no side effects)."""

    op: str  # "and" | "or"
    a: Expr
    b: Expr
    dtype: DType = BOOL


@node
class Not(Expr):
    a: Expr
    dtype: DType = BOOL


@node
class Select(Expr):
    cond: Expr
    a: Expr
    b: Expr
    dtype: DType


@node
class Cast(Expr):
    """Value conversion to ``dtype`` (C semantics; float→int truncates toward zero)."""

    value: Expr
    dtype: DType


# ------------------------------------------------------------------------------ buffers


class Scope(_Enum):
    GLOBAL = "global"
    SHARED = "shared"
    LOCAL = "local"


@node
class Buffer(Frozen):
    """Storage: a global tensor parameter, a shared allocation or a per-thread local array.

    ``layout`` maps the logical ``shape`` to storage (memory axis ``m``, in elements of
    ``dtype``); ``elements`` is the storage size in elements (the layout's memory span).
    """

    name: str
    dtype: DType
    scope: Scope
    shape: tuple[int, ...]
    layout: object  # tirx.layout.TileLayout | ComposeLayout
    elements: int
    align: int = 16
    span: Span | None = None
    dynamic: bool = False  # shared memory declared scope="shared.dyn" (may exceed 48 KB)

    @property
    def nbytes(self) -> int:
        return self.elements * self.dtype.bytes


@node
class View(Frozen):
    """A tensor seen through (dtype, shape, layout, elem_offset) over a buffer.

    ``elem_offset`` is in elements of ``dtype`` from the buffer's start; the address of
    ``view[x]`` is ``elem_offset + layout.apply(*x, shape=shape)["m"]`` (elements of dtype).
    """

    buffer: Buffer
    dtype: DType
    shape: tuple[int, ...]
    layout: object
    elem_offset: Expr | int = 0
    name: str = ""


@node
class ElemLoad(Expr):
    """Script level: ``view[indices]``."""

    view: View
    indices: tuple[Expr | int, ...]
    dtype: DType


@node
class Load(Expr):
    """Lowered: ``((dtype*)buffer)[index]``."""

    buffer: Buffer
    index: Expr | int
    dtype: DType


@node
class SharedAddress(Expr):
    """Lowered: the 32-bit shared-window address of byte ``byte_offset`` of a shared buffer."""

    buffer: Buffer
    byte_offset: Expr | int
    dtype: DType = U32


# --------------------------------------------------------------------------- statements


class Stmt(Frozen):
    span: Span | None


@node
class Seq(Stmt):
    stmts: tuple[Stmt, ...]
    span: Span | None = None


@node
class Assign(Stmt):
    var: Var
    value: Expr
    span: Span | None = None


@node
class ElemStore(Stmt):
    """Script level: ``view[indices] = value``."""

    view: View
    indices: tuple[Expr | int, ...]
    value: Expr
    span: Span | None = None


@node
class Store(Stmt):
    """Lowered: ``((dtype*)buffer)[index] = value`` (value already of ``dtype``)."""

    buffer: Buffer
    index: Expr | int
    value: Expr
    dtype: DType
    span: Span | None = None


class LoopKind(_Enum):
    SERIAL = "serial"
    UNROLL = "unroll"
    VECTORIZED = "vectorized"  # T.vectorized: see tirx/transform/vectorize.py


@node
class For(Stmt):
    """``for var in range(start, stop, step)``; ``step`` is a nonzero compile-time int."""

    var: Var
    start: Expr
    stop: Expr
    step: int
    body: Stmt
    kind: LoopKind = LoopKind.SERIAL
    span: Span | None = None


@node
class While(Stmt):
    cond: Expr
    body: Stmt
    span: Span | None = None


@node
class If(Stmt):
    cond: Expr
    then_body: Stmt
    else_body: Stmt | None = None
    span: Span | None = None


@node
class Break(Stmt):
    span: Span | None = None


@node
class Continue(Stmt):
    span: Span | None = None


class BarrierScope(StrKind):
    """Which threads a barrier waits for."""

    CTA = "cta"  # __syncthreads
    WARP = "warp"  # __syncwarp


@node
class Barrier(Stmt):
    """``scope`` is :attr:`BarrierScope.CTA` (``__syncthreads``) or ``WARP`` (``__syncwarp``)."""

    scope: BarrierScope
    span: Span | None = None

    def __post_init__(self):
        object.__setattr__(self, "scope", BarrierScope(self.scope))  # "cta" works too


@node
class Printf(Stmt):
    fmt: str
    args: tuple[Expr, ...]
    span: Span | None = None


class ExecScope(StrKind):
    """The group of threads that executes a tile operation together (``scope=``)."""

    THREAD = "thread"
    WARP = "warp"
    WARPGROUP = "warpgroup"
    CTA = "cta"
    CLUSTER = "cluster"


@node
class TileOp(Stmt):
    """Script level: ``T.cuda.tile.apply(instruction, *operands, scope=...)``.

    Operands are :class:`View` objects or scalar expressions (e.g. ``T.float32(0)`` for C).
    ``params`` holds the other keyword arguments in source order (``chunk_bytes=16``,
    ``src_size=n`` of cp.async) as ``(name, value)`` pairs.
    """

    instruction: str
    operands: tuple[View | Expr, ...]
    scope: ExecScope
    span: Span | None = None
    operand_spans: tuple[Span | None, ...] = ()
    params: tuple[tuple[str, object], ...] = ()

    def __post_init__(self):
        object.__setattr__(self, "scope", ExecScope(self.scope))  # "warp" works too


@node
class RawPtx(Stmt):
    """Script level: ``T.ptx["..."](*operands)`` with scalar operands in PTX order.

    Register operands are elements of local buffers (``ar[0]``, written or read) or values
    (inputs); an address operand is an element of a shared tensor (``a[r, c]``: its address).
    """

    instruction: str
    operands: tuple[Expr, ...]
    span: Span | None = None
    operand_spans: tuple[Span | None, ...] = ()


# PTX call operands (lowered level) ------------------------------------------------------


@node
class LocalReg(Frozen):
    """Register ``slot`` of a local buffer, read as ``dtype`` (slot in units of dtype)."""

    buffer: Buffer
    slot: int
    dtype: DType


@node
class ValueReg(Frozen):
    """An input register given by a value (e.g. the constant C of an mma)."""

    value: Expr

    @property
    def dtype(self) -> DType:
        return self.value.dtype


Reg = LocalReg | ValueReg


@node
class RegVector(Frozen):
    """A braced register list ``{%0, %1, ...}`` (or one register when ``len == 1``)."""

    regs: tuple[Reg, ...]
    is_output: bool


@node
class AddressOperand(Frozen):
    """A ``[addr]`` operand: a 32-bit shared-window address expression."""

    address: Expr


@node
class GlobalAddress(Expr):
    """Lowered: the 64-bit generic address of byte ``byte_offset`` of a global tensor."""

    buffer: Buffer
    byte_offset: Expr | int
    dtype: DType = U64


@node
class Immediate(Frozen):
    """An integer immediate operand, printed literally (cp.async's cp-size, wait_group's N)."""

    value: int


@node
class ScalarOperand(Frozen):
    """One scalar input register printed without braces (cp.async's src-size)."""

    value: Expr


PtxOperand = RegVector | AddressOperand | Immediate | ScalarOperand


@node
class PtxCall(Stmt):
    """Lowered: one PTX instruction executed by every active thread.

    ``instruction`` is the full instruction text as the user wrote it (no operands);
    ``operands`` follow PTX order. Warp-collective instructions (ldmatrix, stmatrix, mma)
    require all 32 lanes of the warp to execute them together.
    """

    instruction: str
    operands: tuple[PtxOperand, ...]
    span: Span | None = None


# ----------------------------------------------------------------------------- function


Param = Buffer | Var


@node
class Function(Frozen):
    """A kernel. ``allocations`` are its shared and local buffers, ``variables`` its scalar
    locals (declared once at the top of the kernel). After lowering, ``shared_offsets`` gives
    each shared buffer's byte offset in the block's shared memory and ``shared_bytes`` the total.
    """

    name: str
    params: tuple[Param, ...]
    body: Stmt
    launch: LaunchConfig
    allocations: tuple[Buffer, ...] = ()
    variables: tuple[Var, ...] = ()
    span: Span | None = None
    lowered: bool = False
    shared_offsets: dict = field(default_factory=dict)
    shared_bytes: int = 0
    # lowered: the body uses a form of the target's arch-specific feature set (sm_90a's
    # wgmma), so the CUDA backend compiles it for sm_XXa
    arch_specific: bool = False
    # lowered: the body has TMA tensor copies, whose maps are hidden parameters (tensor_map.py)
    tensor_maps: bool = False
    # lowered: the registers per thread the kernel's launch reserves, when the kernel must know
    # them (setmaxnreg moves registers between warps of a pool of that size); codegen then
    # writes __launch_bounds__(threads, 1), for which ptxas allocates exactly this many
    launch_registers: int | None = None


# Builders live in build.py; re-exported here so ``nodes.binop`` etc. keep working.
from .build import as_expr, binop, cast, cmp, const, promote  # noqa: E402,F401

# The expression nodes of the language forms, in expr_nodes.py (the node classes of a family's
# own statements and expressions live in its folder's nodes.py, tirx/families/<folder>/nodes.py,
# which its catalog row names)
from .expr_nodes import *  # noqa: E402,F401,F403
