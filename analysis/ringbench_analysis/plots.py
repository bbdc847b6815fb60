"""PNG plots of the report (matplotlib, Agg backend: no display needed).

Every function writes one file and returns its path, or returns None (with the reason in
`why`) when the input has nothing to plot. Failed and oom points are drawn as red crosses
on the ring-size axis with their status, so a missing measurement is visible, not hidden.
"""
import os
import re

import matplotlib
import matplotlib.ticker

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import model, outfile  # noqa: E402


class NoData(Exception):
    pass


_PALETTE = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("Dark2").colors)
_COLOURS = {}


def reset_colours():
    """Forget the colour of every series (a new report)."""
    _COLOURS.clear()


def series_colour(label):
    """The same colour for a series in every plot of one report (S=1024 is the same blue in
    the throughput, scaling, exposed-communication and cost-model plots). `label`: any hashable
    name of the series; the ring plots use (kind, configuration, length), which stays the same
    when a plot's legend text gets longer to tell two series apart."""
    if label not in _COLOURS:
        _COLOURS[label] = _PALETTE[len(_COLOURS) % len(_PALETTE)]
    return _COLOURS[label]


def _save(fig, out_dir, name, note=None):
    path = os.path.join(out_dir, name)
    if note:  # a line under the axes: what bars, bands or colours mean
        fig.text(0.01, 0.005, note, fontsize=7, color="#444444", ha="left", va="bottom")
    fig.tight_layout(rect=(0, 0.25 / fig.get_figheight() if note else 0, 1, 1))
    outfile.save_figure(fig, path, dpi=100, bbox_inches="tight")  # with a legend below the figure
    plt.close(fig)
    return path


def _eng_log(ax, unit, binary=False):
    """Log y axis read as 300 ktok/s, 2 ms or 512 MiB (not 3x10^5): 1-2-5 ticks when the data
    span under two decades, labels on the major ticks only."""
    from matplotlib.ticker import EngFormatter, FuncFormatter, LogLocator, NullFormatter
    lo, hi = ax.get_ylim()
    subs = (1.0, 2.0, 5.0) if hi / max(lo, 1e-300) < 100 else (1.0,)
    ax.yaxis.set_major_locator(LogLocator(base=2, numticks=12) if binary
                               else LogLocator(base=10, subs=subs, numticks=12))
    ax.yaxis.set_major_formatter(FuncFormatter(_binary_bytes) if binary else EngFormatter(unit=unit))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _binary_bytes(x, _pos=None):
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if x >= f:
            return f"{x / f:.3g} {unit}"
    return f"{x:.3g} B"


def _ring_axis(ax, sizes):
    sizes = sorted(set(sizes))
    if len(sizes) > 1 and sizes[0] > 0:
        ax.set_xscale("log", base=2)
    ax.set_xticks(sizes)
    ax.set_xticklabels([str(s) for s in sizes])
    ax.set_xlabel("ring size (ranks)")


def _flag_unmeasured(ax, points, ymin_frac=0.02):
    bad = [p for p in points if not p["measured"]]
    if not bad:
        return
    lo, hi = ax.get_ylim()
    y = lo + (hi - lo) * ymin_frac
    for p in bad:
        ax.plot([p["ring_size"]], [y], "x", color="red", markersize=10, mew=2)
        ax.annotate(f"{p['status']} S={p['seq_len']}", (p["ring_size"], y), textcoords="offset points",
                    xytext=(4, 6), color="red", fontsize=7)


MAX_SERIES = 8  # more lines than this in one panel cannot be told apart


