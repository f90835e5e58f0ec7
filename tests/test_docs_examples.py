"""The examples of docs/torch.md, docs/autotune.md, docs/saving.md and docs/attention.md run
as written: every ```python block of a page in order, in one namespace, in a scratch
directory. Blocks that start with ``# GPU`` run on the GPU machine only (the ``gpu`` test);
blocks that start with ``# excerpt`` quote a kernel's body and are not programs."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PAGES = ["docs/torch.md", "docs/autotune.md", "docs/saving.md", "docs/attention.md"]
_BLOCK = re.compile(r"^```python\n(.*?)^```", re.S | re.M)


def _blocks(page: str) -> list[str]:
    return _BLOCK.findall((ROOT / page).read_text())


def _run(page: str, gpu: bool) -> int:
    # the blocks run as the body of a real module (torch.compile's tracer imports the module
    # that a traced function's globals name, as it would a user's script)
    module = types.ModuleType(f"docs_{Path(page).stem}")
    sys.modules[module.__name__] = module
    ns = module.__dict__
    ran = 0
    for i, block in enumerate(_blocks(page)):
        if (block.startswith("# GPU") and not gpu) or block.startswith("# excerpt"):
            continue
        exec(compile(block, f"{page} (python block {i + 1})", "exec"), ns)
        ran += 1
    return ran


@pytest.mark.parametrize("page", PAGES)
def test_the_pages_examples_run(page, tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert _run(page, gpu=False) >= (1 if page == "docs/attention.md" else 2)


@pytest.mark.gpu
@pytest.mark.parametrize("page", PAGES)
def test_the_pages_examples_run_on_the_gpu(page, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    assert _run(page, gpu=True) >= (1 if page == "docs/attention.md" else 2)


def test_every_repository_path_the_pages_name_exists():
    # a module moved (into tirx/families/, say) leaves its old path in the prose otherwise;
    # the run records under docs/gpu-runs/ describe the tree of their day and are left out
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    path = re.compile(
        r"\b(?:tirx|widgets|benchmarks|tests|notebooks|binder)/[\w/.-]*\.(?:py|md|sh|ipynb)"
    )
    missing = [
        f"{page.relative_to(ROOT)}: {found}"
        for page in pages
        for found in path.findall(page.read_text())
        if not (ROOT / found).exists()
    ]
    assert not missing, missing
