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
VISUALIZER_DONE = (
    "document.querySelectorAll('.tirx-grid').length >= 17 && "
    "Array.from(document.querySelectorAll('.tirx-info'))"
    ".some(e => e.textContent.includes('elements agree')) && "
    "document.querySelectorAll('svg.tirx-pipeline').length === 2 && "
    "document.querySelectorAll('.tirx-mismatch').length === 1"
)
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
            page.wait_for_function(VISUALIZER_DONE, timeout=120_000)
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
            # layout, pair (2), instruction, swizzle, trace, 2 checks, the machine beside the
            # wrong one; wgmma's D and A, two shared operands (2 panels each), a TMA box (2)
            assert grids.count() == 17
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
            assert views.count() == 12
            assert "120 of 128 elements disagree" in views.nth(6).inner_text()
            # the wrong check: a click on an element of the drawing outlines it in the machine's
            beside = views.nth(6).locator(".tirx-grid")
            assert beside.count() == 2 and "what the simulator did" in views.nth(6).inner_text()
            beside.nth(0).locator(".tirx-cells button").nth(1).click()
            page.wait_for_function(
                "(g) => getComputedStyle(g.querySelectorAll('.tirx-cells button')[1])"
                ".backgroundColor === 'rgb(34, 34, 34)'",
                arg=beside.nth(1).element_handle(),
                timeout=15_000,
            )
            for name, index in (("pair", 1), ("instruction", 2), ("swizzle", 3), ("trace", 4),
                                ("check", 5), ("check_wrong", 6)):  # fmt: skip
                out = views.nth(index)
                out.scroll_into_view_if_needed()
                _save(out, shot_dir / f"{name}.png", saved)
            assert page.evaluate(LOW_CONTRAST) == []  # every output's text reads (WCAG AA)

            # a click answers in under 0.2 s: pointer down to the explanation painted, on the
            # layout view, the instruction's fragment and wgmma's accumulator (a page of 512)
            times, by_grid = [], {}
            for grid, cells in ((0, (5, 40, 77)), (3, (6, 100, 200)), (9, (3, 130, 400))):
                g = grids.nth(grid)
                g.scroll_into_view_if_needed()
                for index in cells:
                    page.evaluate(ARM_CLICK, grid)
                    g.locator(".tirx-cells button").nth(index).click()
                    by_grid.setdefault(grid, []).append(page.evaluate("window._tirxClick"))
                times += by_grid[grid]
            # the wgmma page on its own, six clicks more: a click costs what it changes, not
            # the page's 512 cells (a click on another cell of the same thread restyles two)
            wgmma = grids.nth(9)
            assert wgmma.locator(".tirx-cells button").count() == 512
            for index in (17, 260, 511, 64, 300, 449):
                page.evaluate(ARM_CLICK, 9)
                wgmma.locator(".tirx-cells button").nth(index).click()
                by_grid[9].append(page.evaluate("window._tirxClick"))
            same = wgmma.evaluate(SAME_THREAD, 449)  # the clicked cell's thread: another cell
            page.evaluate(COUNT_RESTYLED, 9)
            wgmma.locator(".tirx-cells button").nth(same).click()
            page.wait_for_function(f"(g) => g.querySelectorAll('.tirx-cells button')[{same}]"
                                   ".style.backgroundColor === 'rgb(34, 34, 34)'",
                                   arg=wgmma.element_handle(), timeout=15_000)  # fmt: skip
            page.wait_for_timeout(300)
            restyled = page.evaluate("window._tirxRestyled()")
            median = sorted(times)[len(times) // 2]
            on_wgmma = sorted(by_grid[9])[len(by_grid[9]) // 2]
            (shot_dir / "click_latency.txt").write_text(
                "pointer down to painted, ms: "
                + ", ".join(f"{t:.0f}" for t in times)
                + f"\nmedian {median:.0f} ms\n"
                + "".join(
                    f"grid {g}: " + ", ".join(f"{t:.0f}" for t in ts) + "\n"
                    for g, ts in by_grid.items()
                )  # fmt: skip
                + f"wgmma's page of 512: median {on_wgmma:.0f} ms over {len(by_grid[9])} clicks; "
                f"another cell of the same thread restyled {restyled} buttons\n"
            )
            saved.append(shot_dir / "click_latency.txt")
            assert median < 200, f"a click takes {median:.0f} ms (median of {times})"
            assert on_wgmma < 200, f"a click on wgmma's page takes {on_wgmma:.0f} ms ({by_grid[9]})"
            assert restyled == 2, f"{restyled} buttons restyled for a click in the same thread"
        finally:
            browser.close()
    print(f"browser test took {time.monotonic() - started:.1f} s")


# Before a click on the grid numbered `index`: a promise of the ms from its pointer-down to the
# frame after its explanation (.tirx-info) changed, in window._tirxClick.
ARM_CLICK = """(index) => {
  const grid = document.querySelectorAll('.tirx-grid')[index];
  const out = grid.closest('.jp-OutputArea-output');
  const infos = () => Array.from(out.querySelectorAll('.tirx-info')).map(i => i.innerHTML).join();
  const before = infos();
  window._tirxClick = new Promise(done => {
    let t0 = null;
    grid.addEventListener('pointerdown', () => { t0 = performance.now(); }, {once: true, capture: true});
    const watch = new MutationObserver(() => {
      if (infos() === before) return;
      watch.disconnect();
      requestAnimationFrame(() => requestAnimationFrame(() => done(performance.now() - t0)));
    });
    watch.observe(out, {subtree: true, childList: true, characterData: true});
  });
}"""


# The position of another button of grid `g` held by the same thread (or lane) as button k (its
# tooltip names the holder first).
SAME_THREAD = """(g, k) => { const bs = Array.from(g.querySelectorAll('.tirx-cells button'));
  const tip = (b) => (b.title.match(/thread (\\d+)|lane (\\d+)/) || [''])[0];
  return bs.findIndex((b, j) => j !== k && tip(b) && tip(b) === tip(bs[k])); }"""
# Count the buttons of grid `index` whose inline style changes from now on: window._tirxRestyled().
COUNT_RESTYLED = """(index) => {
  const grid = document.querySelectorAll('.tirx-grid')[index];
  const changed = new Set();
  const watch = new MutationObserver(ms => ms.forEach(m => changed.add(m.target)));
  watch.observe(grid.querySelector('.tirx-cells'), {subtree: true, attributes: true,
                                                    attributeFilter: ['style']});
  window._tirxRestyled = () => { watch.disconnect(); return changed.size; };
}"""


FRAGMENTS = ROOT / "tests" / "browser" / "fragments.ipynb"
OUTLINED = """(cells) => cells.map(c => getComputedStyle(c).outlineStyle === 'solid')"""
LINK_RGB = "rgb(31, 95, 191)"  # widgets.picture.LINK_COLOR
# every contract picture within its output area and not scrolling: the offenders' widths
FITS = """() => Array.from(document.querySelectorAll('.tirx-contract-picture')).flatMap(p => {
  const area = p.closest('.jp-OutputArea-output').getBoundingClientRect();
  const box = p.getBoundingClientRect();
  const over = p.scrollWidth > p.clientWidth + 1 || box.right > area.right + 1;
  return over ? [[Math.round(box.width), p.scrollWidth, Math.round(area.width)]] : [];
})"""
# the code lines of a pane drawn on more than one row (a wrapped line has several rects)
ONE_ROW_LINES = """(pre) => Array.from(pre.querySelectorAll('.cl'))
  .filter(l => l.textContent.length > 20 && l.getClientRects().length > 1)
  .map(l => l.textContent.slice(0, 60))"""


def test_fragment_pictures_hover_click_and_errors(tmp_path, shots):
    """The element-level pictures in JupyterLab: hovering a cell outlines its lane's cells
    (widget and static SVG alike), a click in one linked view lights the same element in the
    other, a ContractError shows its picture under the message, and clicking a Python line of
    the panel lights its CUDA lines. Views one cell displays are linked without a call, and a
    click on one side of a contract picture outlines the element on the other. The pictures of
    a contract error fit the output at 1,400 and 1,000 px (side by side when they can, one
    below the other when not), and long code lines do not wrap. Screenshots at both widths."""
    from playwright.sync_api import sync_playwright

    shot_dir, saved = shots
    with jupyter_lab(tmp_path / "lab", [FRAGMENTS]) as lab, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1600})
            page.goto(lab.notebook_url(FRAGMENTS.name))
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)
            page.evaluate("() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }")
            page.wait_for_function(
                "document.querySelectorAll('.tirx-contract-picture svg').length === 4 && "
                "document.querySelectorAll('.tirx-panel .tirx-code').length === 1",
                timeout=120_000,
            )
            page.wait_for_function(KERNEL_IDLE, timeout=60_000)

            # the widget: 256 element cells; hovering T5:a0 outlines lane 5's eight cells
            grid = page.locator(".tirx-grid").first
            cells = grid.locator(".tirx-cells button")
            assert cells.count() == 256
            labels = cells.evaluate_all("bs => bs.map(b => b.textContent)")
            assert labels[:3] == ["T0:a0", "T0:a1", "T1:a0"] and labels[16 * 8 + 9] == "T0:a7"
            lane5 = [i for i, t in enumerate(labels) if t.startswith("T5:")]
            assert len(lane5) == 8
            cells.nth(lane5[0]).hover()
            outlined = cells.evaluate_all(OUTLINED)
            assert [i for i, on in enumerate(outlined) if on] == lane5
            view = page.locator(".jp-OutputArea-output").filter(has=grid).first
            _save(view, shot_dir / "fragment_widget_hover.png", saved)

            # click: lane 5 selected, the formula shown
            cells.nth(lane5[3]).click()
            info = view.locator(".tirx-info")
            info.filter(has_text="lane = 4·(row % 8)").wait_for(timeout=15_000)
            assert f"= {labels[lane5[3]]}: lane 5" in info.inner_text()
            assert "T<lane>:a<i>" in info.inner_text()  # the legend of the element picture

            # the keyboard: a focused cell outlines its lane's cells, the arrow keys move
            # between cells, Enter clicks one, and the notebook stays in command mode
            cells.nth(lane5[3]).focus()
            assert [i for i, on in enumerate(cells.evaluate_all(OUTLINED)) if on] == lane5
            page.keyboard.press("ArrowDown")
            page.keyboard.press("ArrowRight")
            nearby = lane5[3] + 16 + 1  # the cell a row down and a column right
            assert page.evaluate("document.activeElement.textContent") == labels[nearby]
            page.keyboard.press("Enter")
            info.filter(has_text=f"= {labels[nearby]}:").wait_for(timeout=15_000)
            assert page.evaluate("window.jupyterapp.shell.currentWidget.content.mode") == "command"
            page.evaluate("document.activeElement.blur()")

            # the static SVG: hover a cell of lane 5, every lane-5 rect gets a black stroke
            svg = page.locator("svg.tirx-fragment >> visible=true").first  # HTML(a_frag.svg())
            rect = svg.locator('rect.tirx-el[data-index="18"]')
            rect.hover()
            strokes = svg.locator("rect.tirx-el").evaluate_all(
                "rs => rs.map(r => [r.dataset.lane, getComputedStyle(r).stroke])"
            )
            dark = {i for i, (lane, s) in enumerate(strokes) if s == "rgb(0, 0, 0)"}
            assert dark == {i for i, (lane, _) in enumerate(strokes) if lane == "5"}
            tip = svg.locator("text.tirx-tip.t18")
            assert tip.evaluate("t => getComputedStyle(t).display") != "none"
            assert tip.text_content().startswith("element (1, 2) = T5:a0")
            out = page.locator(".jp-OutputArea-output").filter(has=svg).first
            _save(out, shot_dir / "fragment_svg_hover.png", saved)

            # linked views: a click on Out[9, 3] in the element view outlines it in the word view
            linked = page.locator(".jp-OutputArea").filter(has_text="D as lane:slot").first
            grids = linked.locator(".tirx-grid")
            assert grids.count() == 2
            grids.nth(0).locator(".tirx-cells button").nth(9 * 8 + 3).click()
            page.wait_for_function(
                "(g) => getComputedStyle(g.querySelectorAll('.tirx-cells button')[75])"
                ".backgroundColor === 'rgb(34, 34, 34)'",
                arg=grids.nth(1).element_handle(),
                timeout=15_000,
            )  # the focused cell of the other view is drawn dark
            linked.scroll_into_view_if_needed()
            _save(linked, shot_dir / "linked_views.png", saved)

            # the contract error: message, then expected and actual fragments with marks
            errors = page.locator(".jp-Cell").filter(has=page.locator(".tirx-contract-picture"))
            assert errors.count() == 2  # a wrong D layout, then a wrong A layout
            error_out = errors.nth(0)
            text = error_out.inner_text()
            assert "operand D" in text and "element(s) held by a different lane" in text
            picture = error_out.locator(".tirx-contract-picture")
            assert picture.locator("svg").count() == 2
            boxes = [picture.locator("svg").nth(i).bounding_box() for i in range(2)]
            assert boxes[1]["x"] > boxes[0]["x"] + boxes[0]["width"] - 1  # side by side
            assert picture.locator("text", has_text="✗").count() >= 2
            # a click on an element of one side outlines the same element on the other
            picture.locator("svg").nth(0).locator('rect.tirx-el[data-index="75"]').click()
            page.wait_for_function(
                "(svg) => getComputedStyle(svg.querySelector('rect.tirx-el[data-index=\"75\"]'))"
                f".stroke === '{LINK_RGB}'",
                arg=picture.locator("svg").nth(1).element_handle(),
                timeout=15_000,
            )
            error_out.scroll_into_view_if_needed()
            _save(error_out, shot_dir / "contract_error_picture.png", saved)
            wide = errors.nth(1)  # A: two 16 x 16 pictures, too wide to share a row
            assert "operand A" in wide.inner_text()
            assert wide.locator(".tirx-contract-picture svg").count() == 2
            assert page.evaluate(FITS) == [], "a contract picture is wider than its output"
            wide.scroll_into_view_if_needed()
            _save(wide, shot_dir / "contract_error_wide_1400px.png", saved)

            # the code panel: click a Python line, its CUDA lines light up
            panel = page.locator(".tirx-panel").filter(has=page.locator(".tirx-code"))
            panel.locator("details.tirx-cuda summary").click()
            line = panel.locator("label.py-line.mapped", has_text="T.cuda.cta_sync()")
            n = line.get_attribute("data-line")
            line.click()
            lit = panel.locator(f"details.tirx-cuda .cl.o{n}")
            assert lit.count() >= 1 and "__syncthreads" in lit.first.inner_text()
            bg = lit.first.evaluate("e => getComputedStyle(e).backgroundColor")
            assert bg not in ("rgba(0, 0, 0, 0)", "transparent")
            ptx = panel.locator(f"details.tirx-ptx .cl.o{n}")  # and its PTX: the barrier
            texts = ptx.evaluate_all("es => es.map(e => e.textContent)")  # pane still closed
            assert any("bar.sync" in t or "barrier" in t for t in texts)
            assert panel.locator("button.tirx-copy").count() == 3
            # a line far down: the open CUDA pane scrolls to the first line it lit
            cuda = panel.locator("details.tirx-cuda pre")
            far = cuda.evaluate(BELOW_THE_FOLD)  # a Python line whose CUDA is out of sight
            assert far is not None and cuda.evaluate(SHOWS_LINE, far) is False
            panel.locator(f'label.py-line.mapped[data-line="{far}"]').click()
            page.wait_for_function("([pre, n]) => (" + SHOWS_LINE + ")(pre, n)",
                                   arg=[cuda.element_handle(), far], timeout=5_000)  # fmt: skip
            # long code lines stay one line each (the pane scrolls, the line does not wrap)
            assert panel.locator("details.tirx-cuda pre").evaluate(ONE_ROW_LINES) == []
            panel.scroll_into_view_if_needed()
            _save(panel, shot_dir / "code_panel_linked.png", saved)

            # narrower window: nothing wider than the notebook, the wide error stacks its sides
            page.set_viewport_size({"width": 1000, "height": 1600})
            page.wait_for_timeout(500)
            assert page.evaluate(FITS) == [], "a contract picture is wider than its output at 1000"
            sides = [wide.locator("svg").nth(i).bounding_box() for i in range(2)]
            assert sides[1]["y"] >= sides[0]["y"] + sides[0]["height"] - 1  # one below the other
            assert panel.locator("details.tirx-cuda pre").evaluate(ONE_ROW_LINES) == []
            _save(page, shot_dir / "fragments_1000px.png", saved)
            wide.scroll_into_view_if_needed()
            _save(wide, shot_dir / "contract_error_wide_1000px.png", saved)
            assert page.evaluate(LOW_CONTRAST) == []  # the light theme reads too (a line is lit)
            assert page.evaluate(KERNEL_IDLE)
        finally:
            browser.close()


