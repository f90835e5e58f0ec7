"""The ``T`` namespace: what kernel source can name.

Most members are *intrinsics*: markers that the parser recognises by identity and turns into
IR. Called outside a ``@T.function`` body they raise, because they only mean something inside
a kernel. A few are ordinary compile-time values (``T.Tensor`` annotations, dtype objects,
``T.cuda.LaunchConfig``, the layout constructors).
"""

from __future__ import annotations

import operator
import os
import sys
from dataclasses import field

from .. import catalog
from ..dtypes import DTYPES, DType, dtype_of
from ..errors import Span, TirxSyntaxError, did_you_mean
from ..frozen import Frozen, frozen
from ..layout import R, S, TileLayout
from ..layout.swizzle import ComposeLayout

__all__ = [
    "T", "Intrinsic", "TensorAnnotation", "ScalarType", "PtxInstruction", "LaunchSpec", "LetType",
    "FORM_KEYS", "THREAD_HELPERS", "place_of",
]  # fmt: skip


class Intrinsic:
    """A name that only has meaning inside a kernel; the parser dispatches on ``key``."""

    def __init__(self, key: str, doc: str = ""):
        self.key = key
        self.__doc__ = doc

    def __call__(self, *args, **kwargs):
        raise TirxSyntaxError(
            f"T.{self.key}(...) can only be used inside a @T.function kernel body",
            hint="call it from kernel code; to run a kernel, compile it with tirx.compile",
        )

    def __repr__(self) -> str:
        return f"<tirx intrinsic T.{self.key}>"


@frozen
class TensorAnnotation(Frozen):
    """``T.Tensor(shape, dtype)``: a global-memory tensor parameter (row-major, contiguous)."""

    shape: tuple[int, ...]
    dtype: DType

    def __repr__(self) -> str:
        return f"T.Tensor({self.shape}, {self.dtype.name!r})"


_TIRX_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _user_span(text: str) -> Span | None:
    """Where user code called the function that is raising (two frames up), with a caret
    under ``text`` on that line; None when tirx itself called it (the parser then locates
    the error). Python evaluates parameter annotations at ``def`` time, outside the parser:
    this puts a bad ``T.Tensor(...)`` there at the user's line all the same."""
    import linecache

    frame = sys._getframe(2)
    filename = frame.f_code.co_filename
    if os.path.abspath(filename).startswith(_TIRX_DIR + os.sep):
        return None
    line = frame.f_lineno
    col = linecache.getline(filename, line).find(text)
    return Span(filename, line, max(col, 0), col + len(text) if col >= 0 else None)


def _tensor(shape, dtype="float32") -> TensorAnnotation:
    try:
        return _tensor_annotation(shape, dtype)
    except TirxSyntaxError as e:
        raise e.with_span(_user_span("T.Tensor")) from None


def _tensor_annotation(shape, dtype) -> TensorAnnotation:
    if not isinstance(shape, (tuple, list)):
        shape = (shape,)
    try:  # ints and what stands for one exactly (numpy ints); never a float, never a bool
        if any(isinstance(s, bool) for s in shape):
            raise TypeError
        shape = tuple(operator.index(s) for s in shape)
    except TypeError:
        raise TirxSyntaxError(
            f"T.Tensor shape must be a tuple of ints, got {shape!r}",
            hint='write every extent as an integer, e.g. T.Tensor((8, 16), "float32")',
        ) from None
    if any(s <= 0 for s in shape):
        raise TirxSyntaxError(f"T.Tensor shape must be positive, got {shape}")
    try:
        return TensorAnnotation(shape, dtype_of(dtype))
    except ValueError as e:
        raise TirxSyntaxError(str(e)) from None


class ScalarType:
    """``T.int32`` etc.: a scalar parameter annotation, and in kernels a constructor/cast."""

    def __init__(self, dtype: DType):
        self.dtype = dtype

    def __call__(self, value=0):
        raise TirxSyntaxError(
            f"T.{self.dtype.name}(...) builds a kernel value; use it inside a @T.function body"
        )

    def __repr__(self) -> str:
        return f"T.{self.dtype.name}"


#: ``T.f32`` is ``T.float32`` and so on, as in the real TIRx.
DTYPE_ALIASES = {
    **{f"i{b}": f"int{b}" for b in (8, 16, 32, 64)},
    **{f"u{b}": f"uint{b}" for b in (8, 16, 32, 64)},
    **{f"f{b}": f"float{b}" for b in (16, 32, 64)},
    "bf16": "bfloat16",
    "boolean": "bool",
}