def _label(cfg, n_cfg, seq_txt, pts=()):
    """'S=1024', with the configuration when several are drawn: its varying keys, each value
    cut to 20 characters (a policy file's sha256 would fill the legend), and the sweep name
    (series of different sweeps can share their keys); at most ~60 characters."""
    if n_cfg <= 1:
        return seq_txt
    parts = []
    for part in filter(None, re.split(r", (?=[A-Za-z_]\w*=)", cfg)):  # lists hold ", " too
        k, _, v = part.partition("=")
        parts.append(f"{k}={v if len(v) <= 20 else v[:17] + '...'}")
    sweeps = sorted({p["sweep"] for p in pts})
    tail = [f"sweep {sweeps[0]}"] if len(sweeps) == 1 else []
    while parts and len(", ".join(parts + tail)) > 60:  # the longest keys go first: the sweep
        parts.remove(max(parts, key=len))               # name still tells the series apart
    return f"{seq_txt} [{', '.join(parts + tail)}]"


def _labels(keys, n_cfg, text, pts_of=lambda k: ()):
    """{series key: legend label}, every label distinct: _label's short form, and where two
    short forms read the same, the configuration keys that differ between those series added
    (a legend with one text twice cannot be read)."""
    short = {k: _label(k[0], n_cfg, text(k), pts_of(k)) for k in keys}
    groups = {}
    for k, v in short.items():
        groups.setdefault(v, []).append(k)
    out = dict(short)
    for v, same in groups.items():
        if len(same) < 2:
            continue
        parts = {k: _config_parts(k[0]) for k in same}
        common = set.intersection(*(set(x) for x in parts.values()))
        for k in same:
            extra = [_cut(x) for x in parts[k] if x not in common]
            out[k] = f"{v} {{{', '.join(extra)}}}" if extra else v
    return out


def _cut(part, width=24):
    k, _, v = part.partition("=")
    return f"{k}={v if len(v) <= width else v[:width - 3] + '...'}"


SPREAD_NOTE = "bars: 25th-75th percentile of the slowest rank's iterations (over every file that ran the point)"


def time_ranges(points, kind):
    """{(config, seq or tokens per rank, ring size): (lowest, highest) time}: the union of the
    iteration quartiles of every measured point of that place in a series, so a point measured
    by several files (runs) shows the spread between them too."""
    out = {}
    for p in points:
        if not p["measured"] or p.get("time_p25") is None:
            continue
        if kind == "weak" and p["seq_len"] % p["ring_size"]:
            continue
        key = (p["config_label"], p["seq_len"] if kind == "strong" else p["seq_len"] // p["ring_size"],
               p["ring_size"])
        lo, hi = out.get(key, (np.inf, -np.inf))
        out[key] = (min(lo, p["time_p25"], p["time"]), max(hi, p["time_p75"], p["time"]))
    return out


def yerr(values, lows, highs):
    """matplotlib's [below, above] from ranges around each value (0 where unknown)."""
    v = np.asarray(values, dtype=float)
    lo = np.asarray([x if x is not None else np.nan for x in lows], dtype=float)
    hi = np.asarray([x if x is not None else np.nan for x in highs], dtype=float)
    return [np.nan_to_num(np.clip(v - lo, 0, None)), np.nan_to_num(np.clip(hi - v, 0, None))]


def legend_entries(axes):
    """({label: handle}, labels in first-drawn order) over several axes, each label once."""
    handles, labels = {}, []
    for ax in axes:
        for h, lab in zip(*ax.get_legend_handles_labels()):
            if lab not in handles:
                handles[lab] = h
                labels.append(lab)
    return handles, labels


def _legend(fig, axes):
    """In the axes while short; long or many labels (several configurations) go below the
    figure, where they hide no point."""
    handles, labels = legend_entries(axes)
    if len(labels) <= 4 and max((len(x) for x in labels), default=0) <= 50:
        for ax in axes:
            ax.legend(fontsize=7)
        return
    wide = max(len(x) for x in labels) > 70 or len(axes) == 1
    fig.legend([handles[x] for x in labels], labels, fontsize=7, loc="upper center", frameon=False,
               bbox_to_anchor=(0.5, 0.0), ncol=1 if wide else 2)


def _few(series, title):
    """At most MAX_SERIES series (the longest, then the longest sequences), and the title
    saying how many were left out (the report's table has every point)."""
    if len(series) <= MAX_SERIES:
        return series, title
    keep = sorted(series, key=lambda k: (-len(series[k]), -(k[1] or 0), str(k[0])))[:MAX_SERIES]
    return ({k: series[k] for k in keep},
            f"{title}\n({MAX_SERIES} of {len(series)} series: the longest; all in the table)")


