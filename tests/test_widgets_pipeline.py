"""The pipeline timeline (widgets.pipeline, widgets.pipeline_draw) of a warp-specialized ring
of two stages (tests/pipeline_kernels.py) on the simulator: the producer's tensor copies and
its stall on a stage's ``empty`` barrier, the consumers' waits on each ``full`` phase in turn,
the barriers' phases completing (the ring turning), the text, the picture and the Chrome
trace; and a planted missing wait, which shows as the fault at the end of the timeline."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest

import tirx
from tests.pipeline_kernels import ring_inputs, ring_kernel
from widgets.pipeline import timeline
from widgets.pipeline_draw import show_pipeline

K = 4


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    a, out, want = ring_inputs(K)
    exe = tirx.compile(ring_kernel(tmp_path_factory.mktemp("ring"), K), target="sim")
    result = exe(a, out, trace=True)
    assert np.array_equal(out, want)
    return result


def test_every_record_has_one_order(run):
    seqs = [r.seq for r in (*run.traces, *run.copies, *run.barriers)]
    assert min(seqs) > 0 and len(set(seqs)) == len(seqs)  # one clock for every record


def test_the_ring_turns_on_the_timeline(run):
    t = timeline(run)
    assert t.rows == ["warp 0", "warp 1", "warp 2", "warp 3", "warp 4",
                      "full[0]", "full[1]", "empty[0]", "empty[1]"]  # fmt: skip
    producer = t.on("warp 0")
    assert [e.kind for e in producer].count("tma") == K
    stalls = [e for e in producer if e.kind == "stall"]
    assert stalls and all("empty" in e.detail and e.end > e.step for e in stalls)
    for w in range(1, 5):  # each consumer waits for full[k % 2], phase k // 2, in order
        waits = [e.label for e in t.on(f"warp {w}") if e.kind == "wait"]
        assert waits == [f"wait full[{k % 2}] phase {k // 2}" for k in range(K)]
    for b in ("full[0]", "full[1]", "empty[0]", "empty[1]"):
        phases = [e.label for e in t.on(b) if e.kind == "phase"]
        assert phases == [f"{b} phase {p} done" for p in range(K // 2)]
    # a consumer's wait for a stage comes after the producer's copy into it landed
    landed = [e.step for e in producer if e.kind == "landed"]
    first_waits = [e.step for e in t.on("warp 1") if e.kind == "wait"]
    assert all(lw > ls for lw, ls in zip(first_waits, landed))
    # the consumers, in lockstep, share their steps
    assert [e.step for e in t.on("warp 1")] == [e.step for e in t.on("warp 4")]


def test_a_cp_async_wait_lands_only_the_groups_it_waits_for():
    """The attention kernel's prologue commits Q, then key/value tile 0; its wait_group 1 lets
    Q's copies land and not the tile's, which land at the loop's wait_group 0. The landed
    marks follow the simulator's own count of completed copies at every wait."""
    import torch

    from tirx.examples.attention_mma import AttentionConfig, make_attention

    cfg = AttentionConfig(warps=2, m_tiles=1, block_n=32)
    q, kv = torch.zeros(1, 1, 32, 64).half(), torch.zeros(1, 1, 96, 64).half()
    exe = tirx.compile(make_attention(1, 1, 1, 32, 96, 64, cfg=cfg), target="sim")
    run = exe(q, kv, kv, torch.empty_like(q), torch.empty(1, 1, 32), 0.125, trace=True)
    t = timeline(run)
    for warp in (0, 1):
        events = t.on(f"warp {warp}")
        waits = [e.step for e in events if e.kind == "group_wait"]
        landed = [sum(e.kind == "landed" and e.step == w for e in events) for w in waits]
        counted = [int(c.completed.max()) for c in run.copies
                   if c.warp == warp and c.event == "wait_group"]  # fmt: skip
        assert landed == counted == [4, 8, 8, 8, 0]  # Q; tiles 0, 1, 2; wait_all
        copies = [e.step for e in events if e.kind == "copy"]
        assert len(copies) == sum(landed)


def test_text_picture_and_chrome_trace(run, tmp_path):
    view = show_pipeline(run)
    text = str(view)
    assert text.splitlines()[0].startswith("block (0, 0, 0): 5 warps")
    assert re.search(
        r"step +\d+  warp 1: wait full\[0\] phase 0; warp 2: wait full\[0\] phase 0", text
    )
    svg = view.svg()
    assert svg.count('class="tirx-ev k-tma"') == K and "<title>step" in svg
    assert "stalled at empty[0]" in svg and "tensor copy issued" in svg  # detail and key
    width = float(re.search(r'width="([\d.]+)"', svg).group(1))
    assert width <= 880
    png = view.png(tmp_path / "p.png")
    assert struct.unpack(">II", png[16:24])[0] == round(width * 1.5)
    trace = view.chrome_trace(tmp_path / "p.json")
    loaded = json.loads((tmp_path / "p.json").read_text())
    assert loaded == json.loads(json.dumps(trace))
    names = {e["args"]["name"] for e in trace["traceEvents"] if e["ph"] == "M"}
    assert {"warp 0", "warp 4", "full[1]"} <= names
    stalls = [e for e in trace["traceEvents"] if e.get("cat") == "stall"]
    assert stalls and all(e["dur"] > 1 for e in stalls)
    assert view.save(tmp_path / "p.svg").read_text().startswith("<svg")


# without the empty wait the producer arms the stage's full barrier again before it observed
# the phase the last copy completes: the fault is that arrive, before the copy that overwrites
@pytest.mark.parametrize("planted,warp,line_of", [("full", 1, "acc[j] = acc[j]"),
                                                  ("empty", 0, "expect_tx")])  # fmt: skip
def test_a_missing_wait_is_the_fault_the_timeline_ends_in(tmp_path, planted, warp, line_of):
    a, out, _ = ring_inputs(K)
    exe = tirx.compile(ring_kernel(tmp_path, K, planted=planted), target="sim")
    with pytest.raises(tirx.SimulationError) as info:
        exe(a, out, trace=True)
    err = info.value
    assert err.warp == warp and err.run is not None
    view = show_pipeline(err)
    fault = [e for e in view.timeline.events if e.kind == "fault"]
    assert len(fault) == 1 and fault[0].row == f"warp {warp}"
    assert fault[0].step == view.timeline.steps - 1  # the timeline ends in it
    detail = fault[0].detail  # the copy's bytes, before (or unobserved after) it completed
    assert (
        "has not completed" in detail
        or "whose completion this thread has not observed" in detail
        or "but has not observed phase 0 complete" in detail
    )
    assert line_of in err.span.source_line()
    assert str(view).splitlines()[-2].startswith("fault: ")
    assert "fault: " in view.svg()


def test_what_show_pipeline_refuses():
    with pytest.raises(tirx.TirxError, match="not traced"):
        show_pipeline(tirx.SimulationError("a fault"))
    with pytest.raises(tirx.TirxError, match="simulator run's result"):
        show_pipeline([1, 2, 3])
