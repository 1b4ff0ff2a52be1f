"""`--output-format html`: one self-contained page for a person to look at (`--runtime` and
`cglint trace`): a row per custom gradient checked (verdict, reference, worst relative error per
input and variable, modes, dtypes, inputs, seed), the static findings with their own verdicts, and
for each mismatch two plots drawn with matplotlib and embedded as base64 PNG: the custom gradient
and autodiff along a line through the checked input, and the error per element there. Without
matplotlib the page has the tables and one line saying so.

Everything that comes from the user's code or the command (paths, names, messages, TensorFlow's
text) goes through `html.escape`; the page loads nothing (no scripts, no external URLs)."""

from __future__ import annotations

import base64
import io
from html import escape

from cglint.gradcheck.report import describe

# The two curves' colours: the test reads them back from the rendered PNG.
CUSTOM_COLOUR = "#d62728"  # red
AUTODIFF_COLOUR = "#1f77b4"  # blue
NO_MATPLOTLIB = ("Plots need matplotlib, which is not installed (pip install matplotlib, or cglint's "
                 "`report` extra): this report has the tables only.")

ERROR_MEASURE = (
    "Relative error, the one measure every view of cglint uses (\u201coff by N%\u201d): for each input "
    "and each variable, \u2016c \u2212 a\u2016 / \u2016a\u2016, where c is the custom gradient\u2019s "
    "vector-Jacobian product and a the reference\u2019s (autodiff of the undecorated forward, unless the "
    "reference column says otherwise), for the same seeded random upstream gradient at the inputs shown; "
    "the largest over the upstream probes.")

_STYLE = """
body{font-family:system-ui,sans-serif;margin:1.5em;color:#222;max-width:80em}
table{border-collapse:collapse;margin:.5em 0 1.5em}
th,td{border:1px solid #ccc;padding:.3em .5em;text-align:left;vertical-align:top;font-size:.92em}
th{background:#f3f3f3}
code,.mono{font-family:ui-monospace,monospace;font-size:.95em}
.verdict{font-weight:bold}
.v-mismatch,.v-error{color:#b00020}.v-match{color:#1b7f3b}.v-intentional{color:#555}.v-skipped{color:#8a6d00}
.note{background:#fff8e0;border:1px solid #e6d38a;padding:.4em .6em}
section.function{border-top:1px solid #ddd;margin-top:1em;padding-top:.5em}
figure{display:inline-block;margin:.5em 1em .5em 0}figcaption{font-size:.85em;color:#444;max-width:36em}
ul.args{margin:0;padding-left:1.2em}
"""


def render(results, context=None) -> str:
    runtime = list((context.runtime if context is not None else None) or [])
    plots = _matplotlib() if any(r.get("sample") for r in runtime) else None  # (a second's import)
    diags = [d for r in results for d in r.diagnostics]
    owner = _owners(runtime, diags)
    out = ["<!DOCTYPE html>", '<html lang="en"><head><meta charset="utf-8">',
           "<title>cglint report</title>", f"<style>{_STYLE}</style></head><body>",
           "<h1>cglint report</h1>", f'<p id="summary">{escape(_summary(runtime, diags))}</p>']
    if plots is None and any(r.get("sample") for r in runtime):
        out.append(f'<p class="note" id="no-plots">{escape(NO_MATPLOTLIB)}</p>')
    if runtime:
        out += ["<h2>Custom gradients</h2>", '<table id="gradients"><thead><tr>',
                *(f"<th>{h}</th>" for h in ("function", "location", "verdict", "reference",
                                            "worst relative error per input and variable", "modes",
                                            "dtype", "inputs", "seed")),
                "</tr></thead><tbody>"]
        out += [_row(i, r) for i, r in enumerate(runtime)]
        out += ["</tbody></table>", f'<p class="measure">{escape(ERROR_MEASURE)}</p>']
    if diags:
        out += ["<h2>Findings</h2>", '<table id="findings"><thead><tr><th>location</th><th>code</th>'
                "<th>finding</th><th>runtime verdict</th></tr></thead><tbody>"]
        out += [_finding_row(d) for d in diags]
        out.append("</tbody></table>")
    for i, r in enumerate(runtime):
        out.append(_section(i, r, [d for d in diags if owner.get(id(d)) == i], plots))
    out.append("</body></html>\n")
    return "\n".join(out)


# ------------------------------------------------------------------ tables

