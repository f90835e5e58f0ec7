"""Write docs/tirx-names.md: every public name of the real TIRx's ``T`` and ``T.cuda`` with its
status in tirx -- supported, not yet, or not planned -- and why.

Run it with the real package's python (``apache-tvm-tirx==0.1.0a4``, its own venv)::

    /path/to/tvmref/bin/python docs/name_status.py          # rewrite docs/tirx-names.md
    /path/to/tvmref/bin/python docs/name_status.py --check  # exit 1 when the file is stale

(``make names REF_PY=...`` does the first). tirx is imported from this checkout by path: it
needs nothing outside its own modules at import, so the real package's venv can import it.
"Supported" is decided by looking: a name is supported when ``tirx.T`` (or ``tirx.T.cuda``) has
it. The other names fall into the groups of :data:`NOT_PLANNED` (each with its reason, checked
in order) or are "not yet"; :data:`ISSUE_16` names the ones issue 16 asks for, which are "not
yet" whatever group they would fall into.
"""

from __future__ import annotations

import inspect
import re
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "docs" / "tirx-names.md"


@dataclass(frozen=True)
class Group:
    """Names that tirx does not plan to have, and why."""

    title: str
    reason: str
    names: frozenset = frozenset()
    pattern: str | None = None  # a regex the whole name matches
    classes: bool = False  # the real package's IR classes (types), whatever their name

    def holds(self, name: str, obj) -> bool:
        if name in self.names:
            return True
        if self.pattern is not None and re.fullmatch(self.pattern, name):
            return True
        return self.classes and inspect.isclass(obj)


# The names issue 16 asks for (its text and its split among the four parts of the work).
ISSUE_16 = frozenset(
    """grid vectorized serial unroll if_then_else Select meta_var evaluate let bind_ macro inline
    alloc_tensor decl_tensor local_scalar reinterpret address_of exp exp2 exp10 log log2 log10
    sqrt rsqrt tanh sigmoid sin cos erf pow fabs abs floor ceil round nearbyint trunc fma max min
    isnan isinf isfinite infinity min_value max_value truncdiv truncmod floordiv floormod ceildiv
    bitwise_and bitwise_or bitwise_xor bitwise_not shift_left shift_right clz popcount
    float8_e4m3fn float8_e5m2 atomic_add gpu_warp_shuffle gpu_warp_shuffle_up
    gpu_warp_shuffle_down gpu_warp_shuffle_xor gpu_warp_activemask
    elect_sync cvta_generic_to_shared warpgroup_id warp_in_warpgroup thread_in_warpgroup
    linear_thread_id thread_rank ballot_sync any_sync warp_sum warp_max warp_min warp_reduce
    reduce_add_sync_u32 reduce_min_sync_u32 cta_sum cta_max cta_min cta_reduce syncthreads_and
    syncthreads_or thread_fence atomic_cas ffs_u32 float_as_uint uint_as_float""".split()
)

