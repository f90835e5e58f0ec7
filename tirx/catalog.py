"""The one table of instruction and construct families, and the only way stage code reaches them.

Each family's code lives in one folder, ``tirx/families/<folder>/``, with files named by the
stage they serve:

=============  ===========================================================================
``isa.py``     the contract (``SPECS``: one :class:`~tirx.isa.core.FamilySpec` per PTX
               mnemonic of the row): forms, operand checks, lane maps, lowering to PTX calls
``script.py``  the parser of the family's ``T`` / ``T.cuda`` calls: ``parse_call(evaluator,
               key, node, name_hint)``; optionally ``raw_operands(evaluator, text, value)``,
               the scalar operands a raw ``T.ptx`` call takes for one argument; the
               printer's rules for its own node classes (``visit_X(printer, node)`` for a
               statement, ``leave_X(printer, node, *children)`` for an expression)
``lower.py``   lowering rules for the family's IR node classes (``enter_X``/``leave_X`` of
               :mod:`tirx.transform.lower`, or the class's name in ``REBUILT`` or
               ``KEPT``), and optionally ``check(body, arch)``, run once
               over the body as written (before lowering) of a kernel whose lowering met
               one of them, and ``finish_kernel(fn, arch)``, run once over a lowered kernel
               that holds one of them or one of the family's PTX instructions: it returns
               the kernel with what the family decides about it as a whole (setmaxnreg:
               the registers its launch reserves)
``cuda.py``    the CUDA of the family's PTX calls (``emit(gen, call)``), codegen rules for its
               node classes (``leave_X`` for expressions, ``visit_X`` for statements) and
               optionally ``PRELUDE``, helper functions its C calls (or ``PRELUDES``,
               several, each emitted only where the C calls one of its helpers)
``sim.py``     the simulator's semantics, written from the PTX ISA: ``compile_call(machine,
               compiler, call, text)`` for its PTX calls, ``compile_X(machine, node)`` for its
               statements and ``eval_X(compiler, node)`` for its expressions
``nodes.py``   the IR node classes of a family whose calls are statements or expressions of
               their own (the row's ``nodes`` that are not the core's): dataclasses made
               with :func:`tirx.ir.nodes.node`, which the IR visitor walks as it walks the
               core's (tirx/ir/visitor.py); a node that reads or writes tensors says which
               (``tensor_effects()``, tirx/signature.py), one that needs a global tensor's
               pointer aligned says how (``aligned_accesses()``, tirx/ir/aligned_access.py)
=============  ===========================================================================

plus files by role where a family is large, named ``<stage>_<role>.py`` (``isa_descriptor.py``,
``sim_async.py``). A row lists the stages its folder has; :func:`stage` imports one on first use,
so a kernel pays for the families it uses and no more. A family's ``sim*.py`` never imports
``tirx.isa`` or its own ``isa*.py`` (the simulator is an independent reading of the ISA), and
no family imports another's modules; ``tests/test_architecture.py`` holds both rules.

:class:`Family` (one member per PTX mnemonic) is made from the rows, so adding a family is its
folder, its row here and its tests.
"""

from __future__ import annotations

import enum
import functools
import importlib
from types import ModuleType

from .frozen import Frozen, frozen

__all__ = [
    "Row",
    "ROWS",
    "Family",
    "STAGES",
    "row_of_ptx",
    "row_of_family",
    "row_of_key",
    "row_of_node",
    "node_names",
    "node_class",
    "is_node_module",
    "stage",
    "loaded",
    "call_keys",
    "tile_params",
]

#: the stage modules a family folder may have (files by role besides these are its own)
STAGES = ("isa", "script", "lower", "cuda", "sim", "nodes")