def throughput(points, out_dir):
    strong = model.series(points, "strong")
    if not strong:
        raise NoData("no measured ring attention point")
    n_cfg = len({k[0] for k in strong})
    strong, title = _few(strong, "Ring attention throughput (dotted: ideal linear scaling)")
    labels = _labels(strong, n_cfg, lambda k: f"S={k[1]}", lambda k: strong[k])
    ranges = time_ranges(points, "strong")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = []
    for (cfg, seq), pts in sorted(strong.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        r = [p["ring_size"] for p in pts]
        y = [p["throughput"] for p in pts]
        sizes += r
        lab = labels[(cfg, seq)]
        work = [p["throughput"] * p["time"] for p in pts]  # tokens of one iteration
        span = [ranges.get((cfg, seq, ri), (None, None)) for ri in r]
        # the slowest iterations give the lowest throughput
        err = yerr(y, [w / hi if hi else None for w, (_, hi) in zip(work, span)],
                    [w / lo if lo else None for w, (lo, _) in zip(work, span)])
        line = ax.errorbar(r, y, yerr=err, fmt="o-", capsize=3, label=lab,
                           color=series_colour(("S", cfg, seq)))[0]
        if len(r) > 1:  # ideal: throughput grows linearly from the smallest ring size
            ax.plot(r, [y[0] * ri / r[0] for ri in r], ":", color=line.get_color(), alpha=0.6)
    sizes += [p["ring_size"] for p in points]
    _ring_axis(ax, sizes)
    ax.set_yscale("log")
    _eng_log(ax, "tok/s")
    ax.set_ylabel("throughput, whole ring (tokens/s)")
    ax.set_title(title, fontsize=10)
    _flag_unmeasured(ax, points)
    _legend(fig, [ax])
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out_dir, "throughput.png", SPREAD_NOTE)


def _scaling_plot(points, out_dir, kind):
    ser = {k: v for k, v in model.series(points, kind).items() if len(v) >= 2}
    if not ser:
        raise NoData(f"no {kind}-scaling series with at least two ring sizes "
                     f"(run the same {'sequence length' if kind == 'strong' else 'sequence length per rank'} "
                     "at two or more ring sizes)")
    n_cfg = len({k[0] for k in ser})
    title = ("Strong scaling: same global sequence length" if kind == "strong"
             else "Weak scaling: same sequence length per rank")
    ser, title = _few(ser, title)
    labels = _labels(ser, n_cfg, lambda k: f"S={k[1]}" if kind == "strong" else f"S/R={k[1]}",
                     lambda k: ser[k])
    ranges = time_ranges(points, kind)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    sizes = []
    for (cfg, s), pts in sorted(ser.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        sc = model.scaling(pts, kind)
        r = [x[0] for x in sc]
        sizes += r
        txt = labels[(cfg, s)]
        for a, col in ((a1, 1), (a2, 2)):
            y = [x[col] for x in sc]
            # speedup and efficiency scale as 1 / time: the point's slow iterations give the
            # low end (the series' base held at its time)
            span = [ranges.get((cfg, s, ri), (None, None)) for ri in r]
            err = yerr(y, [v * p["time"] / hi if hi else None for v, p, (_, hi) in zip(y, pts, span)],
                        [v * p["time"] / lo if lo else None for v, p, (lo, _) in zip(y, pts, span)])
            a.errorbar(r, y, yerr=err, fmt="o-", capsize=3, label=txt,
                       color=series_colour(("S" if kind == "strong" else "S/R", cfg, s)))
    lo, hi = min(sizes), max(sizes)
    a1.plot([lo, hi], [lo, hi], "k--", label="ideal")
    a2.plot([lo, hi], [1, 1], "k--", label="ideal")
    for a in (a1, a2):
        _ring_axis(a, sizes)
        a.grid(True, alpha=0.3)
    _legend(fig, [a1, a2])
    a1.set_ylabel("speedup (x; ideal = ring size)" if kind == "strong" else "scaled speedup (x)")
    a2.set_ylabel("scaling efficiency (1 = ideal)")
    a2.set_ylim(0, max(1.1, a2.get_ylim()[1]))
    fig.suptitle(title, fontsize=11)
    return _save(fig, out_dir, f"{kind}_scaling.png",
                 SPREAD_NOTE + "; the series' first ring size held at its median")


def strong_scaling(points, out_dir):
    return _scaling_plot(points, out_dir, "strong")


def weak_scaling(points, out_dir):
    return _scaling_plot(points, out_dir, "weak")


def _percent_axis(ax, _values, ylabel):
    ax.set_ylim(0, 100)
    ax.set_ylabel(ylabel)


def _bytes_axis(ax, values, ylabel):
    """A byte axis that always reads: from zero in the unit of the largest value (MiB, GiB)
    when the values span less than 30x, else log2 with B/KiB/MiB/GiB on each power of two."""
    v = np.asarray([x for x in values if x and np.isfinite(x)], dtype=float)
    top = v.max() if v.size else 1.0
    if v.size and top / v.min() > 30:
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(_binary_bytes))
        ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        ax.set_ylabel(f"{ylabel} (log scale)")
        return
    unit, f = next(((u, f) for u, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)) if top >= f), ("B", 1))
    ax.set_ylim(0, top * 1.15)
    # round steps in the shown unit (0.5 MiB), not in bytes (0.4768 MiB)
    step = matplotlib.ticker.MaxNLocator(6).tick_values(0, top * 1.15 / f)
    ax.yaxis.set_major_locator(matplotlib.ticker.MultipleLocator((step[1] - step[0]) * f))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda x, _p: f"{x / f:g}"))
    ax.set_ylabel(f"{ylabel} ({unit})")


