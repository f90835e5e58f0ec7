"""A ContractError on a tile operand also shows where the operand's layout was defined."""

from __future__ import annotations

import linecache

import pytest

import tirx

HEAD = """\
from tvm_tirx.script import tirx as T
from tvm_tirx.backend.cuda.axis import laneid
from tvm_tirx.tirx.layout import S, TileLayout

{top}

@T.function
def kernel(A: T.Tensor((16, 16), "float16")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=32))
    a = T.alloc_shared((16, 16), "float16", layout="default", align=16)
    ar = T.alloc_local((4,), "uint32", layout="default")
{local}
    T.cuda.tile.apply(
        T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"],
        ar.view(4, 8, 4, layout={use}), a.view("uint32").rearrange(
            "(group row) (chunk word) -> (chunk group) row word", group=2, chunk=2, word=4
        ),
        scope="warp",
    )
"""
GOOD = "S[(4, 8, 4) : (1, 4 @ laneid, 1 @ laneid)]"
BAD = "S[(4, 8, 4) : (1, 1 @ laneid, 8 @ laneid)]"


def build(tmp_path, name, top="", local="", use="lay"):
    source = HEAD.format(top=top, local=local, use=use)
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    linecache.checkcache(str(path))
    scope = {"__name__": name}
    exec(compile(source, str(path), "exec"), scope)
    return scope["kernel"], source


def lower(kernel):
    return tirx.lower(kernel) if hasattr(tirx, "lower") else kernel.lowered


def contract_error(kernel):
    with pytest.raises(tirx.ContractError) as info:
        tirx.compile(kernel, target="sim")
    return info.value


def line_of(text, source):
    return 1 + next(i for i, ln in enumerate(source.splitlines()) if text in ln)


def test_a_module_level_layout_names_its_line(tmp_path):
    kernel, source = build(tmp_path, "mod_bad", top=f"lay = TileLayout({BAD})")
    err = contract_error(kernel)
    assert err.definition is not None
    assert err.definition.line == line_of("lay = TileLayout", source)
    assert err.span.line == line_of("layout=lay", source)
    text = str(err)
    assert "the layout was defined here:" in text
    assert f"lay = TileLayout({BAD})" in text


def test_the_correct_twin_compiles(tmp_path):
    kernel, _ = build(tmp_path, "mod_good", top=f"lay = TileLayout({GOOD})")
    tirx.compile(kernel, target="sim")


def test_a_kernel_local_layout_names_the_assignment(tmp_path):
    kernel, source = build(
        tmp_path, "local_bad", top=f"lay = TileLayout({GOOD})",
        local=f"    lay = TileLayout({BAD})",
    )  # fmt: skip
    err = contract_error(kernel)
    assert err.definition.line == line_of(f"    lay = TileLayout({BAD})", source)
    assert err.definition.col == 4


def test_a_kernel_local_layout_of_a_static_if_names_the_taken_branch(tmp_path):
    # the parser builds only the taken branch; the later (not taken) assignment is not shown
    local = (
        f"    if FLAG:\n        lay = TileLayout({BAD})  # BAD_HERE\n"
        f"    else:\n        lay = TileLayout({GOOD})  # NOT_TAKEN"
    )
    kernel, source = build(tmp_path, "static_if_bad", top="FLAG = True", local=local)
    err = contract_error(kernel)
    assert err.definition.line == line_of("BAD_HERE", source)
    assert "NOT_TAKEN" not in str(err)


def test_a_layout_written_at_the_operand_has_no_definition(tmp_path):
    kernel, _ = build(tmp_path, "expr_bad", use=f"TileLayout({BAD})")
    err = contract_error(kernel)
    assert err.definition is None
    assert "defined here" not in str(err)


def test_a_cached_kernel_still_names_the_definition(tmp_path):
    kernel, source = build(tmp_path, "cache_bad", top=f"lay = TileLayout({BAD})")
    first = contract_error(kernel)
    second = contract_error(kernel)
    assert first.definition == second.definition is not None


# Layouts bound other than by a plain assignment: tuple unpacking, a for-target, ``with ... as``
# and a kernel factory's parameter (whose layout was built where the factory was called).
# ``{K}`` is the kernel (indented to its place), ``{L}`` the layout; ``BAD_HERE`` marks the line
# a ContractError must name, and the corrected twin compiles.

BOUND = {
    "tuple": "other, lay = TileLayout({G}), {L}  # BAD_HERE\n{K}\nresult = kernel\n",
    "starred": "(other, *[lay]) = TileLayout({G}), {L}  # BAD_HERE\n{K}\nresult = kernel\n",
    "for": "for lay in [{L}]:  # BAD_HERE\n{K}\n    result = kernel\n",
    "with": "with contextlib.nullcontext({L}) as lay:  # BAD_HERE\n{K}\n    result = kernel\n",
    "factory": "def make(\n    lay,\n):\n{K}\n    return kernel\n\n\nresult = make({L})  # BAD_HERE\n",
}


def build_bound(tmp_path, how: str, layout: str):
    pad = "" if how in ("tuple", "starred") else "    "
    kernel = HEAD.split("{top}\n")[1].format(local="", use="lay")
    kernel = "\n".join(pad + ln if ln else ln for ln in kernel.splitlines())
    top = HEAD.split("{top}")[0] + "import contextlib\n\n"
    source = top + BOUND[how].format(L=f"TileLayout({layout})", G=f"TileLayout({GOOD})", K=kernel)
    name = f"{how}_{'bad' if layout == BAD else 'good'}"
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    linecache.checkcache(str(path))
    scope = {"__name__": name}
    exec(compile(source, str(path), "exec"), scope)
    return scope["result"], source


