"""How a view reaches the notebook so that it reads everywhere: live, after a kernel restart,
after a reload, untrusted, on GitHub and nbviewer.

Displaying a view makes two outputs:

1. the *static* one: ``text/plain`` (the text table), ``image/png`` (the picture) and
   ``text/html``, which is written to survive sanitizing. JupyterLab does not trust a notebook
   it did not run (a fresh clone): it strips ``<svg>``, ``<style>`` and scripts from HTML
   but keeps their text, which turned pictures into runs of digits. So the SVG sits in an
   element with the ``hidden`` attribute, which a ``<style>`` of the same output reveals,
   beside a *still*: the text table as a ``<pre>`` whose cells carry their colours as inline
   styles, which the same style hides. Trusted (and in nbviewer or exported HTML), the SVG
   shows, with its hover; untrusted, the coloured table;
2. the *live* one: the widget (``application/vnd.jupyter.widget-view+json``, with an empty
   text so that an untrusted notebook shows nothing for it).

The style of the static output shows exactly one of the two in JupyterLab: the widget while
its model is alive, the static picture otherwise: before the widget has rendered, after a
kernel restart (ipywidgets marks every view of the old kernel ``jupyter-widgets-disconnected``)
and after a reload with no kernel behind the widget ("model not found").
"""

from __future__ import annotations

import base64
import html
import itertools

__all__ = ["STILL_STYLE", "static_bundle", "live_bundle", "show", "coloured_text", "still"]

_ids = itertools.count()
WIDGET = "application/vnd.jupyter.widget-view+json"
_OUT = ".jp-OutputArea-child"
# an output's own rendered element and what it holds, one level each: JupyterLab's output
# area puts the HTML's outer element, or the widget's view, right under it. The selectors name
# those levels (no search of a whole output's subtree), so the browser checks them cheaply
# whenever anything in the notebook changes
_STATIC = "> .jp-OutputArea-output > .tirx-static"
_LIVE = "> .jp-OutputArea-output > .tirx-live:not(.jupyter-widgets-disconnected)"
STILL_STYLE = (
    "<style>"
    ".tirx-static > .tirx-svg[hidden]{display:block!important}"
    ".tirx-static > .tirx-still{display:none}"
    # in JupyterLab: the static output gives way to a live widget after it...
    f"{_OUT}:has({_STATIC}):has(+ {_OUT} {_LIVE}){{display:none}}"
    # ...and a widget that is not live (loading, disconnected, model not found) to it
    f"{_OUT}:has({_STATIC}) + {_OUT}:not(:has({_LIVE})){{display:none}}"
    "</style>"
)


def coloured_text(title: str, head: list[str], rows: list[tuple[str, list]], foot=()) -> str:
    """A ``<pre>`` table that survives sanitizing: ``rows`` of (label, cells), each cell
    ``(text, fill, ink)`` drawn as a span with an inline background and colour."""
    width = max([len(t) for _, cells in rows for t, _, _ in cells] + [len(h) for h in head] + [1])
    left = max([len(label) for label, _ in rows] + [1])
    e = html.escape
    lines = [f"<b>{e(title)}</b>"] if title else []
    lines.append(" " * (left + 1) + "".join(f"{h:>{width + 1}}" for h in head))
    for label, cells in rows:
        spans = "".join(
            f' <span style="background-color:{fill};color:{ink}">{e(f"{t:>{width}}")}</span>'
            for t, fill, ink in cells
        )
        lines.append(f"{e(f'{label:>{left}}')}{spans}")
    lines += [e(f) for f in foot]
    return (
        '<pre class="tirx-still" style="font-size:11px;line-height:1.45;white-space:pre;'
        f'overflow-x:auto;color:#111111;background-color:#ffffff">{chr(10).join(lines)}</pre>'
    )


def still(view) -> str:
    """The view's still: its own coloured table if it draws one, else its text."""
    own = getattr(view, "still", None)
    if callable(own):
        return own()
    return (
        '<pre class="tirx-still" style="font-size:11px;white-space:pre;overflow-x:auto">'
        f"{html.escape(str(view))}</pre>"
    )


def static_html(view) -> str:
    """The static picture as sanitize-proof HTML (see the module docstring)."""
    return (
        f'<div class="tirx-static">{STILL_STYLE}'
        f'<div class="tirx-svg" hidden="hidden">{view._repr_html_()}</div>{still(view)}</div>'
    )


def static_bundle(view) -> dict:
    """text/plain, text/html (sanitize-proof) and image/png of ``view``."""
    out = {"text/plain": str(view), "text/html": static_html(view)}
    figure = getattr(view, "figure", None)
    if callable(figure):
        try:
            out["image/png"] = base64.b64encode(small_png(figure())).decode("ascii")
        except Exception:  # noqa: BLE001 - the picture is a bonus to the text and the HTML
            pass
    return out


def small_png(fig) -> bytes:
    """``fig`` as a PNG of one pixel per SVG pixel with a palette of 256 colours: a picture
    of flat colours loses nothing to the palette, and a notebook stays small."""
    import io

    from PIL import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=100)
    image = Image.open(io.BytesIO(buf.getvalue())).convert("RGB")
    out = io.BytesIO()
    image.quantize(256, method=Image.Quantize.MEDIANCUT).save(out, format="PNG", optimize=True)
    return out.getvalue()


def live_bundle(widget) -> dict:
    """The widget's own bundle, marked live, with an empty text (nothing for a front end
    that cannot show widgets)."""
    widget.add_class("tirx-live")
    out = dict(widget._repr_mimebundle_() or {})
    out["text/plain"] = ""
    return out


def show(view) -> None:
    """Display ``view`` as its static output followed by its live one."""
    from IPython.display import display

    display(static_bundle(view), raw=True)
    display(live_bundle(view.widget), raw=True)


def bundle(view, include=None, exclude=None) -> dict:
    """All faces in one bundle, for a caller that asks for one (the widget, the HTML with
    the SVG and the still, the PNG, the text)."""
    out = static_bundle(view)
    widget = dict(view.widget._repr_mimebundle_(include=include, exclude=exclude) or {})
    if WIDGET in widget:
        out[WIDGET] = widget[WIDGET]
    return out
