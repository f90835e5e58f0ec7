"""tirx/isa: the forms as data. Lane maps against the ISA's element tables (written out here
from the PTX ISA's "Matrix Fragments for mma.m16n8k*" figures, independently of the word-level
builder), the grammar, the hints, the exhaustive family tables and the generated docs."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

import tirx
from tirx import isa
from tirx.isa import Family, registry
from tirx.isa.docs import instructions_markdown

ROOT = Path(__file__).resolve().parents[1]
MMA_FORMS = [t for t in isa.supported_forms() if t.startswith("mma")]
BITS = {"f16": 16, "bf16": 16, "tf32": 32, "s8": 8, "u8": 8}


# The ISA's element tables: lane l (g = l // 4, t = l % 4), element i of the lane's fragment
# -> (row, col) of the operand's element matrix (B given as K x N: (k, n)).
def _a_element(bits, lane, i):
    g, t = lane // 4, lane % 4
    if bits == 16:  # a0..a7 (k16) / a0..a3 (k8)
        return g + 8 * ((i // 2) % 2), 2 * t + (i & 1) + 8 * (i // 4)
    if bits == 8:  # a0..a15 (k32) / a0..a7 (k16)
        return g + 8 * ((i // 4) % 2), 4 * t + (i & 3) + 16 * (i // 8)
    return g + 8 * (i % 2), t + 4 * (i // 2)  # tf32: a0..a3 (k8) / a0, a1 (k4)


def _b_element(bits, lane, i):
    g, t = lane // 4, lane % 4
    if bits == 16:
        return 2 * t + (i & 1) + 8 * (i // 2), g
    if bits == 8:
        return 4 * t + (i & 3) + 16 * (i // 4), g
    return t + 4 * i, g


def _acc_element(lane, i):
    g, t = lane // 4, lane % 4
    return g + 8 * (i // 2), 2 * t + (i & 1)


def _element_maps(text):
    """{operand: {(lane, register): set of element coords}} from the ISA tables above."""
    c = tirx.instruction_contract(text)
    ab, acc, k = c.param("ab_type"), c.param("acc_type"), c.param("k")
    bits = BITS[ab]
    per = 32 // bits
    out = {}
    for name, elements, each in (
        ("A", 16 * k // 32, lambda ln, i: _a_element(bits, ln, i)),
        ("B", 8 * k // 32, lambda ln, i: _b_element(bits, ln, i)),
    ):
        table = {}
        for lane, i in itertools.product(range(32), range(elements)):
            table.setdefault((lane, i // per), set()).add(each(lane, i))
        out[name] = table
    acc_per = 2 if acc == "f16" else 1
    table = {}
    for lane, i in itertools.product(range(32), range(4)):
        table.setdefault((lane, i // acc_per), set()).add(_acc_element(lane, i))
    out["D"] = out["C"] = table
    return c, out, per, acc_per


@pytest.mark.parametrize("text", MMA_FORMS)
def test_word_lane_maps_match_the_isa_element_tables(text):
    """Each word's owner (lane, register) holds exactly the elements the ISA puts there."""
    c, maps, per, acc_per = _element_maps(text)
    for name in ("A", "B", "C", "D"):
        spec = c.operand(name)
        words_per = acc_per if name in ("C", "D") else per
        got = {}
        for coord, owner in spec.owner_table().items():
            row, word = coord
            cols = range(word * words_per, (word + 1) * words_per)
            # B is drawn N-major (n, word of k); the ISA's table is (k, n)
            cells = {(kk, row) for kk in cols} if name == "B" else {(row, cc) for cc in cols}
            got.setdefault(owner, set()).update(cells)
        assert got == maps[name], f"{text} operand {name}"
        assert spec.registers == max(r for _, r in got) + 1