def _point_curves(points, out_dir, field, scale, ylabel, title, name, why, axis=_percent_axis):
    """One line per strong-scaling series of p[field] * scale against ring size; axis(ax,
    values, ylabel) sets the y axis and its unit."""
    have = {k: [p for p in v if p[field] is not None] for k, v in model.series(points, "strong").items()}
    have = {k: v for k, v in have.items() if v}
    if not have:
        raise NoData(why)
    n_cfg = len({k[0] for k in have})
    have, title = _few(have, title)
    labels = _labels(have, n_cfg, lambda k: f"S={k[1]}", lambda k: have[k])
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes, drawn = [], []
    for (cfg, seq), pts in sorted(have.items()):
        r = [p["ring_size"] for p in pts]
        sizes += r
        lab = labels[(cfg, seq)]
        drawn += [p[field] * scale for p in pts]
        ax.plot(r, [p[field] * scale for p in pts], "o-", label=lab, color=series_colour(("S", cfg, seq)))
    _ring_axis(ax, sizes + [p["ring_size"] for p in points])
    axis(ax, drawn, ylabel)
    ax.set_title(title, fontsize=10)
    _flag_unmeasured(ax, points)
    _legend(fig, [ax])
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out_dir, name)


def exposed_comm(points, out_dir):
    return _point_curves(points, out_dir, "exposed_comm", 100, "exposed communication (% of step time)",
                         "Communication not hidden behind compute", "exposed_comm.png",
                         "no step_compute_s / step_wait_s in the ring attention points")


def memory(points, out_dir):
    return _point_curves(points, out_dir, "memory", 1, "peak memory per rank, largest rank",
                         "Memory per rank", "memory.png", "no peak memory in the ring attention points",
                         axis=_bytes_axis)