NOT_PLANNED = (
    Group(
        "vector dtypes",
        'tirx\'s dtypes are scalars; packed lanes are 32-bit words of a view (t.view("uint32"))',
        pattern=r"(u?int|float|bfloat)\d+(_e\d+m\d+\w*)?x\d+",
    ),
    Group(
        "narrow float formats",
        "sub-byte, scale and fnuz formats (Blackwell block scaling, AMD variants): beyond the "
        "SM80/SM90 scope; tirx has the fp8 types of sm_89+ (float8_e4m3fn, float8_e5m2)",
        pattern=r"float(4|6)_\w+|float8_(e3m4|e4m3|e4m3b11fnuz|e4m3fnuz|e5m2fnuz|e8m0fnu)",
    ),
    Group(
        "TVMScript builder",
        "the IR-builder API TVMScript's parser drives (frames, statements as calls, "
        "module attributes): tirx's parser builds its own IR, kernels never name these",
        names=frozenset(
            """IRBuilder IRModuleFrame ir ir_builder ir_module parser_protocol frame frame_scope
            utils register_script_namespace expose_script_op expose_script_type module_attrs
            module_get_attr module_set_attr module_global_infos func_attr func_ret decl_function
            add_to_parent MISSING Missing MissingType NoneType AlreadyEmitted emit assign
            supports_mutable_declarations meta_class make_node kernel_replace_point
            compute_scope device_scope constexpr dynamic undef""".split()
        ),
        pattern=r"[a-z][a-z0-9_]*_",  # the builder's statement forms: if_, for_, setattr_, ...
    ),
    Group(
        "TVM IR classes",
        "TVM's own IR node and type classes: tirx has its own IR (tirx.ir) and its own "
        "spellings for what kernels need",
        classes=True,
    ),
    Group(
        "host runtime and other code generators",
        "TVM's host-side runtime (packed functions, DLTensor stacks, workspaces) and LLVM / "
        "SPIR-V intrinsics: tirx generates one CUDA kernel and launches it itself",
        names=frozenset(
            """call_packed call_cpacked call_packed_lowered call_cpacked_lowered call_extern
            call_pure_extern call_intrin call_llvm_intrin call_llvm_pure_intrin
            call_spirv_pure_glsl450 call_kernel call_ffi_kernel llvm_lookup_intrinsic_id
            stack_alloca stack_make_dltensor stack_make_shape tensor_data_ptr handle
            static_handle abi_field_get abi_field_set throw_last_error jit external_kernel pyfunc
            device_context alloc_workspace free_workspace cpu_parallel_barrier parallel
            parallel_launch launch_thread isnullptr vscale get_active_lane_mask masked_load
            masked_store ptr_byte_offset handle_add_byte_offset target s_tir""".split()
        ),
    ),
    Group(
        "other backends",
        "code for other machines (Metal, OpenCL, WebGPU, AWS Neuron): tirx targets NVIDIA GPUs",
        names=frozenset("metal opencl webgpu nki trn".split()),
    ),
    Group(
        "Blackwell",
        "tcgen05, tensor memory and CTA pairs (sm_100a): no Blackwell GPU to check them on",
        names=frozenset(
            "tmem decl_tmem get_tmem_addr cta_pair_id runtime_instr_desc "
            "sm100_2sm_leader_smem_addr".split()
        ),
        pattern=r".*(tcgen05|TCGen05|Tcgen05).*",
    ),
    Group(
        "NVSHMEM and the profiler",
        "multi-GPU communication (NVSHMEM) and the real TIRx's in-kernel tracer (iket, timers): "
        "outside a single-GPU workbench, which times kernels from the host",
        pattern=r"(?i)(nvshmem|iket).*|timer_\w+",
    ),
    Group(
        "TVM's generic GPU intrinsics",
        "TVM's older target-neutral GPU calls (WMMA fragments, thread filters): tirx spells "
        "these as T.ptx instructions and tile operations",
        pattern=r"gpu_\w+|bmma_sync",
    ),
)


def _public(ns) -> dict:
    return {n: getattr(ns, n) for n in sorted(dir(ns)) if not n.startswith("_")}


def status(name: str, obj, ours) -> tuple[str, str]:
    """(status, why) of the real package's ``name`` (object ``obj``); ``ours``: tirx's names."""
    if name in ours:
        return "supported", ""
    if name in ISSUE_16:
        return "not yet", "asked for by issue 16"
    for g in NOT_PLANNED:
        if g.holds(name, obj):
            return "not planned", g.title
    return "not yet", ""


def table(title: str, theirs: dict, ours: set) -> tuple[list[str], dict]:
    rows = [f"## `{title}`", "", "| name | status | why |", "|---|---|---|"]
    counts: dict = {}
    for name, obj in theirs.items():
        st, why = status(name, obj, ours)
        counts[st] = counts.get(st, 0) + 1
        rows.append(f"| `{name}` | {st} | {why} |")
    return rows + [""], counts


def render() -> str:
    from tvm_tirx.script import tirx as real

    sys.path.insert(0, str(ROOT))
    from tirx import T

    parts, summary = [], []
    for title, theirs, ours in (
        ("T", _public(real), set(_public(T))),
        ("T.cuda", _public(real.cuda), set(_public(T.cuda))),
    ):
        rows, counts = table(title, theirs, ours)
        parts += rows
        line = ", ".join(f"{counts.get(s, 0)} {s}" for s in ("supported", "not yet", "not planned"))
        summary.append(f"- `{title}`: {len(theirs)} names: {line}")
    reasons = ["## Why not planned", "", "| group | reason |", "|---|---|"]
    reasons += [f"| {g.title} | {g.reason} |" for g in NOT_PLANNED]
    head = [
        "# The real TIRx's names in tirx",
        "",
        "Generated by `docs/name_status.py` from `apache-tvm-tirx==0.1.0a4` (`make names`); do",
        "not edit. A name is *supported* when tirx's `T` (or `T.cuda`) has it; *not planned*",
        "names fall into one of the groups below; the rest are *not yet* (those issue 16 asks",
        "for say so).",
        "",
        *summary,
        "",
    ]
    return "\n".join(head + reasons + [""] + parts)


def main(argv) -> int:
    text = render()
    if "--check" in argv:
        current = OUT.read_text() if OUT.exists() else ""
        if current != text:
            print(f"{OUT.relative_to(ROOT)} is stale: run make names", file=sys.stderr)
            return 1
        return 0
    OUT.write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
