"""The report's profiling plots (collectives, latency, p2p, compute, memory, ring steps and
per-iteration variance), drawn from results.py's frames.

Rules every plot here keeps: one panel per operation (small multiples) rather than many
series in one panel; a series keeps its colour in every panel and every plot (series_colour);
byte axes in B/KiB/MiB/GiB and rates and times in engineering notation (matplotlib formatters);
one-rank groups are never drawn (they measure no link). Each function raises plots.NoData
when its frame has nothing to draw.
"""
import os

import matplotlib
import matplotlib.patches
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter  # noqa: E402

from . import fmt, outfile  # noqa: E402
from . import steps as ring_steps  # noqa: E402
from .plots import NoData, legend_entries, series_colour, yerr  # noqa: E402


def bytes_axis(ax, sizes):
    """Log2 message-size axis with B/KiB/MiB/GiB ticks, at most ~8 labels."""
    ax.set_xscale("log", base=2)
    lo, hi = np.log2(max(min(sizes), 1)), np.log2(max(max(sizes), 2))
    step = max(1, int(np.ceil((hi - lo) / 8)))
    step += step % 2 if step > 1 else 0  # even powers of two: 1 KiB, 4 KiB, ... read better
    ticks = [2.0**e for e in range(int(np.floor(lo)), int(np.ceil(hi)) + 1, step)]
    ax.set_xticks(ticks)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _pos: fmt.size(x)))
    ax.xaxis.set_minor_formatter(NullFormatter())
    ax.tick_params(axis="x", labelrotation=45, labelsize=7)
    ax.set_xlabel("message size (bytes)")


