"""mma operands given as the elements their words pack (tirx/isa/operands.py, element views).

The seed guide's kernel with only its dtypes and its instruction text changed to the ``.f16``
accumulator form (a ``float16`` ``Out`` and ``dr``, the D view written as for f32) compiles,
simulates and runs: a float16 view of D whose layout describes elements is the ISA's f16
accumulator fragment ("each 32-bit register packs two f16 elements", the first in the low
half). Element views of A and B are accepted likewise. Results are compared with torch on
integer-valued inputs (exact in every form), on the simulator and (marked gpu) on the H200.
"""

from __future__ import annotations

import functools
from pathlib import Path

import numpy as np
import pytest
import torch

import tirx
from tests import isa_kernels as K
from tests.helpers import caret_text, define
from tirx import T, isa

ROOT = Path(__file__).resolve().parents[1]
F16_TEXT = "mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16"


def seed_source(c_value: str = "T.float32(0)") -> str:
    """The seed guide's kernel as a user edits it for f16 accumulation: the instruction text,
    ``Out``'s and ``dr``'s dtypes (and, if ``c_value`` says so, C's constructor) changed, and
    nothing else."""
    source = (ROOT / "tirx" / "examples" / "warp_matmul.py").read_text()
    kernel = source.split("# --- begin verbatim ---\n")[1].split("# --- end verbatim ---")[0]
    edits = [
        ('Out: T.Tensor((16, 8), "float32")', 'Out: T.Tensor((16, 8), "float16")'),
        ('dr = T.alloc_local((4,), "float32"', 'dr = T.alloc_local((4,), "float16"'),
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32", F16_TEXT),
        ("T.float32(0), scope", f"{c_value}, scope"),
    ]
    for old, new in edits:
        assert kernel.count(old) == 1, old
        kernel = kernel.replace(old, new)
    return kernel