def efficiency_heatmap(points, out_dir):
    strong = {k: v for k, v in model.series(points, "strong").items() if len(v) >= 2}
    if not strong:
        raise NoData("no strong-scaling series with at least two ring sizes")
    configs = sorted({k[0] for k in strong})
    fig, axes = plt.subplots(1, len(configs), figsize=(6 * len(configs), 4.5), squeeze=False)
    for ax, cfg in zip(axes[0], configs):
        seqs = sorted({k[1] for k in strong if k[0] == cfg})
        sizes = sorted({p["ring_size"] for k, v in strong.items() if k[0] == cfg for p in v}
                       | {p["ring_size"] for p in points if p["config_label"] == cfg})
        grid = np.full((len(seqs), len(sizes)), np.nan)
        for i, s in enumerate(seqs):
            for r, _, eff in model.scaling(strong[(cfg, s)], "strong"):
                grid[i, sizes.index(r)] = eff
        im = ax.imshow(grid, origin="lower", aspect="auto", vmin=0, vmax=max(1.0, np.nanmax(grid)),
                       cmap="viridis")
        for i in range(len(seqs)):
            for j in range(len(sizes)):
                txt = f"{grid[i, j]:.2f}" if np.isfinite(grid[i, j]) else ""
                bad = [p for p in points if p["config_label"] == cfg and p["seq_len"] == seqs[i]
                       and p["ring_size"] == sizes[j] and not p["measured"]]
                if bad:
                    txt = bad[0]["status"]
                ax.text(j, i, txt, ha="center", va="center", fontsize=8,
                        color="red" if bad else "black")
        ax.set_xticks(range(len(sizes)))
        ax.set_xticklabels([str(s) for s in sizes])
        ax.set_yticks(range(len(seqs)))
        ax.set_yticklabels([str(s) for s in seqs])
        ax.set_xlabel("ring size (ranks)")
        ax.set_ylabel("sequence length")
        ax.set_title(cfg or "strong-scaling efficiency", fontsize=8)
        fig.colorbar(im, ax=ax, label="strong-scaling efficiency")
    return _save(fig, out_dir, "efficiency_heatmap.png")


MAX_SPREAD_BARS = 40


def _config_parts(label):
    """'causal=1, dtype=bf16' -> ['causal=1', 'dtype=bf16'] (list values hold ", " too)."""
    return [x for x in re.split(r", (?=[A-Za-z_]\w*=)", label or "") if x]


def _grouped(items, name_of):
    out = {}
    for i, it in enumerate(items):
        out.setdefault(name_of(it), []).append(i)
    return out


def point_names(pts):
    """A short name per ring point, all different: S and R; the sweep where two points share
    them; then the configuration keys that differ between the points still sharing a name;
    then the file."""
    many_sweeps = len({p["sweep"] for p in pts}) > 1
    names = [(f"{p['sweep']}: " if many_sweeps else "") + f"S={p['seq_len']} R={p['ring_size']}" for p in pts]
    for idx in (g for g in _grouped(range(len(pts)), lambda i: names[i]).values() if len(g) > 1):
        parts = [set(_config_parts(pts[i]["config_label"])) for i in idx]
        common = set.intersection(*parts)
        for i in idx:
            extra = [x for x in _config_parts(pts[i]["config_label"]) if x not in common]
            if extra:
                names[i] += f" [{', '.join(extra)}]"
    for idx in (g for g in _grouped(range(len(pts)), lambda i: names[i]).values() if len(g) > 1):
        for i in idx:
            names[i] += f" ({pts[i]['run']}, point {pts[i]['point']})"
    return names