REGISTERS = {  # brief: registers per lane (A, B, C/D) by element type and K
    ("f16", 16): (4, 2), ("f16", 8): (2, 1), ("bf16", 16): (4, 2), ("bf16", 8): (2, 1),
    ("tf32", 8): (4, 2), ("tf32", 4): (2, 1), ("s8", 32): (4, 2), ("s8", 16): (2, 1),
    ("u8", 32): (4, 2), ("u8", 16): (2, 1),
}  # fmt: skip


@pytest.mark.parametrize("text", MMA_FORMS)
def test_register_counts_and_operand_dtypes(text):
    c = tirx.instruction_contract(text)
    ab, acc, k = c.param("ab_type"), c.param("acc_type"), c.param("k")
    assert (c.operand("A").registers, c.operand("B").registers) == REGISTERS[(ab, k)]
    assert c.operand("D").registers == (2 if acc == "f16" else 4)
    want = {"f32": "float32", "s32": "int32", "f16": "uint32"}[acc]
    assert c.operand("D").dtype == c.operand("C").dtype == want
    assert c.operand("A").dtype == c.operand("B").dtype == "uint32"


def test_the_supported_forms_parse_back_to_themselves():
    for text in isa.supported_forms():
        c = tirx.instruction_contract(text)
        assert c.text == text
        spec = registry.SPECS[c.family]
        assert spec.spell(dict(c.modifiers)) == text


_FLOAT_OPS = ("ex2", "lg2", "sin", "cos", "tanh", "rcp", "rsqrt", "max", "min")


def test_the_forms_the_brief_asks_for_are_there():
    forms = set(isa.supported_forms())
    for k, ab in [(8, "tf32"), (4, "tf32")]:
        assert f"mma.sync.aligned.m16n8k{k}.row.col.f32.{ab}.{ab}.f32" in forms
    for k, a, b, sat in itertools.product((16, 32), ("s8", "u8"), ("s8", "u8"), ("", ".satfinite")):
        assert f"mma.sync.aligned.m16n8k{k}.row.col{sat}.s32.{a}.{b}.s32" in forms
    for k in (8, 16):
        assert f"mma.sync.aligned.m16n8k{k}.row.col.f16.f16.f16.f16" in forms
    others = (
        *("cp.async", "cp.reduce.async", "fence.proxy", "mbarrier", "fence.mbarrier_init"),
        *("wgmma", "movmatrix", "barrier.cluster", "mapa", "ld.shared::cluster"),
        *("st.shared::cluster", "setmaxnreg", "bar"),  # bar: also barrier.*
        *(f"{m}." for m in _FLOAT_OPS),
    )
    assert len([t for t in forms if not t.startswith(others)]) == 36


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f16", ".dtype == .ctype"),
        ("mma.sync.aligned.m16n8k8.row.col.f16.f16.f16.f32", ".dtype == .ctype"),
        ("mma.sync.aligned.m16n8k16.row.col.f32.f16.bf16.f32", "same type (f16 vs bf16)"),
        ("mma.sync.aligned.m16n8k32.row.col.f32.tf32.tf32.f32", "m16n8k4 / m16n8k8"),
        ("mma.sync.aligned.m16n8k16.row.col.satfinite.f32.f16.f16.f32", ".satfinite belongs"),
        ("mma.sync.aligned.m16n8k16.row.col.s32.bf16.bf16.s32", "accumulate in .f32"),
        ("mma.sync.aligned.m16n8k16.row.col.s32.s8.f16.s32", "no mma line multiplies .s8 by .f16"),
        ("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32", "expected .row"),
        ("ldmatrix.sync.aligned.m8n8.x3.shared.b16", "expected .x1, .x2, .x4"),
        (
            "tcgen05.mma.cta_group::1",
            "tirx knows the families mma, ldmatrix, stmatrix, movmatrix, cp.async",
        ),
        ("cp.async.cg.shared.globl", "unexpected .globl after the last modifier"),
        ("cp.async.cg.global", "both state spaces are required"),
    ],
)
def test_unsupported_text_says_why_and_points_at_the_nearest_forms(text, fragment):
    with pytest.raises(tirx.ContractError) as info:
        tirx.instruction_contract(text)
    assert fragment in info.value.message
    assert "supported_forms()" in (info.value.hint or "")


