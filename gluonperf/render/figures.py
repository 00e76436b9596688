"""Plots for the report: matplotlib figures drawn without pyplot and inlined in the page as
SVG, and the bar and line charts that several kinds of records share. Nothing here imports MXNet.
"""
import io
import itertools
import re


_FIGURES = itertools.count()


def figure(rows=1, cols=1, width=7.0, height=3.0, **kwargs):
    from matplotlib.figure import Figure  # no pyplot: no backend or global state needed
    fig = Figure(figsize=(width, height))
    return fig, fig.subplots(rows, cols, squeeze=False, **kwargs)


def svg(fig):
    """The figure as an <svg> element to inline in HTML: text kept as text, ids unique per
    figure (several SVGs share one document), no XML prologue or metadata."""
    import matplotlib
    buf = io.StringIO()
    with matplotlib.rc_context({"svg.fonttype": "none", "svg.hashsalt": "gp%d" % next(_FIGURES)}):
        fig.tight_layout()
        fig.savefig(buf, format="svg", bbox_inches="tight")  # keeps annotations past the axes
    text = buf.getvalue()
    text = text[text.index("<svg"):]
    return re.sub(r"<metadata>.*?</metadata>\s*", "", text, flags=re.S)


def short_number(value, digits=3):
    """A ratio or a plain number for a sentence: 3 significant digits, never 1e+03."""
    if value is None:
        return "-"
    return "%.0f" % value if abs(value) >= 10 ** digits else "%.*g" % (digits, value)


def labelled_bars(ax, labels, values, err=None, xlabel="", log=False, annotate=short_number, color="tab:blue"):
    """Horizontal bars, first label on top, each annotated with its value past its error bar."""
    ys = list(range(len(labels)))[::-1]
    ax.barh(ys, values, xerr=err, color=color, alpha=0.85, capsize=3)
    ax.set_yticks(ys)
    ax.set_yticklabels([l if len(l) <= 60 else l[:57] + "..." for l in labels])
    ax.set_xlabel(xlabel)
    if log:
        ax.set_xscale("log")
    for i, (y, v) in enumerate(zip(ys, values)):
        if annotate and v is not None:
            end = v + (err[1][i] if err is not None else 0) if v >= 0 else v
            ax.annotate(annotate(v), (end, y), xytext=(4, 0), textcoords="offset points", va="center", fontsize=8)
    ax.grid(True, axis="x", alpha=0.3)


def time_bars(records, extra=()):
    fig, ax = figure(width=8.0, height=0.45 * (len(records) + len(extra)) + 1.2)
    labels = [r.name for r in records] + [label for label, _ in extra]
    values = [r.metrics["median_s"] * 1e3 for r in records] + [v * 1e3 for _, v in extra]
    labelled_bars(ax[0][0], labels, values, xlabel="ms (median of the repeats)")
    return svg(fig)


def per_epoch(records, accuracy, rate, rate_label):
    epochs = [r.metrics["epoch"] for r in records]
    fig, ax = figure(1, 2, width=8.5, height=2.8)
    for key, style in accuracy:
        ax[0][0].plot(epochs, [r.metrics.get(key) for r in records], style, label=key)
    ax[0][0].set_ylabel("accuracy")
    ax[0][0].set_ylim(0, 1.02)
    ax[0][0].legend(fontsize=8)
    ax[0][1].plot(epochs, [r.metrics[rate] for r in records], "o-", color="tab:green")
    ax[0][1].set_ylabel(rate_label)
    ax[0][1].set_ylim(bottom=0)
    for a in ax[0]:
        a.set_xlabel("epoch")
        a.set_xticks(epochs)
        a.grid(True, alpha=0.3)
    return svg(fig)


def error_bars(records, key):
    """Error bars [[below], [above]] of `key` from each record's interval (or old min..max);
    0 where a record has neither or its interval is unbounded."""
    below, above = [], []
    for r in records:
        m = r.metrics
        v = m[key]
        lo, hi = m.get(key + "_ci_low", m.get(key + "_min")), m.get(key + "_ci_high", m.get(key + "_max"))
        ok = lo is not None and hi is not None and hi < float("inf")
        below.append(max(v - lo, 0) if ok else 0)
        above.append(max(hi - v, 0) if ok else 0)
    return [below, above]