def _inputs(seed: int = 0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randint(-3, 4, (16, 16), generator=g).half()
    b = torch.randint(-3, 4, (8, 16), generator=g).half()
    return a, b, (a.double() @ b.double().T).half()  # |sums| <= 144: exact in f16


@pytest.mark.parametrize("c_value", ["T.float32(0)", "T.float16(0)"])
def test_the_seed_with_an_f16_accumulator_simulates_exactly(c_value, tmp_path):
    kernel = define(seed_source(c_value), tmp_path, "warp_matmul")
    a, b, want = _inputs()
    out = torch.zeros(16, 8, dtype=torch.float16)
    tirx.compile(kernel, target="sim")(a, b, out)
    assert torch.equal(out, want)


def test_the_seed_with_an_f16_accumulator_compiles_to_the_word_registers(tmp_path):
    """Golden CUDA: the mma writes the two 32-bit words of the float16 array (slots 0..3 are
    words 0 and 1, the even column in each low half) and reads C as the half 0 twice."""
    exe = tirx.compile(define(seed_source(), tmp_path, "warp_matmul"), target="cuda -arch=sm_80")
    (line,) = [ln.strip() for ln in exe.source.splitlines() if F16_TEXT in ln]
    assert line == (
        f'asm volatile("{F16_TEXT} {{%0, %1}}, {{%2, %3, %4, %5}}, {{%6, %7}}, {{%8, %9}};" : '
        '"=r"(reinterpret_cast<unsigned int*>(dr)[0]), '
        '"=r"(reinterpret_cast<unsigned int*>(dr)[1]) : "r"(ar[0]), "r"(ar[1]), "r"(ar[2]), '
        '"r"(ar[3]), "r"(br[0]), "r"(br[1]), "r"(0u), "r"(0u));'
    )
    assert "__align__(16) unsigned short dr[4];" in exe.source
    assert any(ln.strip().startswith(F16_TEXT) for ln in exe.ptx.splitlines())


def test_leaving_dr_float32_names_the_one_change(tmp_path):
    """A user who changed Out and the instruction but kept ``dr`` float32 is told to allocate
    it as float16 (and nothing else); doing so compiles (the test above runs it)."""
    bad = seed_source().replace(
        'dr = T.alloc_local((4,), "float16"', 'dr = T.alloc_local((4,), "float32"'
    )
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(define(bad, tmp_path, "warp_matmul"), target="sim")
    err = info.value
    assert (
        "operand D must be viewed as uint32 (2 elements per word) or as float16 elements, got float32"
        in err.message
    )
    assert caret_text(str(err)).startswith("dr.view(1, 1, 16, 8, layout=d_mma_layout)")
    assert err.hint.startswith('allocate dr as "float16"') and "keep the view's layout" in err.hint
    twin = bad.replace('dr = T.alloc_local((4,), "float32"', 'dr = T.alloc_local((4,), "float16"')
    tirx.compile(define(twin, tmp_path, "warp_matmul"), target="sim")


@pytest.mark.parametrize(
    "layout, message",
    [
        # the two halves of each word swapped: column 2t in the high half
        ("TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 2, 4 @ laneid, 1 @ laneid, -1)] + 1)",
         "element (0, 0, 0, 0) is the low half of register 0's word, but the layout puts it "
         "in slot 1, the high half of a word"),
        # rows g and g + 8 in one word, the column pair split across words
        ("TileLayout(S[(1, 1, 2, 8, 4, 2) : (4, 4, 1, 4 @ laneid, 1 @ laneid, 2)])",
         "element (0, 0, 0, 1) is the high half of register 0's word, but the layout puts it "
         "in slot 2, the low half of a word"),
    ],
)  # fmt: skip
def test_an_element_in_the_wrong_half_is_named(layout, message, tmp_path):
    src = seed_source().replace("dr.view(1, 1, 16, 8, layout=d_mma_layout)",
                                f"dr.view(1, 1, 16, 8, layout={layout})")  # fmt: skip
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(define(src, tmp_path, "warp_matmul"), target="sim")
    assert message in info.value.message, info.value
    assert caret_text(str(info.value)).startswith("dr.view(1, 1, 16, 8")
    assert "first in the low bits" in info.value.hint


def test_a_float16_view_and_a_word_view_of_d_are_the_same_registers():
    """The element layout is the word layout unpacked: L.unpack(2). For D that is the seed's
    f32 layout, so the word form the docs showed before is the same program."""
    word_d = K.D_MMA[4]
    assert word_d.unpack(2) == K.D_MMA[8]
    spec = tirx.instruction_contract(F16_TEXT).operand("D")
    assert (spec.dtype, spec.element_dtype, spec.elements_per_word) == ("uint32", "float16", 2)


# ------------------------------------------------------------------ every packed form

PACKED = [t for t in isa.supported_forms() if t.startswith("mma") and ".tf32." not in t]


@functools.cache
def element_kernel(text: str, c_from_tensor: bool = False):
    """K.mma_kernel's structure with every operand that packs several elements per word viewed
    as those elements (the word layouts unpacked); D read from a (16, 8) ``Out``. With
    ``c_from_tensor``, C is a view of registers loaded from ``C`` (D's dtype and shape)."""
    p = K.parts(text)
    k, contract = p["k"], p["contract"]
    ea, eb = K.ELEMENT[p["ab"]], K.ELEMENT[p["b"]]
    per_a = contract.operand("A").elements_per_word
    a_words, b_words = contract.operand("A").atom[1], contract.operand("B").atom[1]
    d_spec = contract.operand("D")
    d_dtype = d_spec.element_dtype or d_spec.dtype
    nd = d_spec.registers * d_spec.elements_per_word
    a_mma, b_mma = K.A_MMA[a_words].unpack(per_a), K.B_MMA[b_words].unpack(per_a)
    d_mma = K.D_MMA[8]
    a_ld = f"ldmatrix.sync.aligned.m8n8.x{a_words // 2}.shared.b16"
    b_ld = f"ldmatrix.sync.aligned.m8n8.x{b_words // 4}.shared.b16"
    a_load, b_load = K.A_LOAD[a_words], K.B_LOAD[b_words]
    a_chunks, b_chunks = a_words // 4, b_words // 4
    a_count, b_count = a_words // 2, b_words // 4

    @T.function
    def mma_elements(
        A: T.Tensor((16, k), ea), B: T.Tensor((8, k), eb), C: T.Tensor((16, 8), d_dtype),
        Out: T.Tensor((16, 8), d_dtype),
    ):  # fmt: skip
        T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
        lane = T.cuda.lane_id()
        a = T.alloc_shared((16, k), ea, layout="default", align=16)
        b = T.alloc_shared((8, k), eb, layout="default", align=16)
        for q in range(k // 2):
            index = lane + 32 * q
            a[index // k, index % k] = A[index // k, index % k]
        for q in range(k // 4):
            index = lane + 32 * q
            b[index // k, index % k] = B[index // k, index % k]
        T.cuda.cta_sync()
        aw = a.view("uint32").rearrange(
            "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=a_chunks, word=4
        )
        bw = b.view("uint32").rearrange("row (chunk word) -> chunk row word", chunk=b_chunks)
        ar = T.alloc_local((a_count * per_a,), ea)
        br = T.alloc_local((b_count * per_a,), eb)
        dr = T.alloc_local((nd,), d_dtype)
        cr = T.alloc_local((nd,), d_dtype)
        T.cuda.tile.apply(T.ptx[a_ld], ar.view("uint32").view(a_count, 8, 4, layout=a_load), aw)
        T.cuda.tile.apply(T.ptx[b_ld], br.view("uint32").view(b_count, 8, 4, layout=b_load), bw)
        for r in range(nd):
            cr[r] = C[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2]
        T.cuda.tile.apply(
            T.ptx[text],
            dr.view(1, 1, 16, 8, layout=d_mma),
            ar.view(1, 1, 16, k, layout=a_mma),
            br.view(1, 1, 8, k, layout=b_mma),
            cr.view(1, 1, 16, 8, layout=d_mma) if c_from_tensor else 0,
        )
        for r in range(nd):
            Out[lane // 4 + 8 * (r // 2), 2 * (lane % 4) + r % 2] = dr[r]

    return mma_elements


def _element_inputs(text: str, seed: int = 0):
    a, b, _ = K.inputs(text, seed)
    contract = tirx.instruction_contract(text)
    spec = contract.operand("D")
    dtype = getattr(torch, spec.element_dtype or spec.dtype)
    g = torch.Generator().manual_seed(seed + 1)
    c = torch.randint(-8, 9, (16, 8), generator=g).to(dtype)
    return torch.as_tensor(a), torch.as_tensor(b), c, torch.zeros(16, 8, dtype=dtype)


def _reference(text, a, b, c) -> torch.Tensor:
    d = K.reference(text, a.numpy() if a.dtype != torch.bfloat16 else a, b.numpy()
                    if b.dtype != torch.bfloat16 else b, 0)  # fmt: skip
    if d.dtype == np.uint32:  # f16 accumulators come back as words: read their halves
        d = d.view(np.float16)
    return torch.from_numpy(np.ascontiguousarray(d)) + (c if c is not None else 0)


@pytest.mark.parametrize("c_from_tensor", [False, True], ids=["scalar-c", "c-view"])
@pytest.mark.parametrize("text", PACKED)
def test_element_views_of_every_packed_form_simulate_exactly(text, c_from_tensor):
    a, b, c, out = _element_inputs(text)
    tirx.compile(element_kernel(text, c_from_tensor), target="sim")(a, b, c, out)
    want = _reference(text, a, b, c if c_from_tensor else None)
    assert torch.equal(out, want.to(out.dtype))


@pytest.mark.gpu
@pytest.mark.parametrize("c_from_tensor", [False, True], ids=["scalar-c", "c-view"])
@pytest.mark.parametrize("text", PACKED)
def test_gpu_element_views_of_every_packed_form_equal_the_simulator(text, c_from_tensor):
    a, b, c, out = _element_inputs(text)
    tirx.compile(element_kernel(text, c_from_tensor), target="sim")(a, b, c, out)
    gpu = out.new_zeros(out.shape).cuda()
    kernel = tirx.compile(element_kernel(text, c_from_tensor), target="cuda")
    kernel(a.cuda(), b.cuda(), c.cuda(), gpu)
    torch.cuda.synchronize()
    assert torch.equal(gpu.cpu(), out)


@pytest.mark.gpu
def test_gpu_the_seed_with_an_f16_accumulator_runs_exactly(tmp_path):
    exe = tirx.compile(define(seed_source(), tmp_path, "warp_matmul"), target="cuda")
    for seed in range(5):
        a, b, want = _inputs(seed)
        out = torch.zeros(16, 8, dtype=torch.float16, device="cuda")
        exe(a.cuda(), b.cuda(), out)
        torch.cuda.synchronize()
        assert torch.equal(out.cpu(), want)