def rank_spread(points, out_dir):
    good = [p for p in points if p["measured"] and p["spread"] is not None and len(p["rank_times"]) > 1]
    if not good:
        raise NoData("no measured point with more than one rank")
    title = "Stragglers per point"
    if len(good) > MAX_SPREAD_BARS:  # the widest; the ring table has every point's spread
        title += f" ({MAX_SPREAD_BARS} widest of {len(good)})"
        good = sorted(good, key=lambda p: -p["spread"])[:MAX_SPREAD_BARS]
    names = point_names(good)
    height = max(4.5, 0.22 * len(good) + 1.5)
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(12, height), gridspec_kw={"width_ratios": (1.2, 1)})
    y = np.arange(len(good))
    a1.barh(y, [(p["spread"] - 1) * 100 for p in good], color="#4c72b0")
    a1.set_yticks(y)
    a1.set_yticklabels(names, fontsize=7)
    a1.invert_yaxis()  # the first point on top, as in the ring table
    a1.set_xlabel("slowest rank vs median rank (% slower)")
    a1.set_title(title, fontsize=10)
    a1.grid(True, axis="x", alpha=0.3)
    worst = max(good, key=lambda p: p["spread"])
    rt = np.array(worst["rank_times"])
    a2.bar(np.arange(len(rt)), rt * 1e3, color="#4c72b0")
    a2.set_xticks(np.arange(len(rt)) if len(rt) <= 32 else np.linspace(0, len(rt) - 1, 9).astype(int))
    a2.axhline(np.median(rt) * 1e3, color="k", ls="--")
    a2.set_xlabel("rank")
    a2.set_ylabel("time per iteration, rank's median (ms)")
    a2.set_title(_wrap(f"Per-rank time of the widest-spread point, {names[good.index(worst)]} "
                       "(dashed: the median rank)", 50), fontsize=9)
    return _save(fig, out_dir, "rank_spread.png")


def measured_efficiency(pr):
    """{ring size: measured forward strong-scaling efficiency} on the model's own scale: the
    model's efficiency at the base ring size R0 times R0 T(R0) / (R T(R)) of the measured
    forward times, which is exactly how the model's efficiency moves with its own times."""
    base = [x for x in pr["measured"] if x["ring_size"] == pr["base_ring_size"]]
    if not base or not base[0]["measured_time"] or base[0]["predicted_efficiency"] is None:
        return {}
    b = base[0]
    return {x["ring_size"]: b["predicted_efficiency"] * b["ring_size"] * b["measured_time"]
            / (x["ring_size"] * x["measured_time"]) for x in pr["measured"] if x["measured_time"]}