# Whether the first line of a code pane lit by Python line n lies inside the pane's box.
SHOWS_LINE = """(pre, n) => { const t = pre.querySelector('.o' + n);
  const a = pre.getBoundingClientRect(), b = t.getBoundingClientRect();
  return b.top >= a.top - 1 && b.bottom <= a.bottom + 1; }"""


# The pane scrolled to its top: the Python line (data-line) whose first CUDA line is furthest
# below the pane's fold, or null when the whole pane is in sight.
BELOW_THE_FOLD = """(pre) => { pre.scrollTop = 0; const box = pre.getBoundingClientRect();
  let best = null, most = box.bottom;
  for (const l of pre.closest('.tirx-panes').querySelectorAll('label.py-line.mapped')) {
    const t = pre.querySelector('.o' + l.dataset.line);
    if (t && t.getBoundingClientRect().bottom > most) { most = t.getBoundingClientRect().bottom;
      best = l.dataset.line; } }
  return best; }"""


# Text in the notebook's outputs whose contrast with what is behind it is below WCAG AA
# (4.5:1): [classes, text, ratio, colour, background]. The background is the nearest ancestors'
# background colours composited over the page's; SVG pictures draw their own white ground and
# are left out, as is text that is not rendered (a closed section, a hidden tip).
LOW_CONTRAST = """() => {
  const rgba = c => { const m = c && c.match(/rgba?\\(([^)]*)\\)/); if (!m) return null;
    const p = m[1].split(/[\\s,\\/]+/).filter(Boolean).map(Number);
    return [p[0], p[1], p[2], p.length > 3 ? p[3] : 1]; };
  const over = (top, under) => top.slice(0, 3).map((v, i) => v * top[3] + under[i] * (1 - top[3]));
  const lum = c => { const f = v => { v /= 255;
    return v <= 0.03928 ? v / 12.92 : Math.pow((v + 0.055) / 1.055, 2.4); };
    return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
  const page = rgba(getComputedStyle(document.body).backgroundColor) || [255, 255, 255, 1];
  const ground = el => { const layers = [];
    for (let e = el; e; e = e.parentElement) { const c = rgba(getComputedStyle(e).backgroundColor);
      if (c && c[3] > 0) { layers.push(c); if (c[3] >= 1) break; } }
    let out = page.slice(0, 3);
    for (let i = layers.length - 1; i >= 0; i--) out = over(layers[i], out);
    return out; };
  const low = [];
  for (const el of document.querySelectorAll('.jp-OutputArea-output *')) {
    if (el.closest('svg') || !el.getClientRects().length) continue;
    const own = Array.from(el.childNodes).some(n => n.nodeType === 3 && n.textContent.trim());
    if (!own || getComputedStyle(el).visibility === 'hidden') continue;
    const bg = ground(el), fg = over(rgba(getComputedStyle(el).color), bg);
    const [a, b] = [lum(fg), lum(bg)];
    const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
    if (ratio < 4.5) low.push([el.tagName + '.' + el.className, el.textContent.trim().slice(0, 50),
      ratio.toFixed(2), getComputedStyle(el).color, bg.map(Math.round).join(',')]);
  }
  return low;
}"""
FRAGMENTS_DONE = (
    "document.querySelectorAll('.tirx-contract-picture svg').length === 4 && "
    "document.querySelectorAll('.tirx-panel .tirx-code').length === 1"
)


