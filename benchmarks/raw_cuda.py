"""Compiling and launching hand-written CUDA kernels through cuda-python, for the benchmarks that
measure what tirx cannot express yet (``gemm_cluster_tma.py``, ``gemm_wgmma.py``): NVRTC to a
cubin, a 2-D TMA tensor map of a torch tensor, a no-argument launcher, and the CUDA both
kernels share (the tensor-map parameter type, an mbarrier wait, a stage fill by TMA)."""

from __future__ import annotations

import ctypes


def ok(result):
    """The value(s) of a cuda-python call's ``(status, value...)``; raises on a failed status."""
    err, *rest = result if isinstance(result, tuple) else (result,)
    if int(err) != 0:
        raise RuntimeError(f"CUDA call failed: {err}")
    return rest[0] if len(rest) == 1 else rest


def nvrtc_cubin(text: str, name: str, arch: str = "sm_90a") -> bytes:
    """``text`` compiled by NVRTC for ``arch`` (sm_90a: wgmma and multicast need it)."""
    from cuda.bindings import nvrtc

    prog = ok(nvrtc.nvrtcCreateProgram(text.encode(), name.encode(), 0, [], []))
    opts = [f"--gpu-architecture={arch}".encode(), b"--std=c++17"]
    if int(nvrtc.nvrtcCompileProgram(prog, len(opts), opts)[0]):
        log = bytearray(ok(nvrtc.nvrtcGetProgramLogSize(prog)))
        nvrtc.nvrtcGetProgramLog(prog, log)
        raise RuntimeError(log.decode())
    cubin = bytearray(ok(nvrtc.nvrtcGetCUBINSize(prog)))
    nvrtc.nvrtcGetCUBIN(prog, cubin)
    return bytes(cubin)


def tensor_map_2d(t, box_rows: int, box_cols: int = 64):
    """The 128-byte tensor map of a row-major 16-bit matrix ``t`` for TMA boxes of
    ``box_rows x box_cols`` elements, 128-byte swizzled (the layout of
    ``shared_layout(..., "swizzle")`` for 64-wide K tiles), as a kernel argument's bytes:
    encoded by tirx's launcher encoder (``tirx.backend.cuda.tensor_maps.encode_tiled``)."""
    from tirx.backend.cuda.tensor_maps import encode_tiled
    from tirx.ir.tensor_map import TensorMapFields

    rows, cols = t.shape
    fields = TensorMapFields(
        str(t.dtype).removeprefix("torch."),
        dims=(cols, rows),  # innermost first
        strides=(cols * t.element_size(),),
        box=(box_cols, box_rows),
        swizzle=3,  # 128B
        l2_promotion=3,  # 256B
    )
    return (ctypes.c_ubyte * 128).from_buffer_copy(encode_tiled(fields, t.data_ptr()))


def raw_launcher(cubin: bytes, kernel: str, grid: int, threads: int, smem: int, args: list):
    """A no-argument launcher of ``kernel`` in ``cubin`` on torch's current stream; ``args`` are
    ctypes objects (pointers, tensor maps) in the kernel's parameter order."""
    import torch
    from cuda.bindings import driver as cu

    module = ok(cu.cuModuleLoadData(cubin))
    fn = ok(cu.cuModuleGetFunction(module, kernel.encode()))
    attr = cu.CUfunction_attribute.CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES
    ok(cu.cuFuncSetAttribute(fn, attr, smem))
    params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(x) for x in args])
    stream = torch.cuda.current_stream().cuda_stream

    def run():
        ok(cu.cuLaunchKernel(fn, grid, 1, 1, threads, 1, 1, smem, stream, ctypes.addressof(params), 0))  # fmt: skip

    run.keep = (module, args, params)  # alive as long as the launcher
    return run


# ----------------------------------------------------------------- CUDA the kernels share

# ``tirx_tmap`` (a ``__grid_constant__`` tensor-map parameter, :func:`tensor_map_2d`'s bytes) and
# ``tirx_mbar_wait(bar, parity)``, which spins until the phase of that parity completes
CUDA_TMA_BASICS = r"""
struct __align__(64) tirx_tmap { unsigned long long v[16]; };
TIRX_DEVICE void tirx_mbar_wait(unsigned bar, unsigned parity) {
  unsigned done;
  do {
    asm volatile("{ .reg .pred p; mbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2; "
                 "selp.u32 %0, 1, 0, p; }" : "=r"(done) : "r"(bar), "r"(parity) : "memory");
  } while (!done);
}
"""


def cuda_fill(name: str, full: int, nbytes: int, loads) -> str:
    """A device function ``name(smem, tA, tB, stage, k, bm, bn, rank)`` that arms the ``full``
    mbarrier of ``stage`` (``smem + full + 8 * stage``) for ``nbytes`` and issues one TMA 2-D
    load per item of ``loads``: ``(dst, map, x, y, multicast)``, C expressions over the
    parameters (``map`` is ``tA`` or ``tB``); ``multicast`` lands the box in both blocks of a
    cluster of two (mask 0b11), at the same offset."""
    copy = "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes"
    body = []
    for dst, tmap, x, y, multicast in loads:
        extra, mask = (".multicast::cluster", ", %5") if multicast else ("", "")
        arg = ', "h"((unsigned short)3)' if multicast else ""
        body.append(
            f'  asm volatile("{copy}{extra} [%0], [%1, {{%2, %3}}], [%4]{mask};"\n'
            f'               :: "r"({dst}), "l"({tmap}), "r"({x}), "r"({y}), "r"(bar){arg}'
            ' : "memory");'
        )
    return (
        f"TIRX_DEVICE void {name}(unsigned smem, const tirx_tmap* tA, const tirx_tmap* tB, "
        "int stage, int k, int bm, int bn, int rank) {\n"
        f"  unsigned bar = smem + {full}u + 8u * stage;\n"
        '  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;" '
        f':: "r"(bar), "r"({nbytes}) : "memory");\n' + "\n".join(body) + "\n}\n"
    )