@frozen
class Row(Frozen):
    """One family: its folder, the PTX mnemonics it implements (each a :class:`Family` member;
    a mnemonic may contain dots, and a text belongs to the longest mnemonic that is a dotted
    prefix of it), the ``T.<name>`` and ``T.cuda.<name>`` calls it parses (a name with a dot
    is a sub-namespace: ``wgmma.encode_matrix_descriptor``), the IR node classes whose stage
    rules it holds, the keyword parameters its tile operations take besides ``scope``, and
    the stage modules its folder has."""

    folder: str
    stages: tuple[str, ...]
    ptx: tuple[str, ...] = ()
    t_names: tuple[str, ...] = ()
    cuda_names: tuple[str, ...] = ()
    nodes: tuple[str, ...] = ()
    tile_params: tuple[str, ...] = ()

    def __post_init__(self):
        unknown = set(self.stages) - set(STAGES)
        if unknown:
            raise ValueError(f"catalog row {self.folder!r}: unknown stages {sorted(unknown)}")

    @property
    def keys(self) -> tuple[str, ...]:
        """The parser's keys of its calls: ``"<name>"`` and ``"cuda.<name>"``."""
        return self.t_names + tuple(f"cuda.{n}" for n in self.cuda_names)


_MATH = (
    *("exp", "exp2", "exp10", "log", "log2", "log10", "sqrt", "rsqrt", "tanh", "sigmoid"),
    *("sin", "cos", "erf", "fabs", "floor", "ceil", "nearbyint", "trunc", "tan", "asin"),
    *("acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh", "log1p", "round", "pow"),
    *("atan2", "hypot", "fmod", "copysign", "nextafter", "ldexp", "fma", "abs", "max", "min"),
    *("isnan", "isinf", "isfinite", "infinity", "min_value", "max_value", "truncdiv"),
    *("truncmod", "floordiv", "floormod", "ceildiv", "bitwise_and", "bitwise_or"),
    *("bitwise_xor", "bitwise_not", "shift_left", "shift_right", "clz", "popcount"),
)

