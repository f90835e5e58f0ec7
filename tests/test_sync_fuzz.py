"""The synchronisation fuzzer (tests/sync_fuzz.py): its edits, a short seeded run over every
pipelined example (each edit reported, or exact and reviewed as harmless: never a clean wrong
answer), and edits that leave a hazard the lockstep run would compute right anyway, each
reported by name. The full run is ``python -m tests.sync_fuzz`` (docs/simulator.md records
its counts)."""

from __future__ import annotations

import dataclasses

import pytest

from tests import sync_fuzz as sf
from tirx.errors import SimulationError
from tirx.ir import nodes as ir
from tirx.sim import run

SAMPLE = 8  # edits per kernel in the suite's run


@pytest.fixture(scope="module")
def pipeline():
    return sf.KERNELS["tma_pipeline"].build()


def _edit(fn, kind: str, text: str) -> sf.Edit:
    (found,) = [e for e in sf.edits(fn) if e.kind == kind and e.key.startswith(text)]
    return found


def test_every_synchronisation_statement_is_found_in_program_order(pipeline):
    names = [sf.source_text(s) for _, s in sf.sync_statements(pipeline.body)]
    assert names == [
        'T.ptx["mbarrier.init.shared::cta.b64"](bars[0], 1)',
        'T.ptx["mbarrier.init.shared::cta.b64"](bars[1], 1)',
        "T.cuda.cta_sync()",
        'T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[0], 4096)',
        'T.ptx["mbarrier.arrive.expect_tx.shared::cta.b64"](bars[1 - st], 4096)',
        "T.cuda.mbarrier_wait(bars[st], (k // 2) % 2)",
        "T.cuda.cta_sync()",
    ]


def test_each_edit_changes_one_statement_as_its_kind_says(pipeline):
    before = len(sf.sync_statements(pipeline.body))
    wait = "T.cuda.mbarrier_wait"
    deleted = _edit(pipeline, "delete", wait)
    assert len(sf.sync_statements(deleted.body)) == before - 1
    # into-prev: the wait becomes the last statement of the refill's `if tid == 0 ...`
    moved = _edit(pipeline, "into-prev", wait)
    (path,) = [p for p, s in sf.sync_statements(moved.body) if "mbarrier_wait" in sf.source_text(s)]
    assert any(step == ("then_body",) for step in path)
    # parity: the same wait with the other parity
    flipped = _edit(pipeline, "parity", wait)
    (_, s) = [
        x
        for x in sf.sync_statements(flipped.body)
        if "try_wait" in getattr(x[1], "instruction", "")
    ][0]
    assert isinstance(s.operands[-1].value, ir.BinOp)
    kinds = {e.kind for e in sf.edits(pipeline)}
    assert {"delete", "up", "down", "swap", "into-prev", "into-next", "parity"} <= kinds


def test_a_wait_count_changes_within_the_instructions_range():
    fn = sf.KERNELS["gemm_wgmma.cp_async"].build()
    counts = {(e.kind, e.key) for e in sf.edits(fn) if e.kind in ("more", "less")}
    assert ("more", 'T.ptx["wgmma.wait_group.sync.aligned"](1) #1') in counts
    assert ("less", 'T.ptx["wgmma.wait_group.sync.aligned"](0) #1') not in counts  # no -1


@pytest.mark.parametrize("name", list(sf.KERNELS))
def test_a_seeded_sample_is_reported_or_exact_and_harmless(name):
    outcomes = sf.fuzz(name, sample=SAMPLE, seed=0)
    assert len(outcomes) == SAMPLE
    bad = [f"{o.verdict}: {o.key}: {o.detail}" for o in outcomes if o.verdict in sf.FAILURES]
    assert not bad, "\n".join(bad)


def test_every_reviewed_edit_names_an_edit_of_a_kernel_as_it_is():
    """A review is of one edit of today's kernel: an entry whose statement's text changed (a
    renamed variable, a new count) names no edit, and the edit it meant would go unreviewed
    outside the suite's sample."""
    reviewed = sf.benign()
    assert all(why.strip() for why in reviewed.values())
    names = {key.split(" | ")[0] for key in reviewed}
    assert names <= set(sf.KERNELS)
    stale = []
    for name in sorted(names):
        keys = {f"{name} | {e.kind} | {e.key}" for e in sf.edits(sf.KERNELS[name].build())}
        stale += [k for k in reviewed if k.startswith(f"{name} | ") and k not in keys]
    assert not stale, "reviewed edits that no longer exist:\n" + "\n".join(stale)


@pytest.mark.parametrize(
    ("name", "kind", "text", "pattern"),
    [
        # only thread 0 (the refill branch) waits: the others read bytes they never saw land
        (
            "tma_pipeline",
            "into-prev",
            "T.cuda.mbarrier_wait",
            "whose completion this thread has not observed",
        ),
        # the proxy fence after the barrier that publishes the stores to the tensor core
        (
            "gemm_wgmma.cp_async",
            "swap",
            'T.ptx["fence.proxy.async.shared::cta"]()',
            "that fence is not ordered before the issue",
        ),
        # the block's copies past the last K tile (the loop's re-reads) are never waited for
        (
            "gemm_wgmma.cp_async",
            "delete",
            'T.ptx["cp.async.wait_all"]()',
            "the block exits while the cp.async",
        ),
    ],
)
def test_hazards_a_lockstep_run_computes_right_are_reported(name, kind, text, pattern):
    kernel = sf.KERNELS[name]
    fn = kernel.build()
    edit = _edit(fn, kind, text)
    with pytest.raises(SimulationError, match=pattern):
        run(dataclasses.replace(fn, body=edit.body), kernel.inputs())  # the first input set
