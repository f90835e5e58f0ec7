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
