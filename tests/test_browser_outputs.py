"""Outputs that survive, in JupyterLab and Chromium: the committed notebooks opened *untrusted*
(as a fresh clone is: JupyterLab sanitizes their HTML) render, light and dark, with no runs
of digits from stripped pictures and no stray radio buttons; a view's widget gives way to its
static picture after a kernel restart and after a reload, and comes back when run again.
Screenshots go to the test's temporary directory and to ``test-output/``."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import pytest

from tests.browser.lab import CHROMIUM, CHROMIUM_ARGS, jupyter_lab
from tests.test_browser import KERNEL_IDLE

ROOT = Path(__file__).resolve().parents[1]
COMMITTED = sorted((ROOT / "notebooks").glob("*.ipynb"))

pytestmark = pytest.mark.skipif(
    not Path(CHROMIUM).exists(), reason=f"{CHROMIUM} is missing (apt-get install chromium)"
)


@pytest.fixture
def shots(tmp_path):
    saved: list[Path] = []
    yield tmp_path, saved
    out = ROOT / "test-output"
    out.mkdir(exist_ok=True)
    for path in saved:
        shutil.copy(path, out / path.name)


RENDERED = """() => {
  const outs = Array.from(document.querySelectorAll('.jp-OutputArea-output'))
    .filter(o => o.getClientRects().length);
  const visible = el => el.getClientRects().length > 0 && getComputedStyle(el).visibility !== 'hidden';
  return {
    trusted: window.jupyterapp.shell.currentWidget.content.model.cells.get(0)
      ? Array.from({length: window.jupyterapp.shell.currentWidget.content.model.cells.length},
          (_, i) => window.jupyterapp.shell.currentWidget.content.model.cells.get(i))
          .filter(c => c.type === 'code' && c.outputs.length).every(c => c.trusted) : null,
    outputs: outs.length,
    // a stripped picture's texts run together: its axis numbers become one run of digits
    digits: outs.map(o => o.innerText).filter(t => /\\d{24,}/.test(t)).length,
    radios: Array.from(document.querySelectorAll('.jp-OutputArea-output input[type=radio]')).filter(visible).length,
    svgShown: Array.from(document.querySelectorAll('.jp-OutputArea-output .tirx-svg')).filter(visible).length,
    stills: Array.from(document.querySelectorAll('.jp-OutputArea-output .tirx-still')).filter(visible).length,
    coloured: Array.from(document.querySelectorAll('.tirx-still span')).slice(0, 50)
      .filter(s => getComputedStyle(s).backgroundColor !== 'rgba(0, 0, 0, 0)').length,
    pythonRows: Array.from(document.querySelectorAll('.tirx-python label.py-line')).slice(0, 6)
      .map(l => Math.round(l.getBoundingClientRect().top)),
    errors: outs.filter(o => /No (safe )?renderer|Error displaying widget/.test(o.innerText)).length,
  };
}"""


@pytest.mark.parametrize("theme", [None, "JupyterLab Dark"], ids=["light", "dark"])
def test_committed_notebooks_render_untrusted(tmp_path, shots, theme):
    from playwright.sync_api import sync_playwright

    shot_dir, saved = shots
    name = "dark" if theme else "light"
    problems = {}
    with jupyter_lab(tmp_path / "lab", COMMITTED, theme=theme) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1400})
            for nb in COMMITTED:
                page.goto(lab.notebook_url(nb.name))
                page.wait_for_function(KERNEL_IDLE, timeout=60_000)
                page.wait_for_timeout(800)  # the outputs render after the kernel is ready
                got = page.evaluate(RENDERED)
                assert got["trusted"] is False, f"{nb.name} opened trusted: not what a clone sees"
                wrong = {k: v for k, v in got.items()
                         if k in ("digits", "radios", "svgShown", "errors") and v}  # fmt: skip
                rows = got["pythonRows"]
                if len(set(rows)) != len(rows):
                    wrong["python lines on one row"] = rows
                if "tirx-static" in nb.read_text() and not (got["stills"] and got["coloured"]):
                    wrong["no coloured still"] = got
                if wrong:
                    problems[nb.name] = wrong
                page.screenshot(
                    path=str(shot_dir / f"untrusted_{name}_{nb.stem}.png"), full_page=True
                )
                saved.append(shot_dir / f"untrusted_{name}_{nb.stem}.png")
                stills = page.locator(".jp-OutputArea-output .tirx-still")
                if stills.count():
                    stills.first.scroll_into_view_if_needed()
                    stills.first.screenshot(
                        path=str(shot_dir / f"untrusted_{name}_{nb.stem}_still.png")
                    )
                    saved.append(shot_dir / f"untrusted_{name}_{nb.stem}_still.png")
        finally:
            browser.close()
    stale = {n for n in problems if stale_panels(ROOT / "notebooks" / n)}
    assert not set(problems) - stale, json.dumps(problems, indent=1)
    if stale:  # outputs saved before this version of the panel: `make notebooks` renews them
        pytest.xfail(f"saved before the panel hid its radio buttons untrusted: {sorted(stale)}")


def stale_panels(path: Path) -> bool:
    """Whether the notebook's saved %%tirx panels were made before their radio buttons carried
    ``hidden="hidden"`` (re-executing the notebook renews them)."""
    text = path.read_text()
    return 'class=\\"tirx-pick\\"' in text and 'hidden=\\"hidden\\"' not in text


FALLBACK = {
    "cells": [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": "%load_ext tirx"},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": "from widgets import show_fragment\n"
                   "show_fragment('mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32', 'A')"},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                "name": "python3"}},
    "nbformat": 4, "nbformat_minor": 5,
}  # fmt: skip
SHOWN = """() => {
  const shown = el => !!el && el.getClientRects().length > 0;
  const error = Array.from(document.querySelectorAll('.jp-OutputArea-output'))
    .some(o => shown(o) && /Error displaying widget|model not found/.test(o.innerText));
  return {static: shown(document.querySelector('.tirx-static')),
          live: shown(document.querySelector('.tirx-live .tirx-cells')), error};
}"""


def test_a_widget_falls_back_to_its_picture_after_a_restart_and_a_reload(tmp_path, shots):
    from playwright.sync_api import sync_playwright

    shot_dir, saved = shots
    nb = tmp_path / "fallback.ipynb"
    nb.write_text(json.dumps(FALLBACK))
    with jupyter_lab(tmp_path / "lab", [nb]) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.goto(lab.notebook_url(nb.name))
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_function("document.querySelectorAll('.tirx-live .tirx-cells button')"
                                   ".length === 256", timeout=90_000)  # fmt: skip
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            assert page.evaluate(SHOWN) == {"static": False, "live": True, "error": False}
            page.evaluate("() => window.jupyterapp.commands.execute('docmanager:save')")
            page.wait_for_timeout(800)
            page.evaluate("() => window.jupyterapp.shell.currentWidget.sessionContext"
                          ".session.kernel.restart()")  # fmt: skip
            page.wait_for_function(f"({SHOWN})().static", timeout=30_000)
            assert page.evaluate(SHOWN) == {"static": True, "live": False, "error": False}
            assert re.search(r"T0:a0", page.locator(".tirx-static svg").first.text_content())
            page.screenshot(path=str(shot_dir / "fallback_after_restart.png"))
            saved.append(shot_dir / "fallback_after_restart.png")
            page.reload()
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            page.wait_for_timeout(1500)  # the widget manager gives up on the lost model
            assert page.evaluate(SHOWN) == {"static": True, "live": False, "error": False}
            page.screenshot(path=str(shot_dir / "fallback_after_reload.png"))
            saved.append(shot_dir / "fallback_after_reload.png")
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_function(f"({SHOWN})().live", timeout=90_000)
            assert page.evaluate(SHOWN) == {"static": False, "live": True, "error": False}
        finally:
            browser.close()