@frozen
class PtxInstruction(Frozen):
    """``T.ptx["mma.sync.aligned..."]``: an instruction named by its full PTX text; or
    ``T.ptx.bar.sync``, the real TIRx's attribute chain (``chain``): a token per dotted part
    in the PTX order, a Python keyword with a trailing underscore (``global_``), ``::`` written
    ``__`` (``shared__cta``)."""

    text: str
    chain: bool = field(default=False, compare=False)  # made by attributes: takes more

    def __call__(self, *operands):
        raise TirxSyntaxError(f'T.ptx["{self.text}"](...) can only be called inside a kernel')

    def __getattr__(self, token: str):
        if token.startswith("_") or not self.chain:
            raise AttributeError(token)
        return PtxInstruction(f"{self.text}.{ptx_token(token)}", True)


def ptx_token(name: str) -> str:
    """One dotted part of an instruction text, from an attribute of a ``T.ptx`` chain."""
    return name.removesuffix("_").replace("__", "::")


class _Ptx:
    _place = "T.ptx"  # read by tirx.fingerprints

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return PtxInstruction(ptx_token(name), True)

    def __getitem__(self, text) -> PtxInstruction:
        if not isinstance(text, str):
            raise TirxSyntaxError(
                f"T.ptx[...] takes the instruction text as a string, got {text!r}"
            )
        return PtxInstruction(" ".join(text.split()))


@frozen
class LaunchSpec(Frozen):
    """``T.cuda.LaunchConfig(grid=..., block=..., dynamic_smem_bytes=0, cluster=None)``;
    ``cluster``: the blocks of a thread-block cluster (x, y, z), or None for no cluster.
    ``sms_grid``: the grid's x is ``"sms"``, the GPU's multiprocessor count, known at launch
    (``grid[0]`` is 0)."""

    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    dynamic_smem_bytes: int = 0
    cluster: tuple[int, int, int] | None = None
    sms_grid: bool = False


#: ``grid="sms"`` (or ``("sms", y, z)``): one block per multiprocessor of the GPU in x
SMS = "sms"


# The CUDA programming guide's limits, the same on every architecture tirx targets
# (sm_80 and later): "Technical Specifications per Compute Capability".
GRID_LIMITS = (2**31 - 1, 65535, 65535)
BLOCK_LIMITS = (1024, 1024, 64)
MAX_THREADS_PER_BLOCK = 1024


def _dim3(name: str, v, limits) -> tuple[int, int, int]:
    if isinstance(v, int):
        v = (v,)
    if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3:
        raise TirxSyntaxError(f"{name} must be an int or a tuple of 1 to 3 ints, got {v!r}")
    if not all(isinstance(x, int) and not isinstance(x, bool) and x >= 1 for x in v):
        raise TirxSyntaxError(f"{name} entries must be positive ints, got {v!r}")
    v = tuple(v) + (1,) * (3 - len(v))
    for axis, x, top in zip("xyz", v, limits):
        if x > top:
            raise TirxSyntaxError(
                f"{name} {axis} is {x}, more than the hardware allows ({top})",
                hint=f"CUDA limits {name} to x <= {limits[0]}, y <= {limits[1]}, "
                f"z <= {limits[2]}: split the work over more {name} dimensions or loop "
                "inside the kernel",
            )
    return v


def _grid(v) -> tuple[tuple[int, int, int], bool]:
    """The grid and whether its x is the multiprocessor count (``"sms"``, 0 until launch)."""
    if isinstance(v, str):
        v = (v,)
    words = [x for x in v if isinstance(x, str)] if isinstance(v, (tuple, list)) else []
    if not words:
        return _dim3("grid", v, GRID_LIMITS), False
    if words != [SMS] or v[0] != SMS:
        raise TirxSyntaxError(
            f"grid {v!r}: the one word a grid takes is {SMS!r}, as its x",
            hint='grid="sms" launches one block per multiprocessor of the GPU (a persistent '
            'kernel), grid=("sms", 2) two rows of them; T.cuda.grid_dim("x") is that count',
        )
    _, gy, gz = _dim3("grid", (1, *v[1:]), GRID_LIMITS)
    return (0, gy, gz), True


def _launch_config(grid=1, block=32, dynamic_smem_bytes=0, cluster=None) -> LaunchSpec:
    (grid3, sms_grid), block3 = _grid(grid), _dim3("block", block, BLOCK_LIMITS)
    threads = block3[0] * block3[1] * block3[2]
    if threads > MAX_THREADS_PER_BLOCK:
        raise TirxSyntaxError(
            f"a block has at most {MAX_THREADS_PER_BLOCK} threads, got {threads} ({block3})",
            hint="use fewer threads per block and more blocks in the grid",
        )
    if not isinstance(dynamic_smem_bytes, int) or dynamic_smem_bytes < 0:
        raise TirxSyntaxError("dynamic_smem_bytes must be a non-negative int")
    return LaunchSpec(
        grid3, block3, dynamic_smem_bytes, _cluster_dims(cluster, grid3, sms_grid), sms_grid
    )