def eng_axis(ax, unit, log=True):
    """Engineering-notation ticks (10 GB/s, 200 ns); log: 1-2-5 ticks under two decades."""
    if log:
        ax.set_yscale("log")
        lo, hi = ax.get_ylim()
        # under two decades, 1-2-5 ticks: a panel needs at least two labels to be read
        subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-300) < 100 else (1.0,)
        ax.yaxis.set_major_locator(LogLocator(base=10, subs=subs, numticks=12))
    ax.yaxis.set_major_formatter(EngFormatter(unit=unit, places=0))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _save(fig, out_dir, name, note=None):
    if note:
        fig.text(0.01, 0.005, note, fontsize=7, color="#444444", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.03 if note else 0, 1, 1))
    path = os.path.join(out_dir, name)
    outfile.save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _grid(n, width=4.6, height=3.4, ncols=None):
    ncols = ncols or min(n, 4)
    nrows = -(-n // ncols)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, height * nrows + 0.6), squeeze=False)
    for ax in axes.ravel()[n:]:
        ax.set_visible(False)
    return fig, axes.ravel()[:n]


def variant_label(row, files):
    """'world float32 out-of-place' (+ the file when several files are drawn)."""
    if not row["dtype"]:  # host_pingpong: one pair, no dtype or variant
        txt = row["group"]
    else:
        txt = f"{row['group']} {row['dtype']} {'in-place' if int(row['in_place']) else 'out-of-place'}"
    return f"{txt} [{row['file']}]" if files > 1 else txt


def _legend_below(fig, axes):
    handles, labels = legend_entries(axes)
    if labels:
        fig.legend([handles[x] for x in labels], labels, loc="lower center", fontsize=7,
                   ncol=min(4, len(labels)), bbox_to_anchor=(0.5, 0.0))
    return len(labels)


def collectives_busbw(cpoints, variants, out_dir):
    """Bus bandwidth against message size, one panel per operation, one line per (group,
    dtype, in-place) variant, with the link peak dashed where known."""
    linked = cpoints[~cpoints["one_rank"] & cpoints["busbw"].notna()] if len(cpoints) else cpoints
    if linked.empty:
        raise NoData("no collectives point with more than one rank in its group")
    ops = list(dict.fromkeys(linked["operation"]))
    fig, axes = _grid(len(ops))
    files = linked["file"].nunique()
    for ax, op in zip(axes, ops):
        sub = linked[linked["operation"] == op]
        for key, g in sub.groupby(["file", "group", "dtype", "in_place"], sort=False):
            g = g.sort_values("size")
            lab = variant_label(dict(zip(["file", "group", "dtype", "in_place"], key)), files)
            # busbw is bytes over time: the slowest rank's iteration quartiles bound it.
            err = yerr(g["busbw"], g["busbw"] * g["time"] / g["t_p75"], g["busbw"] * g["time"] / g["t_p25"])
            ax.errorbar(g["size"], g["busbw"], yerr=err, fmt="o-", ms=3, lw=1.2,
                        elinewidth=0.8, capsize=2, color=series_colour(lab), label=lab)
        peaks = variants[(variants["operation"] == op)]["link_peak"].dropna().unique() if len(variants) else []
        for lp in peaks:
            ax.axhline(lp, color="k", ls="--", lw=1, label="link peak (NVLink, one direction)")
        bytes_axis(ax, list(sub["size"]))
        eng_axis(ax, "B/s")
        ax.set_title(op, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("bus bandwidth, slowest rank (B/s)\nbars: its iterations' 25th-75th percentile",
                       fontsize=8)
    n = _legend_below(fig, axes)
    return _save_legend(fig, out_dir, "bandwidth.png", n)


def _save_legend(fig, out_dir, name, nlabels):
    rows = -(-nlabels // 4)
    fig.tight_layout(rect=(0, (0.1 + 0.16 * rows) / fig.get_figheight(), 1, 1))
    path = os.path.join(out_dir, name)
    outfile.save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


SMALL_MESSAGE = 64 * 1024  # up to here a message's time is mostly latency


def latency_small(cpoints, pingpong, out_dir):
    """Time per operation against message size up to 64 KiB, one panel per operation (and
    host_pingpong's one-way time), the bar from the 25th to the 75th percentile of the slowest
    rank's per-iteration times."""
    panels = []
    if len(cpoints):
        small = cpoints[~cpoints["one_rank"] & (cpoints["size"] <= SMALL_MESSAGE) & cpoints["time"].notna()]
        panels += [(op, small[small["operation"] == op]) for op in dict.fromkeys(small["operation"])]
    if len(pingpong):
        pp = pingpong[pingpong["size"] <= SMALL_MESSAGE].assign(group="ping-pong pair", dtype="", in_place=0)
        if len(pp):
            panels.append(("host_pingpong (one way)", pp))
    if not panels:
        raise NoData(f"no collectives or ping-pong point up to {fmt.size(SMALL_MESSAGE)} with a link")
    fig, axes = _grid(len(panels))
    files = max(p["file"].nunique() for _, p in panels)
    for ax, (title, sub) in zip(axes, panels):
        for key, g in sub.groupby(["file", "group", "dtype", "in_place"], sort=False):
            g = g.sort_values("size")
            lab = variant_label(dict(zip(["file", "group", "dtype", "in_place"], key)), files)
            ax.errorbar(g["size"], g["time"], yerr=yerr(g["time"], g["t_p25"], g["t_p75"]),
                        fmt="o-", ms=3, lw=1.2, capsize=2,
                        color=series_colour(lab), label=lab)
        bytes_axis(ax, list(sub["size"]))
        eng_axis(ax, "s")
        ax.set_title(title, fontsize=10)
        ax.grid(True, which="major", alpha=0.3)
    axes[0].set_ylabel("time per operation, slowest rank (s)")
    n = _legend_below(fig, axes)
    return _save_legend(fig, out_dir, "latency.png", n)


def _eng3(unit):
    """1.23 GB/s, 166 ns: three significant digits with an SI prefix."""
    eng = EngFormatter(unit=unit, sep="\u2009")

    def f(x, _pos=None):
        if not np.isfinite(x):
            return "n/a"  # EngFormatter raises on NaN
        if x == 0:
            return eng(x)
        exp = int(np.floor(np.log10(abs(x)) / 3) * 3)
        exp = max(-15, min(12, exp))
        v = x / 10.0**exp
        return eng(float(f"{v:.3g}") * 10.0**exp)
    return f


def _heat(ax, fig, m, title, unit, cmap):
    """A [sender, receiver] matrix with its value in each cell and integer rank ticks. The
    colour scale starts at zero: pairs 9.6 and 13 GB/s apart must not look like black and white."""
    fmt = _eng3(unit)
    top = np.nanmax(m) if np.isfinite(m).any() else 1.0
    im = ax.imshow(m, cmap=cmap, interpolation="nearest", vmin=0, vmax=top if top > 0 else 1.0)
    n = m.shape[0]
    ticks = np.arange(n) if n <= 16 else np.linspace(0, n - 1, 9).round().astype(int)
    ax.set_xticks(ticks)
    ax.set_yticks(ticks)
    ax.set_xlabel("receiving rank")
    ax.set_ylabel("sending rank")
    ax.set_title(title, fontsize=9)
    if n <= 16:
        for i in range(n):
            for j in range(n):
                txt = "-" if i == j else (fmt(m[i, j]) if np.isfinite(m[i, j]) else "n/a")
                dark = np.isfinite(m[i, j]) and np.dot(im.to_rgba(m[i, j])[:3], (0.299, 0.587, 0.114)) < 0.5
                ax.text(j, i, txt, ha="center", va="center", fontsize=max(5, 9 - n // 3),
                        color="white" if dark else "black")
    bar = fig.colorbar(im, ax=ax, shrink=0.85, label=f"{'bandwidth' if unit == 'B/s' else 'latency'} "
                       f"({unit}; scale from 0)")
    bar.locator = matplotlib.ticker.MaxNLocator(5)
    bar.formatter = EngFormatter(unit=unit, sep="\u2009")  # %g: round ticks stay distinct
    bar.update_ticks()


def p2p_heatmaps(runs, out_dir):
    """Bandwidth and latency matrices of each p2p_matrix sweep (the largest two runs)."""
    from . import reader, results
    found = []
    for run in runs:
        for s in run.sweeps_of_type(reader.P2P_TYPES):
            mats = results.p2p_matrices(s)
            if mats:
                found.append((f"{s.name}, {run.world_size} ranks", s, mats))
    if not found:
        raise NoData("no p2p_matrix sweep with a pair measured")
    found = found[-2:]
    ncols = max(len(m) for *_, m in found)
    fig, axes = plt.subplots(len(found), ncols, figsize=(5.6 * ncols, 4.6 * len(found)), squeeze=False)
    for row, (title, s, mats) in zip(axes, found):
        for ax, (name, m) in zip(row, mats.items()):
            size = s.attrs.get("bandwidth_bytes" if name == "bandwidth" else "latency_bytes", 0)
            what = ("bandwidth (slower rank of the pair)" if name == "bandwidth"
                    else "one-way latency (slower rank)")
            _heat(ax, fig, m, f"{title}\n{what}" + (f", {fmt.size(float(size))} messages" if size else ""),
                  "B/s" if name == "bandwidth" else "s", "viridis" if name == "bandwidth" else "viridis_r")
        for ax in row[len(mats):]:
            ax.set_visible(False)
    return _save(fig, out_dir, "p2p_matrix.png")


def compute_rates(frame, out_dir):
    """GEMM (and attention block) TFLOP/s against size, one panel per dtype, the 25th-75th
    percentile of the per-iteration rate as a bar, the device peak dashed."""
    if frame.empty:
        raise NoData("no compute sweep")
    dtypes = list(dict.fromkeys(frame["dtype"]))
    fig, axes = _grid(len(dtypes), width=4.2)
    for ax, dt in zip(axes, dtypes):
        sub = frame[frame["dtype"] == dt]
        for (op, eng), g in sub.groupby(["operation", "engine"], sort=False):
            g = g.sort_values("size")
            lab = f"{op} ({eng})"
            ax.errorbar(g["size"], g["tflops"], yerr=yerr(g["tflops"], g["r_p25"], g["r_p75"]),
                        fmt="o-", ms=4, capsize=3,
                        color=series_colour(lab), label=lab)
        peak = sub["peak_tflops"].dropna()
        if len(peak):
            ax.axhline(peak.iloc[0], color="k", ls="--", lw=1, label="device peak (dense)")
        ax.set_xscale("log", base=2)
        ax.set_xticks(sorted(sub["size"].unique()))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda x, _p: f"{x:.0f}"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("n (GEMM n x n x n) / rows")
        ax.set_ylim(0, max(sub["r_p75"].max(), sub["tflops"].max(), peak.max() if len(peak) else 0) * 1.12)
        ax.set_title(dt, fontsize=10)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("TFLOP/s (slowest rank)")
    n = _legend_below(fig, axes)
    return _save_legend(fig, out_dir, "compute.png", n)


def memory_rates(frame, out_dir):
    """GB/s per memory kind (bar: slowest rank; whisker: 25th-75th percentile of iterations),
    the peak it is measured against as a black tick (HBM for d2d: the copy's rate is half its
    HBM traffic, so half the HBM peak is drawn)."""
    if frame.empty:
        raise NoData("no memory sweep")
    fig, ax = plt.subplots(figsize=(max(5.5, 1.3 * len(frame) + 2), 4.2))
    x = np.arange(len(frame))
    eng = _eng3("B/s")
    labels = [f"{r.kind}\n{eng(r.bandwidth) if np.isfinite(r.bandwidth) else r.status}"
              + (f"\n{r.pct_of_peak:.0f} % of peak" if np.isfinite(r.pct_of_peak) else "")
              + (f"\n[{r.file}]" if frame["file"].nunique() > 1 else "") for r in frame.itertuples()]
    ax.bar(x, frame["bandwidth"], color=[series_colour(f"memory {k}") for k in frame["kind"]],
           yerr=yerr(frame["bandwidth"], frame["b_p25"], frame["b_p75"]), capsize=4, alpha=0.85)
    drew = False
    for i, r in enumerate(frame.itertuples()):
        if np.isfinite(r.peak):
            shown = r.peak / 2 if r.kind == "d2d" else r.peak
            ax.plot([i - 0.4, i + 0.4], [shown, shown], "k-", lw=2,
                    label=None if drew else "peak (d2d: half the HBM peak, as a copy reads and writes)")
            drew = True
    ax.set_xticks(x)
    ax.set_xticklabels(labels, fontsize=8)
    values = np.concatenate([frame["bandwidth"].to_numpy(), frame["b_p75"].to_numpy(), frame["peak"].to_numpy()])
    values = values[np.isfinite(values) & (values > 0)]
    wide = values.size and values.max() / values.min() > 20  # HBM next to PCIe: a log axis
    if not wide:
        ax.set_ylim(0, values.max() * 1.1 if values.size else 1)
    eng_axis(ax, "B/s", log=bool(wide))
    ax.set_ylabel("bandwidth, slowest rank (B/s)")
    kinds = set(frame["kind"])
    ax.set_title("Memory: " + ", ".join(x for x, want in (("host triad", "triad" in kinds),
                                                          ("device copies", "d2d" in kinds),
                                                          ("host<->device copies", len(kinds - {"triad", "d2d"}) > 0))
                                        if want), fontsize=10)
    ax.grid(True, axis="y", which="major", alpha=0.3)
    if drew:
        ax.legend(fontsize=8)
    note = None if drew else "no peak known for these kinds (host memory, or an unknown GPU: --peaks)"
    return _save(fig, out_dir, "memory_bandwidth.png", note)


RING_STEP_COLOURS = {"compute": "#4c72b0", "exposed wait": "#dd4444"}
MAX_TIMELINE_RANKS = 8
# Steps drawn per panel: a ring of 1,024 ranks has 1,024 steps, whose 16,000 bars per panel
# took minutes to draw and cannot be told apart.
MAX_TIMELINE_STEPS = 64


def _timeline_points(ring, limit=4):
    """The points worth a timeline: measured, with more than one ring step if any has, the
    largest ring size first (that is where waiting shows), then the longest sequence."""
    m = ring[ring["measured"]] if len(ring) else ring
    if m.empty:
        return m
    if (m["ring_size"] > 1).any():  # a ring of one has one step and nothing to wait for
        m = m[m["ring_size"] > 1]
    m = m.sort_values(["ring_size", "seq_len", "total_ms"], ascending=[False, False, False])
    return m.drop_duplicates(["sweep", "file"]).head(limit)


def ring_timeline(runs, ring, out_dir):
    """Per ring step and rank: kernel time (compute) and exposed wait, forward and backward,
    for a few points (_timeline_points). Bars of one step are the ranks left to right."""
    sweeps = {(os.path.basename(r.path), s.name): s for r in runs for s in r.sweeps.values()}
    chosen = [(r, sweeps[(r.file, r.sweep)]) for r in _timeline_points(ring).itertuples()
              if ring_steps.has_steps(sweeps[(r.file, r.sweep)])]
    if not chosen:
        raise NoData("no measured ring attention point with per-step times (step_compute_s)")
    passes = [x for x in (("forward", "step_compute_s", "step_wait_s"),
                          ("backward", "backward_step_compute_s", "backward_step_wait_s"))
              if any(ring_steps.has_steps(s, x[1:]) for _, s in chosen)]
    fig, axes = plt.subplots(len(chosen), len(passes), figsize=(6 * len(passes), 3.2 * len(chosen) + 0.8),
                             squeeze=False)
    sampled = False
    for row_axes, (pt, s) in zip(axes, chosen):
        for ax, (name, cm, wm) in zip(row_axes, passes):
            got = ring_steps.point_steps(s, pt.point, (cm, wm))
            if got is None or cm not in got[1] or wm not in got[1]:  # a file from before backward steps
                ax.set_visible(False)
                continue
            ranks, arrays = got
            sampled = sampled or len(ranks) < pt.ranks
            _timeline_panel(ax, arrays[cm], arrays[wm], ranks)
            ax.set_title(f"{pt.sweep} S={pt.seq_len} R={pt.ring_size} {pt.layout}: {name}", fontsize=9)
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for c in RING_STEP_COLOURS.values()]
    fig.legend(handles, list(RING_STEP_COLOURS), loc="upper right", ncol=2, fontsize=8)
    note = (f"r0, r1, ...: the ranks (the first {MAX_TIMELINE_RANKS} at most"
            + ("; the file keeps a sample of ranks, the slowest first" if sampled else "")
            + "); times are each rank's median over iterations")
    if any(pt.ring_size > MAX_TIMELINE_STEPS for pt, _ in chosen):
        note += f"; the first {MAX_TIMELINE_STEPS} ring steps at most"
    fig.text(0.01, 0.005, note, fontsize=7, color="#444444")
    fig.tight_layout(rect=(0, 0.3 / fig.get_figheight(), 1, 1 - 0.3 / fig.get_figheight()))
    path = os.path.join(out_dir, "ring_timeline.png")
    outfile.save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _timeline_panel(ax, comp, wait, ranks):
    """Bars of each step: the rows' ranks (`ranks`: the world rank of each row; -1 rows, empty
    rows of a sample, left out) left to right."""
    keep = np.flatnonzero(np.asarray(ranks) >= 0)[:MAX_TIMELINE_RANKS]
    names = [int(ranks[i]) for i in keep]
    comp = np.asarray(comp, dtype=float)[keep]
    wait = np.asarray(wait, dtype=float)[keep]
    ranks, steps = comp.shape
    steps = min(MAX_TIMELINE_STEPS, max(1, int(np.max(np.sum(np.isfinite(comp), axis=1)))))
    width = 0.8 / ranks
    scale, unit = (1e3, "ms") if np.nanmax(comp + np.nan_to_num(wait)) >= 1e-3 else (1e6, "us")
    for r in range(ranks):
        x = np.arange(steps) - 0.4 + width * (r + 0.5)
        c, w = np.nan_to_num(comp[r, :steps]) * scale, np.nan_to_num(wait[r, :steps]) * scale
        ax.bar(x, c, width * 0.9, color=RING_STEP_COLOURS["compute"])
        ax.bar(x, w, width * 0.9, bottom=c, color=RING_STEP_COLOURS["exposed wait"])
    ax.margins(y=0.08)
    ax.set_xticks(range(steps))
    if ranks * steps <= 32:  # say which bar is which rank
        xs = [s - 0.4 + width * (r + 0.5) for s in range(steps) for r in range(ranks)]
        ax.set_xticks(xs, [f"r{names[r]}" for _ in range(steps) for r in range(ranks)], minor=True)
        ax.tick_params(axis="x", which="minor", labelsize=6, length=0)
        ax.tick_params(axis="x", which="major", pad=12, length=0)
    ax.set_xticklabels([f"step {s}" for s in range(steps)])
    ax.set_xlabel("ring step (bars: ranks)")
    ax.set_ylabel(f"time ({unit})")
    ax.grid(True, axis="y", alpha=0.3)


MAX_VARIANCE_PANELS = 8


def ring_variance(runs, ring, out_dir):
    """Box plots of the per-iteration total time (slowest rank) of every measured point, one
    panel per ring sweep; the CV above each box, red where it exceeds the limit."""
    from .results import CV_LIMIT, _slowest_samples
    sweeps = {(os.path.basename(r.path), s.name): s for r in runs for s in r.sweeps.values()}
    m = ring[ring["measured"]] if len(ring) else ring
    groups = [(k, g) for k, g in m.groupby(["file", "sweep"], sort=False)] if len(m) else []
    if not groups:
        raise NoData("no measured ring attention point")
    note = ""
    if len(groups) > MAX_VARIANCE_PANELS:  # the sweeps with the most flagged points
        note = (f"; {MAX_VARIANCE_PANELS} of {len(groups)} sweeps, those with the most points above "
                "the CV limit (every CV is in the ring table)")
        groups = sorted(groups, key=lambda kg: -(kg[1]["cv"] > CV_LIMIT).sum())[:MAX_VARIANCE_PANELS]
    fig, axes = _grid(len(groups), width=max(4.5, 0.9 * max(len(g) for _, g in groups) + 1.5),
                      ncols=min(len(groups), 2))
    for ax, ((file, sweep), g) in zip(axes, groups):
        s = sweeps[(file, sweep)]
        data = [_slowest_samples(s.metrics["total_time_s"], p) * 1e3 for p in g["point"]]
        labels = [f"S={r.seq_len}\nR={r.ring_size}\n{r.layout}" for r in g.itertuples()]
        rel = [100 * (d / np.median(d) - 1) if len(d) else d for d in data]
        bp = ax.boxplot(rel, widths=0.6, patch_artist=True, showfliers=True,
                        medianprops={"color": "k"}, flierprops={"markersize": 3})
        for patch, r in zip(bp["boxes"], g.itertuples()):
            patch.set_facecolor("#f4a6a6" if r.cv > CV_LIMIT else "#c6d7ee")
        top = max((float(np.max(d)) for d in rel if len(d)), default=1.0)
        bottom = min((float(np.min(d)) for d in rel if len(d)), default=-1.0)
        span = max(top - bottom, 1.0)
        for i, (r, d) in enumerate(zip(g.itertuples(), data), start=1):
            ax.text(i, top + 0.05 * span, f"{np.median(d):.3g} ms\nCV {100 * r.cv:.1f} %", ha="center",
                    va="bottom", fontsize=7, color="red" if r.cv > CV_LIMIT else "black")
        ax.set_ylim(bottom - 0.05 * span, top + 0.3 * span)
        ax.axhline(0, color="#888888", lw=0.8, ls=":")
        ax.set_xticks(range(1, len(labels) + 1))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("iteration vs the point's median (%)")
        ax.set_title(f"{sweep}" + (f" [{file}]" if m["file"].nunique() > 1 else ""), fontsize=10)
        ax.grid(True, axis="y", alpha=0.3)
    return _save(fig, out_dir, "ring_variance.png",
                 "fwd+bwd time of each iteration of the slowest rank, relative to its median (written "
                 f"above the box); box: quartiles; red: CV above {100 * CV_LIMIT:.0f} %{note}")


MAX_SCHEME_PROBLEMS = 24


def scheme_times(ring, out_dir):
    """Per problem run under several context-parallel schemes (schemes.comparison): each
    scheme's per-GPU TFLOP/s (fwd+bwd), the fastest one's bar outlined, its time over the
    fastest's written above each bar. A failed or oom point has no bar."""
    from . import schemes  # imports fmt only
    table = schemes.comparison(ring)
    if table.empty:
        raise NoData("no sweep ran one problem under two or more schemes (scheme: [ring, allgather, ulysses])")
    keys = list(dict.fromkeys(tuple(getattr(r, k) for k in schemes.SAME_PROBLEM) for r in table.itertuples()))
    keys = keys[:MAX_SCHEME_PROBLEMS]
    names = list(dict.fromkeys(table["scheme"]))
    sweeps = {k[1] for k in keys}
    fig, ax = plt.subplots(figsize=(max(6.0, 1.1 * len(keys) * len(names) / 2 + 2), 4.2))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        for j, key in enumerate(keys):
            row = table[(table["scheme"] == name) & _same(table, key, schemes.SAME_PROBLEM)]
            if row.empty or not np.isfinite(row.iloc[0]["tflops_total"]) or row.iloc[0]["status"] != "ok":
                continue
            r = row.iloc[0]
            x = j + (i - (len(names) - 1) / 2) * width
            ax.bar(x, r["tflops_total"], width, color=series_colour(f"scheme {name}"),
                   edgecolor="black" if r["fastest"] else "none", linewidth=1.5)
            ax.annotate(f"x{r['vs_fastest']:.2f}", (x, r["tflops_total"]), ha="center", va="bottom", fontsize=7)
    labels = [(f"{k[1]}\n" if len(sweeps) > 1 else "") + f"S={k[2]} R={k[3]}\n{k[4]} {k[5]}" for k in keys]
    ax.set_xticks(range(len(keys)))
    ax.set_xticklabels(labels, fontsize=8)
    ax.tick_params(axis="x", which="both", length=0)
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_ylabel("TFLOP/s per GPU (fwd+bwd)")
    # Two lines: on one problem's narrow figure one line ran past both edges.
    ax.set_title("Context-parallel schemes: per-GPU rate\n(outlined: the fastest; xN: time / the fastest's)",
                 fontsize=10)
    ax.yaxis.set_major_formatter(EngFormatter(places=0) if ax.get_ylim()[1] >= 1
                                 else FuncFormatter(lambda v, _p: f"{v:.3g}"))
    ax.grid(True, axis="y", alpha=0.3)
    handles = [matplotlib.patches.Patch(color=series_colour(f"scheme {n}"), label=n) for n in names]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.0, 1.0), title="scheme")
    return _save(fig, out_dir, "schemes.png")


def _same(table, key, columns):
    mask = np.ones(len(table), dtype=bool)
    for c, v in zip(columns, key):
        mask &= (table[c] == v).to_numpy()
    return mask
