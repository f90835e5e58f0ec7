"""The pure parts of benchmarks/attention_speed.py: FLOP counting, problem sizes, the results
file's name, the table, and the clean exit without a GPU."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))

import attention_speed as bench  # noqa: E402


def test_flops_count_two_products_and_causal_counts_half():
    assert bench.attention_flops(2, 3, 5, 7, 64, False) == 4 * 2 * 3 * 5 * 7 * 64
    assert bench.attention_flops(2, 3, 5, 7, 64, True) == 2 * 2 * 3 * 5 * 7 * 64
    cell = bench.Cell("float16", 128, False, 4096, 4, 16, {"tirx": 2.0})
    assert cell.tflops("tirx") == pytest.approx(4 * 4 * 16 * 4096**2 * 128 / 2e-3 / 1e12)


def test_problem_size_fills_the_tokens_and_the_hidden_width():
    assert bench.problem_size(1024, 64, 16384, 2048) == (16, 32)
    assert bench.problem_size(16384, 128, 16384, 2048) == (1, 16)
    assert bench.problem_size(32768, 128, 16384, 2048) == (1, 16)
    with pytest.raises(ValueError, match="not a multiple of head_dim"):
        bench.problem_size(1024, 96, 16384, 2000)


def test_results_file_is_named_after_the_gpu():
    import report

    assert report.result_path("attention_speed", report.machine_label("NVIDIA H200")).name == (
        "attention_speed-h200.md"
    )


def test_table_ratios_are_against_the_fastest_sdpa_backend():
    cell = bench.Cell("bfloat16", 64, True, 2048, 8, 32)
    flops = cell.flops
    for name, tf in {
        "tirx": 200.0,
        "tirx wgmma 128x2": 450.0,
        "tirx wgmma 128x2-pp-ov": 500.0,
        "sdpa cudnn": 400.0,
        "sdpa flash": 320.0,
        "triton 128x64/4w/3s": 250.0,
        "triton 64x64/4w/3s": 300.0,
    }.items():
        cell.ms[name] = flops / (tf * 1e12) * 1e3
    lines = bench.table([cell]).splitlines()
    assert len(lines) == 3
    cols = [c.strip() for c in lines[2].strip("|").split("|")]
    assert cols[:5] == ["bfloat16", "64", "causal", "2048", "8 × 32"]
    # the fastest wgmma configuration counts, named; efficient was not run
    assert cols[5:10] == ["200.0", "500.0 (128x2-pp-ov)", "400.0", "320.0", "–"]
    assert cols[10] == "300.0 (64x64/4w/3s)"
    assert cols[11:] == ["0.50", "1.25", "0.75"]


def test_a_cell_without_the_wgmma_kernel_shows_dashes():
    cell = bench.Cell("float16", 64, False, 1024, 16, 32, {"tirx": 1.0, "sdpa flash": 1.0})
    cols = [c.strip() for c in bench.table([cell]).splitlines()[2].strip("|").split("|")]
    assert cols[6] == "–" and cols[12] == "–" and cols[11] == "1.00"


def test_wgmma_configs_parse_into_the_kernels_configurations():
    from tirx.examples.attention_wgmma import WgmmaAttentionConfig

    got = bench.wgmma_configs("128x2, 64x3-pp,128x2-pp-ov,128x2-ax-c3,128x2-ax-ps,")
    assert got == [
        ("128x2", WgmmaAttentionConfig(128, 2)),
        ("64x3-pp", WgmmaAttentionConfig(64, 3, pingpong=True)),
        ("128x2-pp-ov", WgmmaAttentionConfig(128, 2, pingpong=True, overlap=True)),
        ("128x2-ax-c3", WgmmaAttentionConfig(128, 2, approx=True, consumers=3)),
        ("128x2-ax-ps", WgmmaAttentionConfig(128, 2, approx=True, persistent=True)),
    ]
    names = [bench.config_name(c) for _, c in got]
    assert names == ["128x2", "64x3-pp", "128x2-pp-ov", "128x2-ax-c3", "128x2-ax-ps"]
    assert bench.wgmma_configs("") == []
    with pytest.raises(ValueError, match="not BNxSTAGES"):
        bench.wgmma_configs("128x2-fast")
    with pytest.raises(ValueError, match="two consumer warpgroups"):
        bench.wgmma_configs("128x2-pp-c3")
    with pytest.raises(ValueError, match="block_n must be one of"):
        bench.wgmma_configs("96x2")


def test_without_a_gpu_it_says_so_and_stops(monkeypatch, capsys):
    import gemm_speed

    monkeypatch.setattr(gemm_speed, "gpu_visible", lambda: False)
    assert bench.main(["--seqs", "1024"]) == 2
    assert "no NVIDIA GPU is visible" in capsys.readouterr().err


def test_each_configuration_gets_a_column_when_several_of_its_kernel_were_timed():
    cell = bench.Cell("bfloat16", 128, False, 4096, 4, 16)
    cell.ms = {"tirx wgmma 128x2": 2.0, "tirx wgmma 128x2-ax": 1.0, "sdpa cudnn": 1.5,
               "tirx mma 4w1m64": 4.0}  # fmt: skip
    lines = bench.config_table([cell]).splitlines()
    assert lines[2] == "| dtype | d | mode | seq | wgmma 128x2 | wgmma 128x2-ax |"
    tf = cell.flops / 1e-3 / 1e12
    assert lines[4] == f"| bfloat16 | 128 | full | 4096 | {tf / 2:.1f} | {tf:.1f} |"
    cell.ms["tirx mma 4w1m64-ax"] = 2.0  # two of each kernel: both kernels' columns
    assert bench.config_table([cell]).splitlines()[2] == (
        "| dtype | d | mode | seq | mma 4w1m64 | mma 4w1m64-ax | wgmma 128x2 | wgmma 128x2-ax |"
    )
    for name in ("tirx wgmma 128x2-ax", "tirx mma 4w1m64-ax"):
        del cell.ms[name]
    assert bench.config_table([cell]) == ""  # one configuration each: the main table says it


def test_mma_configs_parse_and_the_fastest_counts_named():
    from tirx.examples.attention_mma import AttentionConfig

    got = bench.mma_configs("4w1m64, 4w2m64-ax,")
    assert [c for _, c in got] == [AttentionConfig(4, 1, 64), AttentionConfig(4, 2, 64, True)]
    assert [bench.mma_config_name(c) for _, c in got] == ["4w1m64", "4w2m64-ax"]
    assert bench.mma_configs("") == []
    with pytest.raises(ValueError, match=r"WwMmBN\[-ax\]"):
        bench.mma_configs("4w1m64-pp")
    with pytest.raises(ValueError, match="cfg.block_n"):
        bench.mma_configs("4w1m48")
    cell = bench.Cell("float16", 64, False, 1024, 16, 32)
    cell.ms = {"tirx mma 4w2m64": 2.0, "tirx mma 4w2m64-ax": 1.0, "sdpa cudnn": 1.0}
    cols = [c.strip() for c in bench.table([cell]).splitlines()[2].strip("|").split("|")]
    assert cols[5] == f"{cell.tflops('tirx mma 4w2m64-ax'):.1f} (4w2m64-ax)"
    assert cols[11] == "1.00"  # the fastest configuration's ratio to SDPA


def test_the_approx_flag_names_round_trip():
    ((name, cfg),) = bench.wgmma_configs("64x3-pp-ov-ax")
    assert cfg.approx and cfg.pingpong and cfg.overlap and (cfg.block_n, cfg.stages) == (64, 3)
    assert bench.config_name(cfg) == name
    with pytest.raises(ValueError, match=r"BNxSTAGES\[-pp\]\[-ov\]\[-ax\]"):
        bench.wgmma_configs("128x2-fast")