ROWS: tuple[Row, ...] = (
    # warp matrix instructions
    Row("mma", ("isa", "sim"), ptx=("mma",)),
    Row("ldmatrix", ("isa", "sim"), ptx=("ldmatrix",)),
    Row("stmatrix", ("isa", "sim"), ptx=("stmatrix",)),
    Row("movmatrix", ("isa", "cuda", "sim"), ptx=("movmatrix",)),
    # asynchronous copies, proxies and barriers
    Row(
        "cp_async",
        ("isa", "sim"),
        ptx=("cp.async",),
        tile_params=("chunk_bytes", "src_size", "pred"),
    ),  # fmt: skip
    Row("cp_async_bulk", ("isa", "sim"), ptx=("cp.async.bulk",)),
    Row("fence_proxy", ("isa", "sim"), ptx=("fence.proxy",)),
    Row(
        "mbarrier",
        ("isa", "script", "cuda", "sim"),
        ptx=("mbarrier", "cp.async.mbarrier", "fence.mbarrier_init"),
        cuda_names=("mbarrier_wait", "mbarrier_wait_acquire_cluster"),
    ),  # fmt: skip
    # Hopper's warpgroup matrix instructions
    Row(
        "wgmma",
        ("isa", "script", "cuda", "sim"),
        ptx=("wgmma",),
        cuda_names=("wgmma.encode_matrix_descriptor", "wgmma_encode_matrix_descriptor"),
        tile_params=("scale_d", "scale_a", "scale_b"),
    ),  # fmt: skip
    # Hopper's register reallocation between warpgroups (warp specialization)
    Row("setmaxnreg", ("isa", "lower", "cuda", "sim"), ptx=("setmaxnreg",)),
    # Hopper's tensor copies (TMA)
    Row(
        "tma",
        ("isa", "cuda", "sim"),
        ptx=("cp.async.bulk.tensor", "cp.reduce.async.bulk.tensor"),
        tile_params=(
            *("box", "coords", "mbar", "swizzle", "l2_promotion", "coord_steps"),
            "cta_mask",
        ),
    ),  # fmt: skip
    # thread-block clusters: the cluster barrier and distributed shared memory
    Row(
        "cluster",
        ("isa", "script", "cuda", "sim"),
        ptx=("barrier.cluster", "mapa", "ld.shared::cluster", "st.shared::cluster"),
        cuda_names=("cluster_sync",),
    ),  # fmt: skip
    # the CTA's named barriers (bar.sync / bar.arrive with a thread count)
    Row(
        "named_barrier",
        ("isa", "script", "cuda", "sim"),
        ptx=("bar", "barrier"),
        cuda_names=("warpgroup_sync",),
    ),  # fmt: skip
    # register-only float instructions CUDA's library gives only under fast math: the .approx
    # functions of the special function unit, and max/min with .ftz and .NaN
    Row(
        "float_ops",
        ("isa", "cuda", "sim"),
        ptx=("ex2", "lg2", "sin", "cos", "tanh", "rcp", "rsqrt", "max", "min"),
    ),  # fmt: skip
    # construct families: calls of T and T.cuda with IR nodes of their own
    Row(
        "warp_collectives",
        ("script", "lower", "cuda", "sim", "nodes"),
        t_names=(
            *("gpu_warp_shuffle", "gpu_warp_shuffle_up", "gpu_warp_shuffle_down"),
            *("gpu_warp_shuffle_xor", "gpu_warp_activemask"),
        ),
        cuda_names=(
            *("__shfl_sync", "__shfl_up_sync", "__shfl_down_sync", "__shfl_xor_sync"),
            *("__activemask", "ballot_sync", "any_sync", "elect_sync", "warp_reduce"),
            *("warp_sum", "warp_max", "warp_min", "reduce_add_sync_u32", "reduce_min_sync_u32"),
        ),
        nodes=("WarpCollective",),
    ),  # fmt: skip
    Row(
        "cta_ops",
        ("script", "lower", "cuda", "sim", "nodes"),
        t_names=("atomic_add",),
        cuda_names=(
            *("atomic_add", "atomic_cas", "thread_fence", "syncthreads_and", "syncthreads_or"),
            *("cta_sum", "cta_max", "cta_min", "cta_reduce", "cvta_generic_to_shared"),
        ),
        nodes=(
            *("ElemAtomic", "CtaReduce", "ElemSharedAddress"),
            *("Atomic", "ThreadFence", "VotingBarrier"),
        ),
    ),  # fmt: skip
    # one thread's own operations: a sleep, the cycle counter, a device-side assert, a register
    # fence for the compiler
    Row(
        "thread_ops",
        ("script", "lower", "cuda", "sim", "nodes"),
        t_names=("assume", "assume_always", "assume_aligned"),
        cuda_names=(
            *("nano_sleep", "clock64", "trap_when_assert_failed"),
            *("wgmma.noop_barrier", "wgmma_noop_barrier"),
        ),
        nodes=("NanoSleep", "Clock", "AssertTrap", "Assume", "RegisterFence"),
    ),  # fmt: skip
    # float32 pairs to float16 pairs and back, from memory to memory through element addresses
    Row(
        "half_conversions",
        ("script", "lower", "cuda", "sim", "nodes"),
        cuda_names=("float22half2", "half8tofloat8", "float8tohalf8"),
        nodes=("HalfConversion",),
    ),  # fmt: skip
    Row(
        "math",
        ("script", "lower", "cuda", "sim", "nodes"),
        t_names=_MATH,
        cuda_names=(
            *("ffs_u32", "float_as_uint", "uint_as_float", "half2float", "bfloat162float"),
            *("smem_addr_from_uint64", "hmax2", "hmin2", "float22bfloat162_rn"),
            *("float22bfloat162_rn_from_float2", "bfloat1622float2", "fdividef"),
            *("make_float2", "float2_x", "float2_y", "fadd2_rn", "fmul2_rn"),
            "fp8x4_e4m3_from_float4",
        ),
        nodes=("MathCall",),
    ),  # fmt: skip
)


def _member(mnemonic: str) -> str:
    """The member name of a mnemonic: ``cp.async.bulk`` -> ``CP_ASYNC_BULK``,
    ``ld.shared::cluster`` -> ``LD_SHARED__CLUSTER``."""
    return mnemonic.upper().replace("::", "__").replace(".", "_")


Family = enum.Enum(
    "Family",
    [(_member(p), p) for row in ROWS for p in row.ptx],
    module=__name__,
    qualname="Family",
)
Family.__doc__ = """An instruction family: one PTX mnemonic of a catalog row (its value)."""