# The CUDA programming guide ("Thread Block Clusters"): a cluster of at most 8 blocks is
# portable (larger ones need an opt-in and a GPU that allows them); the grid is a whole
# number of clusters in each dimension.
MAX_CLUSTER_BLOCKS = 8


def _cluster_dims(cluster, grid3, sms_grid: bool = False) -> tuple[int, int, int] | None:
    """``cluster=``: None (no cluster), or 1 to 3 positive ints whose product is at most
    :data:`MAX_CLUSTER_BLOCKS` and that divide the grid, dimension by dimension (a grid of
    ``"sms"`` in x is rounded down to whole clusters at launch: :meth:`LaunchConfig.resolved`)."""
    if cluster is None:
        return None
    c = _dim3("cluster", cluster, GRID_LIMITS)
    blocks = c[0] * c[1] * c[2]
    if blocks > MAX_CLUSTER_BLOCKS:
        raise TirxSyntaxError(
            f"a cluster of {blocks} blocks {c}: the portable limit is {MAX_CLUSTER_BLOCKS}",
            hint=f"use at most {MAX_CLUSTER_BLOCKS} blocks per cluster (the CUDA programming "
            "guide's portable cluster size), e.g. cluster=(2, 1, 1)",
        )
    for axis, g, x in zip("xyz", grid3, c):
        if g % x and not (axis == "x" and sms_grid):
            raise TirxSyntaxError(
                f"grid {axis} is {g}, not a multiple of the cluster's {axis} ({x})",
                hint="a grid is a whole number of clusters in each dimension: make grid "
                f"{axis} a multiple of {x} (or change the cluster)",
            )
    return c


# Thread-index helpers of ``T.cuda``: the warpgroup is 4 consecutive warps (128 threads), as
# the PTX ISA's wgmma defines it; ``linear_thread_id`` and ``thread_rank`` are the thread's
# rank in its block, x fastest (the CUDA programming guide's thread ID).
THREAD_HELPERS = (
    "cuda.warpgroup_id",
    "cuda.warp_in_warpgroup",
    "cuda.thread_in_warpgroup",
    "cuda.linear_thread_id",
    "cuda.thread_rank",
)
FORM_KEYS = frozenset(
    {
        "if_then_else",
        "Select",
        "select",
        "likely",
        "logical_and",
        "logical_or",
        "logical_not",
        "static_assert",
        "meta_var",
        "evaluate",
        "bind_",
        "tensor_store",
        "local_scalar",
        "shared_scalar",
        "alloc_scalar",
        "reinterpret",
        "address_of",
        "alloc_tensor",
        "decl_tensor",
        "grid",
        "vectorized",
        *THREAD_HELPERS,
    }
)


class LetType:
    """``T.let`` and ``T.let[T.int32]``: the annotation of an immutable named binding."""

    _place = "T.let"  # read by tirx.fingerprints (only T.let itself is found there)

    def __init__(self, dtype: DType | None = None):
        self.dtype = dtype

    def __getitem__(self, ty) -> LetType:
        if isinstance(ty, ScalarType):
            return LetType(ty.dtype)
        if isinstance(ty, str):
            return LetType(dtype_of(ty))
        raise TirxSyntaxError(
            f"T.let[...] takes a scalar type, got {ty!r}", hint="write T.let[T.int32]"
        )

    def __repr__(self) -> str:
        return "T.let" if self.dtype is None else f"T.let[T.{self.dtype.name}]"


class _Suggesting:
    """Namespace parts answer an unknown attribute with the closest known names."""

    _place = "T"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise _NoAttribute(self, name)


class _NoAttribute(AttributeError):
    """``part`` has no attribute ``name``. The message, with the closest known names, is made
    when it is read: ``getattr(part, name, None)`` and ``hasattr`` read none, so they look
    nothing up (building ``T`` asks for parts that do not exist yet at every ``import tirx``)."""

    def __init__(self, part: _Suggesting, name: str):
        super().__init__()
        self.part, self.attribute = part, name

    def __str__(self) -> str:
        head = f"{self.part._place} has no attribute {self.attribute!r}"
        theirs = _REAL_TIRX.get(self.attribute) if self.part._place == "T" else None
        if theirs is not None:  # a name of the real TIRx's that tirx spells otherwise
            return f"{head}: {theirs}"
        known = [n for n in dir(self.part) if not n.startswith("_")]
        hint = did_you_mean(self.attribute, known, f"{self.part._place}.")
        return head + (f"; {hint}" if hint else "")


