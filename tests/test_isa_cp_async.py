"""cp.async as a tirx/isa family: its forms (the PTX ISA's syntax lines, written out here by
hand), its contracts (operand roles, sizes, sm_80), the dotted-mnemonic lookup, the hints, the
execution scope, and the plain refusal of the fragment widgets."""

from __future__ import annotations

import itertools

import pytest

import tirx
from tirx import catalog, isa
from tirx.errors import ContractError, TirxError
from tirx.ir.nodes import ExecScope
from tirx.isa import Family, Role, registry

from .helpers import define

# cp.async.{ca,cg}.shared{::cta}.global{.L2::{64B,128B,256B}}, then the group instructions.
COPIES = [
    f"cp.async.{cache}.{space}.global{prefetch}"
    for cache, space, prefetch in itertools.product(
        ("ca", "cg"), ("shared", "shared::cta"), ("", ".L2::64B", ".L2::128B", ".L2::256B")
    )
]
GROUPS = ["cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all"]


def test_the_forms_are_the_isa_syntax_lines():
    mine = [
        t for t in isa.supported_forms() if tirx.instruction_contract(t).family is Family.CP_ASYNC
    ]
    assert sorted(mine) == sorted(COPIES + GROUPS)
    for text in mine:
        c = tirx.instruction_contract(text)
        assert c.family is Family.CP_ASYNC and c.min_arch == 80


@pytest.mark.parametrize("text", COPIES)
def test_a_copy_declares_its_operands_and_sizes(text):
    c = tirx.instruction_contract(text)
    roles = [(o.name, o.role, o.optional) for o in c.operands]
    assert roles == [
        ("dst", Role.SHARED_CHUNK, False),
        ("src", Role.GLOBAL_CHUNK, False),
        ("cp_size", Role.IMMEDIATE, False),
        ("src_size", Role.SCALAR_IN, True),
    ]
    assert [o.name for o in c.tile_operands] == ["dst", "src"]
    assert c.param("sizes") == ((4, 8, 16) if ".ca." in text else (16,))
    assert c.modifier("state_space") == text.split(".")[3]


def test_the_group_instructions_take_an_immediate_or_nothing():
    assert [o.role for o in tirx.instruction_contract("cp.async.wait_group").operands] == [
        Role.IMMEDIATE
    ]
    for text in ("cp.async.commit_group", "cp.async.wait_all"):
        assert tirx.instruction_contract(text).operands == ()


@pytest.mark.parametrize(
    "text, fragment",
    [
        ("cp.async.cg.global", "both state spaces are required"),
        ("cp.async.cg.shared", "both state spaces are required"),
        ("cp.async.commit_group.shared", "takes no modifiers"),
        ("cp.async.cg.global.shared", "unexpected .shared"),
        ("cp.async", "found the end of the text"),
        ("cp.async.cs.shared.global", "expected .ca, .cg"),
    ],
)
def test_texts_that_are_not_forms_say_why(text, fragment):
    with pytest.raises(ContractError) as info:
        tirx.instruction_contract(text)
    assert fragment in info.value.message
    assert "supported_forms()" in info.value.hint


def test_the_hint_names_the_nearest_cp_async_form():
    with pytest.raises(ContractError) as info:
        tirx.instruction_contract("cp.async.cg.shared.globl")
    assert "cp.async.cg.shared.global" in info.value.hint


def test_the_family_is_found_by_its_dotted_mnemonic_longest_first(monkeypatch):
    assert registry.family_of_text("cp.async.wait_all").family is Family.CP_ASYNC
    assert registry.family_of_text("mma.sync.aligned").family is Family.MMA
    assert registry.family_of_text("cp.asyncx") is None  # a prefix must end at a dot
    # a shorter mnemonic that is a dotted prefix of cp.async must not take its texts
    monkeypatch.setattr(catalog, "_MNEMONICS", sorted([*catalog._MNEMONICS, "cp"], key=len)[::-1])
    assert catalog.mnemonic_of("cp.async.cg.shared.global") == "cp.async"
    assert catalog.mnemonic_of("cp.async.bulk.commit_group") == "cp.async.bulk"
    assert (
        catalog.mnemonic_of("cp.async.bulk.tensor.2d.shared::cta.global") == "cp.async.bulk.tensor"
    )
    assert catalog.mnemonic_of("cp.foo") == "cp"


def test_each_family_says_its_execution_scope():
    scopes = {f: registry.SPECS[f].exec_scope for f in Family}
    assert scopes[Family.CP_ASYNC] is ExecScope.THREAD
    assert {scopes[f] for f in (Family.MMA, Family.LDMATRIX, Family.STMATRIX)} == {ExecScope.WARP}


def test_the_docs_list_the_cp_async_forms():
    from tirx.isa.docs import instructions_markdown

    text = instructions_markdown()
    assert "## cp.async" in text
    for form in COPIES + GROUPS:
        assert f"| `{form}` |" in text


GROUP_TILE = """
@T.function
def kernel(A: T.Tensor((32, 8), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    s = T.alloc_shared((32, 8), "float16")
    {stmt}
"""


def test_a_group_instruction_has_no_tile_form_and_its_raw_twin_compiles(tmp_path):
    broken = 'T.cuda.tile.apply(T.ptx["cp.async.commit_group"], scope="thread")'
    with pytest.raises(ContractError, match="has no tile form") as info:
        tirx.compile(define(GROUP_TILE.format(stmt=broken), tmp_path, "kernel"), "cuda")
    assert info.value.span is not None
    assert 'T.ptx["cp.async.commit_group"]()' in info.value.hint
    twin = 'T.ptx["cp.async.commit_group"]()'
    tirx.compile(define(GROUP_TILE.format(stmt=twin), tmp_path, "kernel"), "cuda")


@pytest.mark.parametrize("text", ["cp.async.cg.shared.global", "cp.async.commit_group"])
def test_the_widgets_say_plainly_there_is_no_fragment(text):
    import widgets
    from widgets import families as probe
    from widgets.trace import run_instruction

    for call in (widgets.show_instruction, widgets.check_layout, run_instruction):
        with pytest.raises(TirxError, match="has no register fragment to draw"):
            call(text)
    assert text not in probe.probed_forms()