def _summary(runtime: list[dict], diags: list) -> str:
    counts: dict[str, int] = {}
    for r in runtime:
        counts[r.get("verdict") or "?"] = counts.get(r.get("verdict") or "?", 0) + 1
    checked = ", ".join(f"{n} {v}" for v, n in sorted(counts.items()))
    n = len(runtime)
    head = f"{n} custom gradient{'s' if n != 1 else ''} checked" + (f": {checked}" if checked else "")
    return f"{head}; {len(diags)} static finding{'s' if len(diags) != 1 else ''}."


def _where(r: dict) -> str:
    cell = f"cell {r['cell']}:" if r.get("cell") is not None else ""
    return f"{r.get('path', '')}:{cell}{r.get('line', '')}"


def _verdict(v: str | None) -> str:
    v = v or "?"
    return f'<span class="verdict v-{escape(v, quote=True)}">{escape(v)}</span>'


def _pct(x) -> str:
    if x is None:
        return "unbounded or not measured"
    from cglint.gradcheck.verdict import pct  # the one "off by N%" (pure: NumPy, no TensorFlow)

    return f"{pct(x)} ({x:.3g})"


def _args(r: dict) -> str:
    items = []
    for a in r.get("args") or []:
        shape = "\u00d7".join(str(s) for s in a.get("shape") or []) or "scalar"
        what = f"{a.get('kind', '')}, {a.get('dtype', '')}, {shape}"
        items.append(f'<li data-arg="{escape(str(a.get("name", "")), quote=True)}"><code>{escape(str(a.get("name", "")))}'
                     f"</code> ({escape(what)}): {escape(_pct(a.get('max_rel_error')))} {_verdict(a.get('verdict'))}</li>")
    return f'<ul class="args">{"".join(items)}</ul>' if items else "\u2014"


def _row(i: int, r: dict) -> str:
    modes = ", ".join(f"{k}: {v}" for k, v in (r.get("modes") or {}).items()) or "\u2014"
    dtypes = ", ".join(dict.fromkeys(str(a.get("dtype")) for a in r.get("args") or [] if a.get("dtype"))) or "\u2014"
    inputs = r.get("inputs") or r.get("checked") or "\u2014"  # the spec, or how `cglint trace` checked it
    cells = [f'<a href="#fn-{i}"><code>{escape(str(r.get("function", "")))}</code></a>',
             f'<code>{escape(_where(r))}</code>', _verdict(r.get("verdict")),
             escape(str(r.get("reference") or "\u2014")), _args(r), escape(modes), escape(dtypes),
             escape(str(inputs)), escape(str(r.get("seed", "\u2014") if r.get("seed") is not None else "\u2014"))]
    v = escape(str(r.get("verdict")), quote=True)
    return f'<tr class="gradient" data-verdict="{v}">' + "".join(f"<td>{c}</td>" for c in cells) + "</tr>"


def _finding_row(d) -> str:
    said = describe(d.runtime) if d.runtime is not None else "\u2014"
    v = escape(str(d.runtime.get("verdict")) if d.runtime is not None else "none", quote=True)
    return (f'<tr class="finding" data-code="{escape(d.code, quote=True)}" data-verdict="{v}">'
            f"<td><code>{escape(d.location)}</code></td><td>{escape(d.code)}</td><td>{escape(d.title)}</td>"
            f'<td class="runtime">{escape(said)}</td></tr>')


def _owners(runtime: list[dict], diags: list) -> dict[int, int]:
    """Each finding's function: the checked function of its file (and cell) whose def line is
    the last one at or before the finding's line."""
    out = {}
    for d in diags:
        best = None
        for i, r in enumerate(runtime):
            if r.get("path") != d.path or r.get("cell") != d.cell or (r.get("line") or 0) > d.line:
                continue
            if best is None or runtime[best].get("line", 0) <= r.get("line", 0):
                best = i
        if best is not None:
            out[id(d)] = best
    return out


# ------------------------------------------------------------------ per function