def test_the_hint_names_the_nearest_supported_form():
    with pytest.raises(tirx.ContractError) as info:
        tirx.instruction_contract("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s8")
    assert "mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32" in info.value.hint


def test_every_family_has_one_spec_and_a_missing_one_raises():
    assert set(registry.SPECS) == set(Family)
    pairs = [(s.family, s) for s in registry.FAMILIES]
    with pytest.raises(RuntimeError, match="no entry for STMATRIX"):
        registry.check_complete([p for p in pairs if p[0] is not Family.STMATRIX])
    with pytest.raises(RuntimeError, match="declared twice"):
        registry.check_complete(pairs + pairs[:1])


def test_the_instruction_docs_are_generated_from_the_forms_and_current():
    text = (ROOT / "docs" / "instructions.md").read_text()
    assert text == instructions_markdown(), "regenerate: python -m tirx.isa.docs"
    for form in isa.supported_forms():
        assert f"`{form}`" in text


_WGMMA = [t for t in isa.supported_forms() if t.startswith("wgmma.mma_async")]


@pytest.mark.parametrize(
    "text",
    [
        t
        for t in isa.supported_forms()
        if not (
            "cp.async" in t
            or "cp.reduce.async" in t
            or "mbarrier" in t
            or "wgmma" in t
            or "setmaxnreg" in t
            or t.split(".")[0] in ("bar", "barrier")  # named barriers: no fragments
            or t.split(".")[0] in _FLOAT_OPS  # scalar registers: no fragments
        )
        and "cluster" not in t
        and not t.startswith("mapa")
    ]
    + _WGMMA[:2]
    + _WGMMA[-2:],
)
def test_show_instruction_draws_every_form_from_its_entry(text):
    """Every operand with a fragment is drawn in elements from the contract's owner table
    (each element in the lane and register of its 32-bit word); a descriptor operand as its
    shared tile; an immediate or a scalar says there is nothing to draw."""
    import math

    import widgets
    from tirx.isa import Role

    c = tirx.instruction_contract(text)
    for spec in c.operands:
        if spec.owner is None and spec.role not in (Role.SHARED, Role.DESCRIPTOR):
            with pytest.raises(tirx.TirxError, match="not a register fragment"):
                widgets.show_instruction(text, spec.name)
            continue
        view = widgets.show_instruction(text, spec.name)
        assert view.svg().startswith("<svg")
        if spec.owner is not None:
            table = spec.owner_table()
            per = len(view.grid.cells) // math.prod(spec.atom)  # elements per word
            for cell in view.grid.cells:
                word = (*cell.coord[:-1], cell.coord[-1] // per)
                assert (cell.lane, cell.slot) == table[word], (spec.name, cell.coord)


def test_the_widget_instrument_lists_come_from_the_forms():
    from widgets import families as probe

    lists = probe.instruments()
    assert lists["show_instruction"] == isa.supported_forms()
    assert set(lists["check_layout"]) < set(isa.supported_forms())
    assert "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32" in lists["check_layout"]


def test_probing_a_form_the_probes_cannot_encode_says_so():
    import widgets

    with pytest.raises(tirx.TirxError, match="do not run") as info:
        widgets.check_layout("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32", "A")
    assert "show_instruction" in info.value.hint


def test_the_docs_generator_takes_an_output_path_and_nothing_else(tmp_path, capsys, monkeypatch):
    from tirx.isa.docs import main

    monkeypatch.chdir(tmp_path)  # --help was written to a file named "--help" here
    out = tmp_path / "instructions.md"
    assert main([str(out)]) == 0 and out.read_text() == instructions_markdown()
    assert main(["--help"]) == 0 and main(["-x"]) == 2 and main(["a", "b"]) == 2
    assert "usage: python -m tirx.isa.docs [OUT]" in capsys.readouterr().out
    assert not (tmp_path / "--help").exists()