@pytest.mark.parametrize("how", sorted(BOUND))
def test_a_layout_bound_otherwise_names_its_line(tmp_path, how):
    kernel, source = build_bound(tmp_path, how, BAD)
    err = contract_error(kernel)
    assert err.definition is not None, str(err)
    assert err.definition.line == line_of("BAD_HERE", source)
    assert err.span.line == line_of("layout=lay", source)
    shown = str(err).split("the layout was defined here:")[1]
    assert "BAD_HERE" in shown.splitlines()[2] and "^" in shown.splitlines()[3]


@pytest.mark.parametrize("how", sorted(BOUND))
def test_the_twin_bound_otherwise_compiles(tmp_path, how):
    kernel, _ = build_bound(tmp_path, how, GOOD)
    tirx.compile(kernel, target="sim")


# A kernel factory with a default layout under ``if lay is None:`` (notebook 3's make_ldmatrix):
# the layout passed was built elsewhere, and the default's line, which did not run, is not shown.
FACTORY = """\
{head}
def make(lay=None):
    if lay is None:
        lay = TileLayout({good})  # THE_DEFAULT
{kernel}
    return kernel


swapped = TileLayout({bad})  # BAD_HERE
result = make(lay=swapped)
"""


def build_factory(tmp_path, name, passed="swapped", scope=()):
    kernel = HEAD.split("{top}\n")[1].format(local="", use="lay")
    kernel = "\n".join("    " + ln if ln else ln for ln in kernel.splitlines())
    source = FACTORY.format(head=HEAD.split("{top}")[0], good=GOOD, bad=BAD, kernel=kernel)
    source = source.replace("make(lay=swapped)", f"make(lay={passed})")
    path = tmp_path / f"{name}.py"
    path.write_text(source)
    linecache.checkcache(str(path))
    scope = {"__name__": name, **dict(scope)}
    exec(compile(source, str(path), "exec"), scope)
    return scope["result"], source


def test_a_factory_default_not_taken_is_not_named(tmp_path):
    kernel, source = build_factory(tmp_path, "factory_default")
    err = contract_error(kernel)
    assert err.definition is not None, str(err)
    assert err.definition.line == line_of("BAD_HERE", source)
    assert "THE_DEFAULT" not in str(err)
    assert f"swapped = TileLayout({BAD})" in str(err).split("the layout was defined here:")[1]


def test_a_layout_of_unknown_origin_bound_in_a_branch_names_nothing(tmp_path):
    # a layout tirx itself made carries no place; the source text then offers only the
    # default's assignment under ``if``, which did not run: nothing is shown
    from tirx.layout import S, TileLayout, laneid

    names = {"__name__": "tirx.made", "TileLayout": TileLayout, "S": S, "laneid": laneid}
    made = eval(f"TileLayout({BAD})", names)
    kernel, _ = build_factory(tmp_path, "factory_unknown", passed="MADE", scope={"MADE": made})
    err = contract_error(kernel)
    assert err.definition is None, str(err)
    assert "defined here" not in str(err)


def test_a_layout_built_by_a_helper_names_the_helper_line(tmp_path):
    kernel, source = build(
        tmp_path, "helper_bad",
        top=f"def frag():\n    return TileLayout({BAD})  # BAD_HERE\n\n\nlay = frag()",
    )  # fmt: skip
    err = contract_error(kernel)
    assert err.definition.line == line_of("BAD_HERE", source)


def test_a_later_binding_of_another_name_does_not_count(tmp_path):
    kernel, source = build(
        tmp_path, "other_names", top=f"lay = TileLayout({BAD})\nlayx, lay2 = 1, 2",
    )  # fmt: skip
    assert contract_error(kernel).definition.line == line_of("lay = TileLayout", source)


@pytest.fixture(scope="module")
def ip():
    from IPython.core.interactiveshell import InteractiveShell

    shell = InteractiveShell.instance()
    assert shell.run_cell("%load_ext tirx").success
    return shell


KERNEL_CELL = "import tirx\nfrom tvm_tirx.script import tirx as T\n" + HEAD.split("{top}\n")[
    1
].format(local="", use="cell_lay")


def test_a_layout_from_an_earlier_cell_names_that_cell(ip):
    from IPython.utils.capture import capture_output

    define = ip.run_cell(
        "from tvm_tirx.tirx.layout import S, TileLayout\nfrom tvm_tirx.backend.cuda.axis import laneid\n"
        f"cell_lay = TileLayout({BAD})\n", store_history=True,
    )  # fmt: skip
    assert define.success
    with capture_output():
        result = ip.run_cell(KERNEL_CELL + "tirx.compile(kernel, target='sim')\n",
                             store_history=True)  # fmt: skip
    err = result.error_in_exec
    assert isinstance(err, tirx.ContractError)
    assert err.definition is not None and err.definition.line == 3
    assert f"Cell In[{define.execution_count}], line 3" in str(err)


def test_a_tirx_cell_names_the_line_in_the_cell(ip):
    from IPython.utils.capture import capture_output

    cell = f"cell_lay = TileLayout({BAD})\n" + KERNEL_CELL
    with capture_output():
        result = ip.run_cell("%%tirx -q -t sim\n" + cell, store_history=True)
    err = result.error_in_exec
    shown = "\n".join(err._render_traceback_()) if hasattr(err, "_render_traceback_") else str(err)
    assert "the layout was defined here:" in shown
    assert f"cell_lay = TileLayout({BAD})" in shown
