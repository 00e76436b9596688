"""The commands' --plot PNGs, drawn with pyplot and written by `records.save_figure`
(atomically, with the user's umask): `train`'s epochs, `profile`'s step breakdown, and
`bench footprint`'s and `bench memory`'s trade-offs. The commands check the output path
before any work and call these with it. matplotlib (and, for the breakdown's operator
names, `experiments.step_time.describe_op`) is imported inside the functions, so importing
this module loads neither matplotlib nor MXNet.
"""
from ..records import save_figure


def plot_epochs(results, path):
    """Test top-1 accuracy and training images/s per epoch, one above the other."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator
    epochs = [r.metrics["epoch"] for r in results]
    fig, (acc, speed) = plt.subplots(2, 1, sharex=True, figsize=(6, 5))
    acc.plot(epochs, [r.metrics["test_top1"] for r in results], "o-", label="test top-1")
    acc.plot(epochs, [r.metrics["train_top1"] for r in results], "s--", label="train top-1")
    acc.set_ylabel("accuracy")
    acc.legend()
    speed.plot(epochs, [r.metrics["train_images_per_s"] for r in results], "o-")
    speed.set_ylabel("training images/s")
    speed.set_xlabel("epoch")
    speed.xaxis.set_major_locator(MaxNLocator(integer=True))
    first = results[0].metrics
    fig.suptitle("%s on %s, %s" % (first["model"], first["dataset"], first["contexts"]))
    fig.tight_layout()
    save_figure(fig, path)


def plot_step_breakdown(breakdown, operators, peak, path, title):
    """The fenced step's parts as a stacked bar (the unfenced step beside it); the top
    operators' achieved GFLOP/s against the ceiling."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    parts = [r for r in breakdown if r.name not in ("fenced step", "unfenced step", "hidden by overlap")]
    unfenced = next(r for r in breakdown if r.name == "unfenced step")
    rated = [r for r in operators if r.metrics.get("gflop_per_s")][:8]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 7), gridspec_kw={"height_ratios": [1, 1.6]})
    left = 0.0
    for r in parts:
        ms = max(0.0, r.metrics["time_s"]) * 1e3
        top.barh(1, ms, left=left, label="%s %.0f%%" % (r.metrics["part"], 100 * r.metrics["share"]))
        left += ms
    top.barh(0, unfenced.metrics["time_s"] * 1e3, color="black", alpha=0.35)
    top.set_yticks([0, 1])
    top.set_yticklabels(["unfenced step\n(as gluonperf.train)", "fenced step"])
    top.set_xlabel("ms per step (run 1: no profiler)")
    top.legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.35))
    from ..experiments.step_time import describe_op
    names = [describe_op(r.name) for r in rated]
    bottom.barh(range(len(rated)), [r.metrics["gflop_per_s"] for r in rated])
    bottom.axvline(peak / 1e9, color="red", linestyle="--", label="ceiling %.0f GFLOP/s" % (peak / 1e9))
    bottom.set_yticks(range(len(rated)))
    bottom.set_yticklabels(["%s, %.0f%% of step" % (n, 100 * r.metrics["share"]) for n, r in zip(names, rated)],
                           fontsize=8)
    bottom.invert_yaxis()
    bottom.set_xlabel("achieved GFLOP/s of the operators with a FLOP count (run 2: profiled)")
    bottom.legend(fontsize=8, loc="lower right")
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    save_figure(fig, path)


def plot_footprint(results, path, title=None):
    """Memory the step needs (model + peak above it) and images/s against the batch size,
    one line per configuration; budgets as horizontal lines."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    runs = [r for r in results if r.bench == "footprint" and "error" not in r.metrics]
    budgets = {r.metrics["budget_bytes"] for r in results
               if r.bench == "footprint-budget" and "budget_bytes" in r.metrics}
    names = list(dict.fromkeys(r.name for r in runs))
    fig, (mem, speed) = plt.subplots(2, 1, sharex=True, figsize=(6.4, 6))
    for name in names:
        rs = sorted((r for r in runs if r.name == name), key=lambda r: r.metrics["batch_size"])
        bs = [r.metrics["batch_size"] for r in rs]
        line, = mem.plot(bs, [r.metrics["needs_bytes"] / 2 ** 20 for r in rs], "o-", label=name)
        speed.plot(bs, [r.metrics["images_per_s"] for r in rs], "o-", color=line.get_color(), label=name)
    for b in sorted(budgets):
        mem.axhline(b / 2 ** 20, color="grey", linestyle="--", linewidth=1)
        mem.annotate("budget %.0f MiB" % (b / 2 ** 20), (0.01, b / 2 ** 20), xycoords=("axes fraction", "data"),
                     va="bottom", fontsize=8, color="grey")
    mem.set_ylabel("model + peak of the step (MiB)")
    mem.set_ylim(bottom=0)
    mem.legend(fontsize=8)
    mem.grid(True, alpha=0.3)
    speed.set_ylabel("images/s")
    speed.set_xlabel("batch size")
    speed.set_ylim(bottom=0)
    speed.grid(True, alpha=0.3)
    if runs:
        first = runs[0].metrics
        fig.suptitle(title or "%s training step on %s" % (first["model"], first["contexts"]))
    fig.tight_layout()
    save_figure(fig, path)


def plot_memory_tradeoff(results, path, title=None):
    """The trade-off as a curve over the sync interval (every 1, k, ..., never): peak RSS
    growth during the loop (left axis) and the loop's time (right axis)."""
    results = [r for r in results if "error" not in r.metrics]
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    labels = [r.name.replace("sync every batch", "every 1").replace("sync ", "") for r in results]
    xs = range(len(results))
    growth = [r.metrics["rss_growth_bytes"] / 2 ** 20 for r in results]
    times = [r.metrics["seconds_s"] for r in results]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    ax.plot(xs, growth, "o-", color="tab:red", label="peak RSS growth")
    ax.set_ylabel("peak RSS above start of loop (MiB)", color="tab:red")
    ax.set_ylim(bottom=0)
    other = ax.twinx()
    other.plot(xs, times, "s--", color="tab:blue", label="time")
    other.set_ylabel("time for the loop (s)", color="tab:blue")
    other.set_ylim(bottom=0)
    ax.set_xticks(list(xs))
    ax.set_xticklabels(labels)
    ax.set_xlabel("l.mean().asscalar() called ...")
    ax.set_title(title or "memory cost of running ahead")
    ax.grid(True, alpha=0.3)
    fig.tight_layout()
    save_figure(fig, path)