def test_widgets_in_the_dark_theme(tmp_path, shots):
    """Both notebooks in JupyterLab Dark: every text of every output (the panel and its PASS
    line, the views' titles, legends and explanations, the code panes, the error pictures'
    verdicts) keeps a contrast of at least 4.5:1 with what is behind it. Screenshots of each
    output for a look."""
    from playwright.sync_api import sync_playwright

    shot_dir, saved = shots
    with jupyter_lab(tmp_path / "lab", [NOTEBOOK, FRAGMENTS], theme="JupyterLab Dark") as lab, \
            sync_playwright() as pw:  # fmt: skip
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1800})
            problems = {}
            for notebook, done in ((NOTEBOOK, VISUALIZER_DONE), (FRAGMENTS, FRAGMENTS_DONE)):
                page.goto(lab.notebook_url(notebook.name))
                page.wait_for_function(KERNEL_IDLE, timeout=60_000)
                assert page.evaluate("document.body.dataset.jpThemeLight") == "false"
                page.evaluate(
                    "() => { window.jupyterapp.commands.execute('notebook:run-all-cells'); }"
                )
                page.wait_for_function(done, timeout=120_000)
                page.wait_for_function(KERNEL_IDLE, timeout=60_000)
                # open the code panes: their text is measured too
                page.evaluate("document.querySelectorAll('.tirx-panel details')"
                              ".forEach(d => { d.open = true; })")  # fmt: skip
                page.wait_for_timeout(300)
                outputs = page.locator(".jp-OutputArea-output >> visible=true")
                for i in range(outputs.count()):
                    out = outputs.nth(i)
                    if out.locator(".tirx-panel, .tirx-grid, .tirx-contract-picture, svg").count():
                        out.scroll_into_view_if_needed()
                        _save(out, shot_dir / f"dark_{notebook.stem}_{i}.png", saved)
                low = {(cls, fg, bg): (text, ratio) for cls, text, ratio, fg, bg in
                       page.evaluate(LOW_CONTRAST)}  # fmt: skip
                if low:
                    problems[notebook.name] = low
        finally:
            browser.close()
    assert not problems, f"text below 4.5:1 in the dark theme: {problems}"