def _section(i: int, r: dict, diags: list, plots) -> str:
    name = escape(str(r.get("function", "")))
    out = [f'<section class="function" id="fn-{i}" data-verdict="{escape(str(r.get("verdict")), quote=True)}">',
           f"<h3><code>{name}</code> at <code>{escape(_where(r))}</code>: {_verdict(r.get('verdict'))}</h3>",
           f'<p class="detail">{escape(str(r.get("detail") or ""))}</p>']
    if r.get("checked"):
        out.append(f"<p>{escape(str(r['checked']))}</p>")
    if diags:
        out.append('<ul class="findings">')
        out += [f'<li data-code="{escape(d.code, quote=True)}"><code>{escape(d.location)}</code> {escape(d.code)} '
                f"{escape(d.title)} \u2014 <em>{escape(describe(d.runtime) if d.runtime is not None else 'no runtime verdict')}</em></li>"
                for d in diags]
        out.append("</ul>")
    sample = r.get("sample")
    if r.get("verdict") == "mismatch":
        if not sample:
            out.append("<p>No plot: the check could not take a line sample for this mismatch "
                       "(no autodiff reference, or not a real floating-point argument).</p>")
        elif plots is not None:
            out += _figures(sample, plots)
    out.append("</section>")
    return "\n".join(out)


def _matplotlib():
    """matplotlib's `Figure` (no pyplot: no global backend or state), or None when missing."""
    try:
        from matplotlib.figure import Figure
    except ImportError:
        return None
    return Figure


def _mpl_text(s: str) -> str:
    return s.replace("$", r"\$")  # matplotlib reads $...$ as mathematics


def _png(fig) -> str:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=96)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def _nan(values) -> list[float]:
    return [float("nan") if v is None else float(v) for v in values]


def _figures(sample: dict, Figure) -> list[str]:
    import math

    arg = str(sample.get("arg", "?"))
    what = f"d/{arg}" if sample.get("kind") == "input" else f"d/{arg} (variable)"
    t, custom, auto = (_nan(sample.get(k) or []) for k in ("t", "custom", "autodiff"))
    fig = Figure(figsize=(6.4, 3.6))
    ax = fig.add_subplot()
    ax.plot(t, auto, color=AUTODIFF_COLOUR, linewidth=2.5, label="autodiff (reference)")
    ax.plot(t, custom, color=CUSTOM_COLOUR, linewidth=2, linestyle=(0, (6, 3)), label="custom gradient")
    ax.axvline(0.0, color="#888", linewidth=0.8)
    finite = sorted(v for v in custom + auto if math.isfinite(v))
    if len(finite) > 10:  # a pole of one curve must not flatten the other: clip to the bulk
        lo, hi = finite[len(finite) // 50], finite[-1 - len(finite) // 50]
        pad = 0.15 * (hi - lo or abs(hi) or 1.0)
        ax.set_ylim(lo - pad, hi + pad)
    ax.set_xlabel("t: step along the line (t = 0 is the checked input)")
    ax.set_ylabel(_mpl_text(f"<{what}, direction>"))
    ax.set_title(_mpl_text(f"{what} along a line through the checked input"), fontsize=10)
    ax.legend(loc="best", fontsize=9)
    fig.tight_layout()
    line = _png(fig)

    el = sample.get("elements") or {}
    c, a = _nan(el.get("custom") or []), _nan(el.get("autodiff") or [])
    err = [abs(x - y) for x, y in zip(c, a)]
    fig = Figure(figsize=(6.4, 3.0))
    ax = fig.add_subplot()
    ax.bar(range(len(err)), [e if math.isfinite(e) else 0.0 for e in err], color="#ff7f0e", width=0.8)
    shown = f"first {len(err)} of {el.get('total')}" if el.get("total", len(err)) > len(err) else f"all {len(err)}"
    ax.set_xlabel(f"element (flattened, {shown})")
    ax.set_ylabel("|custom \u2212 autodiff|")
    ax.set_title(_mpl_text(f"error per element of {what} at the checked input"), fontsize=10)
    fig.tight_layout()
    elements = _png(fig)

    alt_line = (f"custom gradient (red, dashed) and autodiff (blue) of {what} along a line through the "
                f"checked input")
    alt_el = f"absolute error per element of {what} at the checked input"
    cap = (f"The line: x0 + t\u00b7d with d where the two differ at x0 (largest entry 1); each curve is the "
           f"gradient projected on d for the check's first upstream gradient (seed {sample.get('seed')}, "
           f"{sample.get('mode', 'eager')}, {sample.get('dtype')}). Autodiff's curve is the slope of the forward "
           f"along the line.")
    return [f'<figure class="plot line"><img src="data:image/png;base64,{line}" alt="{escape(alt_line, quote=True)}">'
            f"<figcaption>{escape(cap)}</figcaption></figure>",
            f'<figure class="plot elements"><img src="data:image/png;base64,{elements}" '
            f'alt="{escape(alt_el, quote=True)}"><figcaption>{escape(alt_el)}.</figcaption></figure>']
