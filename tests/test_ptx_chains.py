"""``T.ptx.bar.sync(...)``: the real TIRx's attribute chains for raw PTX, beside the exact-text
form ``T.ptx["bar.sync"](...)``.

A chain is the same instruction as its text: a token per dotted part in the PTX order, a
Python keyword with a trailing underscore (``async_``, ``global_``), ``::`` written ``__``
(``shared__cta``). The seed kernel spelled with chains generates the same CUDA as the guide's
text."""

from __future__ import annotations

import keyword
import re
from pathlib import Path

import numpy as np
import pytest

import tirx
from tirx.errors import ContractError

from .helpers import caret_line, define

EXAMPLES = Path(tirx.__file__).parent / "examples"


def chain(text: str) -> str:
    """``T.ptx["a.b::c"]`` written as the chain ``T.ptx.a.b__c``."""
    tokens = [t.replace("::", "__") for t in text.split(".")]
    return "T.ptx." + ".".join(t + "_" if keyword.iskeyword(t) else t for t in tokens)


def cuda_lines(exe) -> list[str]:
    return [ln for ln in exe.source.splitlines() if not ln.startswith("#line")]


def test_the_seed_kernel_spelled_with_chains_generates_the_same_cuda(tmp_path):
    source = (EXAMPLES / "warp_matmul.py").read_text()
    chained = re.sub(r'T\.ptx\["([^"]+)"\]', lambda m: chain(m.group(1)), source)
    assert chained.count("T.ptx.") == 3 and 'T.ptx["' not in chained
    path = tmp_path / "chained_matmul.py"
    path.write_text(chained)
    ns = {"__name__": "chained_matmul"}
    exec(compile(chained, str(path), "exec"), ns)
    from tirx.examples.warp_matmul import warp_matmul

    target = "cuda -arch=sm_80"
    mine = tirx.compile(ns["warp_matmul"], target=target)
    assert cuda_lines(mine) == cuda_lines(tirx.compile(warp_matmul, target=target))


# keywords and :: in the tokens
HANDOFF = """
@T.function
def handoff(A: T.Tensor((64,), "int32"), Out: T.Tensor((64,), "int32")):
    T.device_entry(launch=T.cuda.LaunchConfig(grid=1, block=128))
    s = T.alloc_shared((64,), "int32")
    tid = T.cuda.thread_idx("x")
    if tid < 64:
        s[tid] = A[tid] + 1
        T.ptx.fence.proxy.async_.shared__cta()
        ARRIVE(1, 128)
    else:
        SYNC(1, 128)
        Out[tid - 64] = s[127 - tid]
"""


def test_keywords_and_scopes(tmp_path):
    chained = define(
        HANDOFF.replace("ARRIVE", "T.ptx.bar.cta.arrive").replace(
            "SYNC", "T.ptx.barrier.sync.aligned"
        ),
        tmp_path,
        "handoff",
    )
    texts = define(
        HANDOFF.replace("T.ptx.fence.proxy.async_.shared__cta", 'T.ptx["fence.proxy.async.shared::cta"]')
        .replace("ARRIVE", 'T.ptx["bar.cta.arrive"]')
        .replace("SYNC", 'T.ptx["barrier.sync.aligned"]'),
        tmp_path,
        "handoff",
    )  # fmt: skip
    target = "cuda -arch=sm_90"
    assert cuda_lines(tirx.compile(chained, target=target)) == cuda_lines(
        tirx.compile(texts, target=target)
    )
    a = np.arange(64, dtype=np.int32)
    out = np.zeros(64, np.int32)
    tirx.compile(chained, target="sim")(a, out)
    assert np.array_equal(out, a[::-1] + 1)


def test_modifiers_out_of_the_ptx_order_are_refused_with_the_order(tmp_path):
    """The real TIRx fills slots in any order; tirx reads the order, which carries meaning where
    two slots take the same words (mma's A and B layouts), and names the forms in order."""
    source = HANDOFF.replace("ARRIVE", "T.ptx.bar.arrive.cta").replace("SYNC", "T.ptx.bar.sync")
    with pytest.raises(ContractError, match="'bar.arrive.cta'") as info:
        tirx.compile(define(source, tmp_path, "handoff"), target="sim")
    assert "bar.cta.arrive" in info.value.hint
    with pytest.raises(ContractError, match="expected .row"):
        tirx.instruction_contract("mma.sync.aligned.m16n8k16.col.row.f32.f16.f16.f32")


def test_an_unknown_chain_is_named_at_the_users_line(tmp_path):
    source = HANDOFF.replace("ARRIVE", "T.ptx.bar.arrive").replace("SYNC", "T.ptx.bar.sink")
    with pytest.raises(ContractError, match="'bar.sink'") as info:
        tirx.compile(define(source, tmp_path, "handoff"), target="sim")
    assert caret_line(str(info.value)).startswith("T.ptx.bar.sink(1, 128)")
    assert "nearest supported: bar.sync" in str(info.value)


def test_a_chain_in_tile_apply(tmp_path):
    """The tile form takes a chain too: the seed's ldmatrix as ``T.ptx.ldmatrix.sync...``."""
    source = (EXAMPLES / "warp_matmul.py").read_text()
    chained = source.replace(
        'T.ptx["ldmatrix.sync.aligned.m8n8.x4.shared.b16"]',
        "T.ptx.ldmatrix.sync.aligned.m8n8.x4.shared.b16",
    )
    path = tmp_path / "chained_ldmatrix.py"
    path.write_text(chained)
    ns = {"__name__": "chained_ldmatrix"}
    exec(compile(chained, str(path), "exec"), ns)
    a = np.random.default_rng(0).integers(-4, 4, (16, 16)).astype(np.float16)
    b = np.random.default_rng(1).integers(-4, 4, (8, 16)).astype(np.float16)
    out = np.zeros((16, 8), np.float32)
    tirx.compile(ns["warp_matmul"], target="sim")(a, b, out)
    assert np.array_equal(out, a.astype(np.float32) @ b.astype(np.float32).T)