_BY_FOLDER = {row.folder: row for row in ROWS}
_BY_MNEMONIC = {p: row for row in ROWS for p in row.ptx}
# longest first, so that cp.async.bulk.tensor is not taken for cp.async.bulk or cp.async
_MNEMONICS = sorted(_BY_MNEMONIC, key=len, reverse=True)
_BY_KEY = {key: row for row in ROWS for key in row.keys}
_BY_NODE = {node: row for row in ROWS for node in row.nodes}
_NODE_MODULES = frozenset(
    f"{__package__}.families.{row.folder}.nodes" for row in ROWS if "nodes" in row.stages
)


def _check_unique() -> None:
    for what, items in (
        ("folder", [r.folder for r in ROWS]),
        ("PTX mnemonic", [p for r in ROWS for p in r.ptx]),
        ("call name", [k for r in ROWS for k in r.keys]),
        ("node class", [n for r in ROWS for n in r.nodes]),
    ):
        doubled = sorted({x for x in items if items.count(x) > 1})
        if doubled:
            raise RuntimeError(f"catalog: {what} {', '.join(doubled)} belongs to two rows")


_check_unique()


def mnemonic_of(text: str) -> str | None:
    """The longest catalog mnemonic that is a dotted prefix of ``text``, or None."""
    return next((p for p in _MNEMONICS if text == p or text.startswith(p + ".")), None)


def row_of_ptx(text: str) -> Row | None:
    """The family of an instruction text (``cp.async.bulk.commit_group`` -> cp_async_bulk)."""
    mnemonic = mnemonic_of(text)
    return _BY_MNEMONIC[mnemonic] if mnemonic is not None else None


def row_of_family(family: Family) -> Row:
    return _BY_MNEMONIC[family.value]


def row_of_key(key: str) -> Row | None:
    """The family whose call ``T.<key>`` is (``"exp"``, ``"cuda.atomic_add"``), or None."""
    return _BY_KEY.get(key)


def row_of_node(class_name: str) -> Row | None:
    """The family that holds the stage rules of an IR node class, or None (a core class)."""
    return _BY_NODE.get(class_name)


def node_names() -> tuple[str, ...]:
    """Every IR node class name an instruction family holds the stage rules of."""
    return tuple(_BY_NODE)


def node_class(class_name: str) -> type | None:
    """The IR node class ``class_name`` of a family's ``nodes`` module (imported now if it was
    not), or None: not a class a family's folder defines (a core class, or no node)."""
    row = _BY_NODE.get(class_name)
    if row is None or "nodes" not in row.stages:
        return None
    return getattr(stage(row, "nodes"), class_name, None)


def is_node_module(name: str) -> bool:
    """Whether ``name`` is the module path of a family's ``nodes`` module."""
    return name in _NODE_MODULES


def call_keys() -> frozenset[str]:
    return frozenset(_BY_KEY)


@functools.cache
def tile_params() -> frozenset[str]:
    """Every keyword parameter a tile operation of some family takes (besides ``scope``)."""
    return frozenset(p for row in ROWS for p in row.tile_params)


def module_name(row: Row, stage_name: str) -> str:
    return f"{__package__}.families.{row.folder}.{stage_name}"


def stage(row: Row | str, stage_name: str) -> ModuleType:
    """The ``stage_name`` module of a family (imported now if it was not): the one door from
    stage code to family code."""
    if isinstance(row, str):
        row = _BY_FOLDER[row]
    if stage_name not in row.stages:
        raise LookupError(f"family {row.folder!r} has no {stage_name} module")
    return importlib.import_module(module_name(row, stage_name))


def loaded(stage_name: str):
    """The ``stage_name`` modules of the families imported so far in this process."""
    import sys

    for row in ROWS:
        if stage_name in row.stages:
            module = sys.modules.get(module_name(row, stage_name))
            if module is not None:
                yield module


def rule(row: Row, stage_name: str, name: str):
    """The function ``name`` of a family's stage module, or None when it has none."""
    if stage_name not in row.stages:
        return None
    return getattr(stage(row, stage_name), name, None)