def cost_model(preds, out_dir):
    if not preds:
        raise NoData("no prediction (needs step times in ring points and a communication model)")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.8))
    n_cfg = len({p["config"] for p in preds})
    sizes, top = [], 1.0
    if len(preds) > MAX_SERIES:  # the longest measured series; the report's tables have all
        preds = sorted(preds, key=lambda pr: (-len(pr["measured"]), -pr["seq_len"]))[:MAX_SERIES]
    labels = _labels({(pr["config"], pr["seq_len"]): pr for pr in preds}, n_cfg, lambda k: f"S={k[1]}")
    for pr in preds:
        lab = labels[(pr["config"], pr["seq_len"])]
        colour = series_colour(("S", pr["config"], pr["seq_len"]))
        rows = sorted(pr["measured"] + pr["extrapolated"], key=lambda x: x["ring_size"])
        rr = [x["ring_size"] for x in rows]
        sizes += rr
        a1.plot(rr, [x["predicted_time"] for x in rows], "--", color=colour, label=lab)
        m = pr["measured"]
        times = [x["measured_time"] for x in m]
        a1.errorbar([x["ring_size"] for x in m], times,
                    yerr=yerr(times, [x.get("measured_p25") for x in m], [x.get("measured_p75") for x in m]),
                    fmt="o", color=colour, ms=7, elinewidth=1, capsize=3)
        a2.plot(rr, [x["predicted_efficiency"] for x in rows], "--", color=colour, label=lab)
        eff = measured_efficiency(pr)
        a2.plot(list(eff), list(eff.values()), "o", color=colour, ms=7)
        top = max([top] + list(eff.values()))
    for a in (a1, a2):
        _ring_axis(a, sizes)
        a.grid(True, which="both", alpha=0.3)
    a1.set_yscale("log")
    _eng_log(a1, "s")
    a1.set_ylabel("forward time per iteration (s)")
    a1.set_title("Forward time: model vs measurement\n(bars: the slowest rank's iterations, 25th-75th "
                 "percentile)", fontsize=9)
    a2.set_ylabel("strong-scaling efficiency (1 = ideal)")
    a2.set_ylim(0, max(1.05, top * 1.08))
    a2.set_title("Efficiency: model vs measurement", fontsize=10)
    from matplotlib.lines import Line2D
    style = [Line2D([], [], color="k", ls="--", label="model (calibrated at the smallest ring)"),
             Line2D([], [], color="k", marker="o", ls="none", label="measured")]
    handles, names = a1.get_legend_handles_labels()
    fig.legend(handles + style, names + [h.get_label() for h in style], loc="lower center",
               fontsize=7, ncol=min(3, len(names) + 2), bbox_to_anchor=(0.5, 0.0))
    rows_legend = -(-(len(names) + 2) // 3)
    fig.tight_layout(rect=(0, (0.15 + 0.17 * rows_legend) / fig.get_figheight(), 1, 1))
    path = os.path.join(out_dir, "cost_model.png")
    outfile.save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


# ---- contention sweep (contention_plots.py prepares the data) ------------------------------
_BOUND_COLOURS = ("#1f77b4", "#2ca02c", "#9467bd", "#8c564b", "#17becf", "#bcbd22")


def phase_colour(phase, phases):
    """alone grey, concurrent_unbound red, each bound policy its own colour (run order)."""
    if phase == "alone":
        return "#7f7f7f"
    if phase == "concurrent_unbound":
        return "#d62728"
    bound = [p for p in phases if p not in ("alone", "concurrent_unbound")]
    return _BOUND_COLOURS[bound.index(phase) % len(_BOUND_COLOURS)] if phase in bound else "#000000"


def phase_short(phase):
    """'concurrent_bound:numa' -> 'bound: numa', 'concurrent_unbound' -> 'unbound'."""
    if phase.startswith("concurrent_bound:"):
        return "bound: " + phase.split(":", 1)[1]
    return {"concurrent_unbound": "unbound"}.get(phase, phase)


def _time_unit(values):
    top = max((float(np.nanmax(v)) for v in values if len(v)), default=1.0)
    return (1.0, "s") if top >= 1 else (1e3, "ms") if top >= 1e-3 else (1e6, "us")


def contention_boxes(shapes, phases, out_dir, name, title):
    """One panel per workload (shape): a box per phase of the measuring ranks' per-iteration
    times, the slowdown and CV written above each box, the alone median dotted.
    shapes: [(label, [(phase, times_s, slowdown, cv)])]."""
    shapes = [(lab, [b for b in boxes if len(b[1])]) for lab, boxes in shapes]
    shapes = [(lab, boxes) for lab, boxes in shapes if boxes]
    if not shapes:
        raise NoData("no timed iteration of a measuring rank")
    ncols = 1 if len(shapes) <= 2 else 2
    nrows = -(-len(shapes) // ncols)
    width = max(6.0, 1.5 * max(len(b) for _, b in shapes) + 1.5)
    fig, axes = plt.subplots(nrows, ncols, figsize=(width * ncols, 3.6 * nrows + 0.9), squeeze=False)
    for ax, (label, boxes) in zip(axes.ravel(), shapes):
        _box_panel(ax, label, boxes, phases)
    for ax in axes.ravel()[len(shapes):]:
        ax.set_visible(False)
    fig.suptitle(f"{title}\nbox: quartiles, whiskers: 1st-99th percentile, dotted: alone median; "
                 "above each box: slowdown against alone, and CV", fontsize=10)
    return _save_titled(fig, out_dir, name, 0.4)


def _box_panel(ax, label, boxes, phases):
    f, unit = _time_unit([b[1] for b in boxes])
    bp = ax.boxplot([np.asarray(b[1]) * f for b in boxes], whis=(1, 99), showfliers=True,
                    patch_artist=True, widths=0.55, flierprops={"markersize": 3})
    for patch, b in zip(bp["boxes"], boxes):
        patch.set_facecolor(phase_colour(b[0], phases))
        patch.set_alpha(0.45)
    alone = [b for b in boxes if b[0] == "alone"]
    if alone:
        ax.axhline(np.median(alone[0][1]) * f, color="k", ls=":", lw=1)
    ax.set_xticks(range(1, len(boxes) + 1))
    ax.set_xticklabels([phase_short(b[0]) for b in boxes])
    top = max(float(np.nanmax(np.asarray(b[1]) * f)) for b in boxes)
    lo = min(float(np.nanmin(np.asarray(b[1]) * f)) for b in boxes)
    ax.set_ylim(lo - 0.05 * (top - lo), top + 0.22 * (top - lo))
    for i, (ph, _, slow, cv) in enumerate(boxes, start=1):
        slow_txt = ("baseline\n" if ph == "alone" else "" if not np.isfinite(slow)
                    else f"{(slow - 1) * 100:+.0f} %\n")
        ax.text(i, top + 0.03 * (top - lo), f"{slow_txt}CV {cv:.2f}", ha="center", va="bottom",
                fontsize=8)
    ax.set_ylabel(f"time per iteration ({unit})")
    ax.set_title(label, fontsize=10)
    ax.grid(True, axis="y", alpha=0.3)


def _save_titled(fig, out_dir, name, title_inches, note_inches=0):
    """_save with room for a suptitle (and legends outside the axes) and a note below."""
    h = fig.get_figheight()
    fig.tight_layout(rect=(0, note_inches / h, 1, 1 - title_inches / h))
    path = os.path.join(out_dir, name)
    outfile.save_figure(fig, path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _shade_phases(ax, spans, phases):
    for ph, t0, t1 in spans:
        ax.axvspan(t0, t1, color=phase_colour(ph, phases), alpha=0.13, lw=0)


def unavailable_note(panels):
    """'not drawn: GPU clocks, GPU power: <reason>; ...': the panels without data, grouped by
    reason ("" when every panel has data)."""
    why = {}
    for p in panels:
        if p["unavailable"]:
            why.setdefault(p["unavailable"], []).append(p["title"])
    return "; ".join(f"{', '.join(t)}: {r}" for r, t in why.items())


def contention_monitor(panels, spans, phases, out_dir, name, title):
    """The monitor series against time, one panel each, the phases shaded. A panel without
    data is not drawn (an empty frame says nothing): a line under the figure names it and why.
    panels: contention.monitor_panels()."""
    if not panels:
        raise NoData("no monitor panels")
    if all(p["unavailable"] for p in panels):
        raise NoData(f"no monitor series: {unavailable_note(panels)}")
    note = unavailable_note(panels)
    panels = [p for p in panels if not p["unavailable"]]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 2.3 * len(panels) + 1.6 + (0.3 if note else 0)),
                             sharex=True)
    axes = np.atleast_1d(axes)
    if note:
        fig.text(0.01, 0.005, _wrap("not drawn (no data): " + note, 170), fontsize=8, color="#444444",
                 ha="left", va="bottom")
    for ax, p in zip(axes, panels):
        _shade_phases(ax, spans, phases)
        ax.set_title(p["title"], fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
        ax.set_ylabel(p["ylabel"], fontsize=8)
        for label, t, y, style, rank in p["lines"]:
            ax.plot(t, y, style, lw=1.2, label=label, color="k" if rank < 0 else f"C{rank % 10}")
        if p.get("ylim"):
            ax.set_ylim(*p["ylim"])
        ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.005, 1.0), borderaxespad=0)
    axes[-1].set_xlabel("time since the monitors started (s)")
    height = fig.get_figheight()
    fig.suptitle(title, fontsize=10, y=1 - 0.1 / height)
    if spans:  # which shade is which phase: under the title
        from matplotlib.patches import Patch
        handles = [Patch(facecolor=phase_colour(ph, phases), alpha=0.35, label=phase_short(ph))
                   for ph, _, _ in spans]
        fig.legend(handles=handles, fontsize=8, loc="upper center", ncol=len(handles),
                   bbox_to_anchor=(0.5, 1 - 0.35 / height), title="phases (shaded)", title_fontsize=8)
    return _save_titled(fig, out_dir, name, 0.8, 0.45 if note else 0)


def _wrap(text, width):
    import textwrap
    return "\n".join(textwrap.wrap(text, width)) or text
