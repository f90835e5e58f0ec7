"""The visualizer in a real browser: JupyterLab on 127.0.0.1 and headless Chromium (Playwright).

Opens ``notebooks/visualizer_demo.ipynb`` (a copy), runs every cell, and checks what a user
sees: the ``%%tirx`` panel, the grids and lane selectors of the views, a lane change that
repaints the grid, a click that explains a cell, and an edited layout with a readable error.
Screenshots go to the test's temporary directory and to ``test-output/`` (git-ignored).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import pytest

from tests.browser.lab import CHROMIUM, CHROMIUM_ARGS, jupyter_lab

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOK = ROOT / "notebooks" / "visualizer_demo.ipynb"

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)

KERNEL_IDLE = """() => {
  const w = window.jupyterapp && window.jupyterapp.shell.currentWidget;
  const k = w && w.sessionContext && w.sessionContext.session && w.sessionContext.session.kernel;
  return !!k && k.status === 'idle';
}"""
CELL_ERRORS = """() => {
  const cells = window.jupyterapp.shell.currentWidget.content.model.cells;
  const errors = [];
  for (let i = 0; i < cells.length; i++) {
    const cell = cells.get(i);
    if (cell.type !== 'code') continue;
    for (const out of cell.outputs.toJSON()) {
      if (out.output_type === 'error') errors.push(out.ename + ': ' + out.evalue);
    }
  }
  return errors;
}"""
GRID_STATE = """(grid) => Array.from(grid.querySelectorAll('.tirx-cells button')).map(b => [
  b.textContent, getComputedStyle(b).backgroundColor, getComputedStyle(b).fontWeight])"""


def _save(page_or_locator, path: Path, saved: list) -> None:
    page_or_locator.screenshot(path=str(path))
    saved.append(path)


@pytest.fixture
def shots(tmp_path):
    saved: list[Path] = []
    yield tmp_path, saved
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    for path in saved:
        shutil.copy(path, out / path.name)


def test_visualizer_notebook_in_jupyterlab(tmp_path, shots):
    from playwright.sync_api import sync_playwright

    shot_dir, saved = shots
    started = time.monotonic()
    with jupyter_lab(tmp_path / "lab", [NOTEBOOK]) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            page.goto(lab.notebook_url(NOTEBOOK.name))
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            # not awaited: a cell that never finishes must fail the waits below, not hang
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_function(
                "document.querySelectorAll('.tirx-cells button').length >= 960 && "
                "Array.from(document.querySelectorAll('.tirx-info'))"
                ".some(e => e.textContent.includes('elements agree'))",
                timeout=90_000,
            )
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            assert page.evaluate(CELL_ERRORS) == []

            # the %%tirx panel
            panel = page.locator(".tirx-panel").first
            assert "PASS" in panel.inner_text() and "NVRTC" in panel.inner_text()
            assert page.locator(".tirx-panel details.tirx-ptx").count() == 1
            panel.locator("details.tirx-ptx summary").click()
            ptx = panel.locator("details.tirx-ptx pre")
            assert ptx.is_visible() and "mma.sync.aligned.m16n8k16" in ptx.inner_text()
            panel.scroll_into_view_if_needed()
            _save(panel, shot_dir / "tirx_panel.png", saved)

            # the views rendered as widgets: grids of cells with lane selectors
            grids = page.locator(".tirx-grid")
            assert grids.count() == 8  # layout, pair (2), instruction, swizzle, trace, 2 checks
            assert page.locator(".tirx-lane select").count() >= 6
            first = grids.first
            cells = first.locator(".tirx-cells button")
            assert cells.count() == 128
            before = first.evaluate(GRID_STATE)
            assert [label for label, _, _ in before[:4]] == ["0:0", "0:1", "1:0", "1:1"]
            assert len({bg for _, bg, _ in before}) == 32  # one colour per lane
            view = page.locator(".jp-OutputArea-output").filter(has=first).first
            view.scroll_into_view_if_needed()
            _save(view, shot_dir / "layout_all_lanes.png", saved)

            # pick lane 5: its four cells keep their colour and turn bold, the rest fade
            page.locator(".tirx-lane select").first.select_option("5")
            page.wait_for_function(
                "(grid) => Array.from(grid.querySelectorAll('.tirx-cells button'))"
                ".filter(b => getComputedStyle(b).fontWeight === '700').length === 4",
                arg=first.element_handle(),
                timeout=15_000,
            )
            after = first.evaluate(GRID_STATE)
            same = [b[0] for b, a in zip(before, after) if a[1] == b[1]]
            assert same == ["5:0", "5:1", "5:2", "5:3"]
            assert [a[0] for a in after if a[2] == "700"] == same
            _save(view, shot_dir / "layout_lane5.png", saved)

            # click element (9, 3): the selector follows its lane and the formula appears
            cells.nth(9 * 8 + 3).click()
            info = view.locator(".tirx-info")
            info.filter(has_text="laneid = 1·4 + 1·1 = 5").wait_for(timeout=15_000)
            assert "element (9, 3)" in info.inner_text()

            # an edited layout with a mistake gets a readable error, the grid stays
            box = view.locator(".tirx-layout-text input")
            box.fill("S[(2, 8, 4, 2) : (2, 4 @ laneid, 1 @ laneid)]")
            box.press("Enter")
            view.locator(".tirx-error").filter(has_text="3 strides").wait_for(timeout=15_000)
            assert cells.count() == 128
            _save(view, shot_dir / "layout_error.png", saved)

            views = page.locator(".jp-OutputArea-output").filter(has=page.locator(".tirx-grid"))
            assert views.count() == 7
            assert "120 of 128 elements disagree" in views.nth(6).inner_text()
            for name, index in (("pair", 1), ("instruction", 2), ("swizzle", 3), ("trace", 4),
                                ("check", 5), ("check_wrong", 6)):  # fmt: skip
                out = views.nth(index)
                out.scroll_into_view_if_needed()
                _save(out, shot_dir / f"{name}.png", saved)
        finally:
            browser.close()
    print(f"browser test took {time.monotonic() - started:.1f} s")
