"""A kernel's TMA tensor maps (tirx/ir/tensor_map.py) at the CUDA level: the hidden
parameters that carry them and the launcher's encoding of each (the copies' own inline PTX is
tirx/families/tma/cuda.py's).

Each distinct map of the kernel (tirx/ir/tensor_map.py) is a hidden parameter after the user's,
``const __grid_constant__ tirx_tmap tirx_tmapK``: the 128 bytes the driver's
``cuTensorMapEncodeTiled`` wrote, passed by value in the parameter space (NVRTC has no
``cuda.h``, so the prelude defines the struct, 64-byte aligned like ``CUtensorMap``). The
instruction takes the map's generic address (``"l"(&tirx_tmapK)``, what ``__grid_constant__``
makes legal), the coordinates innermost first as ``.s32`` registers and the barrier's shared
address."""

from __future__ import annotations

import functools

from ...ir import nodes as ir
from ...ir.tensor_map import TensorMap, tensor_maps

__all__ = ["PRELUDE", "map_parameters", "map_index", "map_name", "MapEncoder", "map_sources"]

PRELUDE = "struct __align__(64) tirx_tmap { unsigned long long v[16]; };\n"


def map_name(k: int) -> str:
    return f"tirx_tmap{k}"


def map_parameters(fn: ir.Function) -> list[str]:
    """The hidden parameters' declarations, one per distinct map, in order."""
    return [f"const __grid_constant__ tirx_tmap {map_name(k)}" for k in range(len(map_index(fn)))]


@functools.lru_cache(maxsize=4)
def map_index(fn: ir.Function) -> dict[TensorMap, int]:
    """Map -> hidden parameter index: one walk of ``fn`` for its declarations, its copies and
    its launcher (a Function hashes by identity)."""
    return {tm: k for k, tm in enumerate(tensor_maps(fn))}


# ------------------------------------------------------------------- the launcher's side

# the driver's CUtensorMapDataType per element type (a copy moves bits: integers and 8-bit
# floats of one width share a code)
_DATA_TYPE = {
    "uint8": "UINT8", "int8": "UINT8", "bool": "UINT8", "float8_e4m3fn": "UINT8",
    "float8_e5m2": "UINT8", "uint16": "UINT16", "int16": "UINT16", "uint32": "UINT32",
    "int32": "INT32", "uint64": "UINT64", "int64": "INT64", "float16": "FLOAT16",
    "float32": "FLOAT32", "float64": "FLOAT64", "bfloat16": "BFLOAT16",
}  # fmt: skip
_SWIZZLE = ("NONE", "32B", "64B", "128B")
_L2 = ("NONE", "L2_64B", "L2_128B", "L2_256B")


def encode_tiled(fields, address: int) -> bytes:
    """The 128 bytes of the tensor map with ``fields`` (a :class:`TensorMapFields`) over global
    memory at ``address``, from the driver's ``cuTensorMapEncodeTiled``; a ``LaunchError`` when
    the driver refuses it."""
    from ...errors import LaunchError
    from .driver import driver_api

    cu = driver_api()
    u32, u64 = cu.cuuint32_t, cu.cuuint64_t
    kind = getattr(cu.CUtensorMapDataType, f"CU_TENSOR_MAP_DATA_TYPE_{_DATA_TYPE[fields.dtype]}")
    swizzle = getattr(cu.CUtensorMapSwizzle, f"CU_TENSOR_MAP_SWIZZLE_{_SWIZZLE[fields.swizzle]}")
    l2 = getattr(
        cu.CUtensorMapL2promotion, f"CU_TENSOR_MAP_L2_PROMOTION_{_L2[fields.l2_promotion]}"
    )
    err, tmap = cu.cuTensorMapEncodeTiled(
        kind, u32(fields.rank), address, [u64(d) for d in fields.dims],
        [u64(s) for s in fields.strides], [u32(b) for b in fields.box],
        [u32(1)] * fields.rank, cu.CUtensorMapInterleave.CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
        l2, cu.CUtensorMapFloatOOBfill.CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE,
    )  # fmt: skip
    if int(err) != 0:
        raise LaunchError(
            f"cuTensorMapEncodeTiled refused the tensor map {fields} at {address:#x}: {err}",
            hint="the tensor's pointer must be 16-byte aligned and its strides multiples of 16",
        )
    import ctypes

    return ctypes.string_at(int(tmap.getPtr()), 128)


class MapEncoder:
    """``encoder(pointer) -> bytes``: the map ``tm`` over a tensor whose data pointer is
    ``pointer`` (its origin added), through ``encode(fields, address)``. A map is a function of
    the address alone, so the last one is kept: a call with the same pointer (the checked
    call before the runner's first memo entry, or a new tensor in the old one's memory)
    encodes nothing; ``count`` says how many it encoded."""

    __slots__ = ("fields", "origin", "encode", "count", "_last")

    def __init__(self, tm: TensorMap, encode=None):
        self.fields, self.origin = tm.fields, tm.origin
        self.encode = encode or encode_tiled
        self.count = 0
        self._last = (None, b"")

    def __call__(self, pointer: int) -> bytes:
        last = self._last  # one read: another thread may replace it meanwhile
        if last[0] == pointer:
            return last[1]
        self.count += 1
        out = self.encode(self.fields, pointer + self.origin)
        self._last = (pointer, out)
        return out


def map_sources(fn: ir.Function) -> tuple[tuple[int, TensorMap], ...]:
    """Per hidden parameter, the index of the tensor parameter its map reads, and the map."""
    index = {p: i for i, p in enumerate(fn.params)}
    return tuple((index[tm.buffer], tm) for tm in map_index(fn))
