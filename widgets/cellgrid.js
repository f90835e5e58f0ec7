// The front end of a tirx view's clickable grid (widgets/cellgrid.py), an anywidget module.
//
// Plain DOM: one <button> per cell shown, in a CSS grid, with the row and column labels beside
// it. The model holds the state (labels, tooltips, each cell's look as an index into a palette
// of style texts, the hover groups); every change is applied by comparing with what is drawn,
// so a click that changes a few cells writes a few inline styles and the browser restyles
// those buttons only. A click is one message to the kernel ({click: position}); hovering or
// focusing a cell outlines its lane's cells here, with no message.

const CSS_ID = "tirx-cellgrid-css-3";
const CSS = `
.tirx-cellgrid{font-size:11px;line-height:16px}
.tirx-cellgrid .tirx-body{display:flex;align-items:flex-start}
.tirx-cellgrid .tirx-cells{display:grid;gap:1px;width:max-content;contain:layout style}
.tirx-cellgrid .tirx-cells>button{width:var(--tirx-w);height:22px;margin:0;padding:0 2px;
  border:0;border-radius:2px;font:11px monospace;line-height:22px;white-space:nowrap;
  cursor:pointer;background:#e0e0e0;color:#000000}
.tirx-cellgrid .tirx-cells>button.tirx-gt{margin-top:5px}
.tirx-cellgrid .tirx-cells>button.tirx-gl{margin-left:5px}
.tirx-cellgrid .tirx-cells>button:hover{filter:brightness(0.92)}
.tirx-cellgrid .tirx-cells>button.tirx-hov{outline:2px solid #111111;outline-offset:-2px;z-index:1}
.tirx-cellgrid .tirx-cells>button:focus-visible{outline:2px solid #1f5fbf;outline-offset:-2px;
  z-index:2}
`;

function ensureCss() {
  if (document.getElementById(CSS_ID)) return;
  const style = document.createElement("style");
  style.id = CSS_ID;
  style.textContent = CSS;
  document.head.appendChild(style);
}

function div(cls) {
  const d = document.createElement("div");
  d.className = cls;
  return d;
}

function render({ model, el }) {
  ensureCss();
  el.classList.add("tirx-cellgrid");
  const head = div("tirx-head");
  const rows = div("tirx-rows");
  const cells = div("tirx-cells");
  const body = div("tirx-body");
  body.append(rows, cells);
  el.append(head, body);

  const buttons = [];
  const drawn = { label: [], tip: [], gap: [], look: [] }; // what each button shows now
  let frame = {}; // the texts of the frame shown now
  let groupsOf = []; // for each button, the hover groups it is in
  let lit = []; // the buttons outlined by the hover now
  let tab = 0; // the button reached by Tab (one per grid: the arrow keys move within it)

  function setFrame() {
    const next = {
      width: model.get("width"),
      tracks: model.get("tracks"),
      head: model.get("head"),
      rows: model.get("rows"),
    };
    if (next.width !== frame.width) el.style.setProperty("--tirx-w", `${next.width}px`);
    if (next.tracks !== frame.tracks) cells.style.gridTemplateColumns = next.tracks;
    if (next.head !== frame.head) head.innerHTML = next.head;
    if (next.rows !== frame.rows) rows.innerHTML = next.rows;
    frame = next;
  }

  let seen = []; // the model's lists drawn last (a message replaces the lists it changes)

  function setCells() {
    const lists = ["labels", "tips", "gaps", "palette", "looks"].map((name) => model.get(name));
    if (lists.every((list, i) => list === seen[i])) return;
    seen = lists;
    const [labels, tips, gaps, palette, looks] = lists;
    const n = labels.length;
    while (buttons.length > n) {
      buttons.pop().remove();
      for (const k in drawn) drawn[k].pop();
    }
    if (tab >= n) tab = 0; // the page shown has fewer cells than the last
    if (buttons[tab]) buttons[tab].tabIndex = 0;
    while (buttons.length < n) {
      const b = document.createElement("button");
      b.type = "button";
      b.tabIndex = buttons.length === tab ? 0 : -1;
      b._k = buttons.length;
      buttons.push(b);
      cells.appendChild(b);
      for (const k in drawn) drawn[k].push(undefined);
    }
    for (let k = 0; k < n; k++) {
      const b = buttons[k];
      if (drawn.label[k] !== labels[k]) b.textContent = drawn.label[k] = labels[k];
      const tip = tips[k] || "";
      if (drawn.tip[k] !== tip) b.title = drawn.tip[k] = tip;
      const gap = gaps[k] || 0;
      if (drawn.gap[k] !== gap) {
        b.classList.toggle("tirx-gt", (gap & 1) !== 0);
        b.classList.toggle("tirx-gl", (gap & 2) !== 0);
        drawn.gap[k] = gap;
      }
      const look = palette[looks[k]] || "";
      if (drawn.look[k] !== look) b.style.cssText = drawn.look[k] = look;
    }
  }

  let groups = null;

  function setGroups() {
    if (model.get("groups") === groups && groupsOf.length === buttons.length) return;
    groups = model.get("groups");
    groupsOf = buttons.map(() => []);
    for (const group of groups) {
      if (group.length < 2) continue;
      for (const k of group) if (groupsOf[k]) groupsOf[k].push(group);
    }
  }

  function outline(k) {
    for (const b of lit) b.classList.remove("tirx-hov");
    lit = [];
    for (const group of (k === null ? [] : groupsOf[k]) || []) {
      for (const j of group) {
        const b = buttons[j];
        if (b && !b.classList.contains("tirx-hov")) {
          b.classList.add("tirx-hov");
          lit.push(b);
        }
      }
    }
  }

  function update() {
    setFrame();
    setCells();
    setGroups();
  }

  const owner = (e) => {
    const b = e.target.closest && e.target.closest("button");
    return b && b.parentNode === cells ? b : null;
  };
  // A press stays with the grid: JupyterLab would otherwise activate and focus the notebook
  // cell around the output, restyling the whole notebook; the click goes on to the button.
  cells.addEventListener("mousedown", (e) => {
    if (e.button === 0 && owner(e)) {
      e.stopPropagation();
      e.preventDefault();
    }
  });
  cells.addEventListener("click", (e) => {
    const b = owner(e);
    if (!b) return;
    if (tab !== b._k && buttons[tab]) buttons[tab].tabIndex = -1;
    tab = b._k;
    b.tabIndex = 0;
    model.send({ click: b._k });
  });
  cells.addEventListener("mouseover", (e) => {
    const b = owner(e);
    if (b) outline(b._k);
  });
  cells.addEventListener("mouseleave", () => outline(null));
  cells.addEventListener("focusin", (e) => {
    const b = owner(e);
    if (b) outline(b._k);
  });
  cells.addEventListener("focusout", () => outline(null));
  cells.addEventListener("keydown", (e) => {
    const b = owner(e);
    if (!b) return;
    const across = model.get("ncols") || 1;
    const step = { ArrowLeft: -1, ArrowRight: 1, ArrowUp: -across, ArrowDown: across }[e.key];
    if (step === undefined) return; // Enter and Space click the button itself
    const next = buttons[b._k + step];
    e.preventDefault();
    e.stopPropagation(); // the notebook's own arrow keys move between notebook cells
    if (!next) return;
    b.tabIndex = -1;
    next.tabIndex = 0;
    tab = next._k;
    next.focus();
  });

  update();
  model.on("change", update);
  return () => model.off("change", update);
}

export default { render };