# Names of the real TIRx's T that published kernels use and tirx does not have, with what to
# write instead (docs/tirx-names.md lists every name and its status).
_REAL_TIRX = {
    "prim_func": "a tirx kernel is @T.function",
    "jit": "tirx has no T.jit: a kernel's compile-time values come from Python, through a "
    "factory (def make(n): ... @T.function def kernel(...) ... return kernel)",
    "constexpr": "tirx has no T.constexpr: a compile-time value is a Python value the kernel "
    "captures (a factory's argument, a module constant)",
    "meta_class": "tirx has no T.meta_class (the real TIRx's stateful helper classes): write "
    "the helper as a @T.macro taking its state as arguments, or a Python function of "
    "compile-time values",
    "launch_thread": "a tirx kernel starts with T.device_entry(launch=T.cuda.LaunchConfig(grid="
    "..., block=...)); its thread and block indices are T.cuda.thread_idx('x'), "
    "T.cuda.block_idx('x'), ...",
    "func_attr": "a tirx kernel's launch and attributes are T.device_entry(launch=...)'s",
    "Axis": "the layout axes are tirx.layout's (from tirx.layout import Axis, laneid, ...)",
}


class _Tile(_Suggesting):
    _place = "T.cuda.tile"

    def __init__(self):
        self.apply = Intrinsic("cuda.tile.apply", "Apply a PTX instruction to tile operands.")


def place_of(v) -> str | None:
    """Where a namespace object sits, for a message: ``"T"``, ``"T.cuda"``, ``"T.cuda.tile"``,
    a sub-namespace's own (``"T.cuda.wgmma"``) or ``"T.ptx"``; None for anything else."""
    return v._place if isinstance(v, (_Suggesting, _Ptx)) else None


class _Part(_Suggesting):
    """A sub-namespace of ``T.cuda`` made for the catalog's dotted names (``T.cuda.wgmma``)."""

    def __init__(self, place: str):
        self._place = place


class _Cuda(_Suggesting):
    _place = "T.cuda"

    def __init__(self):
        self.LaunchConfig = _launch_config
        self.tile = _Tile()
        for key in (
            "lane_id",
            "warp_id",
            "thread_idx",
            "block_idx",
            "block_dim",
            "grid_dim",
            "cluster_cta_id",
            "cluster_dim",
            "cluster_id",
            "mov_sreg",
            "cta_sync",
            "warp_sync",
            "printf",
        ):
            setattr(self, key, Intrinsic(f"cuda.{key}"))
        for key in THREAD_HELPERS:  # thread-index helpers (tirx/script/forms.py)
            setattr(self, key.removeprefix("cuda."), Intrinsic(key))
        for row in catalog.ROWS:  # the families' calls (tirx/catalog.py)
            for name in row.cuda_names:
                *parts, leaf = name.split(".")
                place = self
                for part in parts:
                    if not isinstance(getattr(place, part, None), _Part):
                        setattr(place, part, _Part(f"{place._place}.{part}"))
                    place = getattr(place, part)
                setattr(place, leaf, Intrinsic(f"cuda.{name}"))


class _Namespace(_Suggesting):
    """The script namespace imported as ``from tirx import T``."""

    def __init__(self):
        self.Tensor = _tensor
        self.cuda = _Cuda()
        self.ptx = _Ptx()
        self.S, self.R, self.TileLayout, self.ComposeLayout = S, R, TileLayout, ComposeLayout
        for key in (
            "device_entry",
            "alloc_shared",
            "alloc_local",
            "smem",
            "serial",
            "unroll",
            "cast",
            "Cast",
            "min",
            "max",
        ):
            setattr(self, key, Intrinsic(key))
        for key in sorted(k for k in FORM_KEYS if "." not in k):  # tirx/script/forms.py
            setattr(self, key, Intrinsic(key))
        self.let = LetType()
        for row in catalog.ROWS:  # the families' calls (tirx/catalog.py)
            for key in row.t_names:
                setattr(self, key, Intrinsic(key))
        for name, dt in DTYPES.items():
            setattr(self, name, ScalarType(dt))
        for short, name in DTYPE_ALIASES.items():  # the real TIRx's short names
            setattr(self, short, getattr(self, name))
        # T.function, T.macro and T.inline are set by tirx.script: the vocabulary does not
        # import the parser, which imports it

    def __repr__(self) -> str:
        return "<tirx script namespace T>"


T = _Namespace()
