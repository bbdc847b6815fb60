"""PNG plots of the report (matplotlib, Agg backend: no display needed).

Every function writes one file and returns its path, or returns None (with the reason in
`why`) when the input has nothing to plot. Failed and oom points are drawn as red crosses
on the ring-size axis with their status, so a missing measurement is visible, not hidden.
"""
import os
import re

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from . import model  # noqa: E402


class NoData(Exception):
    pass


_PALETTE = list(plt.get_cmap("tab10").colors) + list(plt.get_cmap("Dark2").colors)
_COLOURS = {}


def reset_colours():
    """Forget the colour of every series (a new report)."""
    _COLOURS.clear()


def series_colour(label):
    """The same colour for a series label in every plot of one report (S=1024 is the same
    blue in the throughput, scaling, exposed-communication and cost-model plots)."""
    if label not in _COLOURS:
        _COLOURS[label] = _PALETTE[len(_COLOURS) % len(_PALETTE)]
    return _COLOURS[label]


def _save(fig, out_dir, name):
    path = os.path.join(out_dir, name)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
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


def _few(series, title):
    """At most MAX_SERIES series (the longest, then the longest sequences), and the title
    saying how many were left out (the report's table has every point)."""
    if len(series) <= MAX_SERIES:
        return series, title
    keep = sorted(series, key=lambda k: (-len(series[k]), -(k[1] or 0), str(k[0])))[:MAX_SERIES]
    return {k: series[k] for k in keep}, f"{title}\n({MAX_SERIES} of {len(series)} series: the longest; all in the table)"


def throughput(points, out_dir):
    strong = model.series(points, "strong")
    if not strong:
        raise NoData("no measured ring attention point")
    n_cfg = len({k[0] for k in strong})
    strong, title = _few(strong, "Ring attention throughput (dotted: ideal linear scaling)")
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = []
    for (cfg, seq), pts in sorted(strong.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        r = [p["ring_size"] for p in pts]
        y = [p["throughput"] for p in pts]
        sizes += r
        lab = _label(cfg, n_cfg, f"S={seq}", pts)
        line, = ax.plot(r, y, "o-", label=lab, color=series_colour(lab))
        if len(r) > 1:  # ideal: throughput grows linearly from the smallest ring size
            ax.plot(r, [y[0] * ri / r[0] for ri in r], ":", color=line.get_color(), alpha=0.6)
    sizes += [p["ring_size"] for p in points]
    _ring_axis(ax, sizes)
    ax.set_yscale("log")
    _eng_log(ax, "tok/s")
    ax.set_ylabel("throughput (whole ring)")
    ax.set_title(title, fontsize=10)
    _flag_unmeasured(ax, points)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out_dir, "throughput.png")


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
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    sizes = []
    for (cfg, s), pts in sorted(ser.items(), key=lambda kv: (kv[0][0], kv[0][1])):
        sc = model.scaling(pts, kind)
        r = [x[0] for x in sc]
        sizes += r
        txt = _label(cfg, n_cfg, f"S={s}" if kind == "strong" else f"S/R={s}", pts)
        a1.plot(r, [x[1] for x in sc], "o-", label=txt, color=series_colour(txt))
        a2.plot(r, [x[2] for x in sc], "o-", label=txt, color=series_colour(txt))
    lo, hi = min(sizes), max(sizes)
    a1.plot([lo, hi], [lo, hi], "k--", label="ideal")
    a2.plot([lo, hi], [1, 1], "k--", label="ideal")
    for a in (a1, a2):
        _ring_axis(a, sizes)
        a.grid(True, alpha=0.3)
        a.legend(fontsize=7)
    a1.set_ylabel("speedup (ideal = ring size)" if kind == "strong" else "scaled speedup")
    a2.set_ylabel("scaling efficiency")
    a2.set_ylim(0, max(1.1, a2.get_ylim()[1]))
    fig.suptitle(title, fontsize=11)
    return _save(fig, out_dir, f"{kind}_scaling.png")


def strong_scaling(points, out_dir):
    return _scaling_plot(points, out_dir, "strong")


def weak_scaling(points, out_dir):
    return _scaling_plot(points, out_dir, "weak")


def _point_curves(points, out_dir, field, scale, ylabel, title, name, why, logy=False, unit=""):
    """One line per strong-scaling series of p[field] * scale against ring size."""
    have = {k: [p for p in v if p[field] is not None] for k, v in model.series(points, "strong").items()}
    have = {k: v for k, v in have.items() if v}
    if not have:
        raise NoData(why)
    n_cfg = len({k[0] for k in have})
    have, title = _few(have, title)
    fig, ax = plt.subplots(figsize=(7, 4.5))
    sizes = []
    for (cfg, seq), pts in sorted(have.items()):
        r = [p["ring_size"] for p in pts]
        sizes += r
        lab = _label(cfg, n_cfg, f"S={seq}", pts)
        ax.plot(r, [p[field] * scale for p in pts], "o-", label=lab, color=series_colour(lab))
    _ring_axis(ax, sizes + [p["ring_size"] for p in points])
    if logy:
        ax.set_yscale("log")
        _eng_log(ax, unit, binary=unit == "B")
    else:
        ax.set_ylim(0, 100)
    ax.set_ylabel(ylabel)
    ax.set_title(title, fontsize=10)
    _flag_unmeasured(ax, points)
    ax.legend(fontsize=7)
    ax.grid(True, which="both", alpha=0.3)
    return _save(fig, out_dir, name)


def exposed_comm(points, out_dir):
    return _point_curves(points, out_dir, "exposed_comm", 100, "exposed communication (% of step time)",
                         "Communication not hidden behind compute", "exposed_comm.png",
                         "no step_compute_s / step_wait_s in the ring attention points")


def memory(points, out_dir):
    return _point_curves(points, out_dir, "memory", 1, "peak memory per rank (largest rank)",
                         "Memory per rank", "memory.png", "no peak memory in the ring attention points",
                         logy=True, unit="B")


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


def rank_spread(points, out_dir):
    good = [p for p in points if p["measured"] and p["spread"] is not None and len(p["rank_times"]) > 1]
    if not good:
        raise NoData("no measured point with more than one rank")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    labels = [f"S={p['seq_len']} R={p['ring_size']}" for p in good]
    x = np.arange(len(good))
    a1.bar(x, [(p["spread"] - 1) * 100 for p in good])
    a1.set_xticks(x)
    a1.set_xticklabels(labels, rotation=60, ha="right", fontsize=7)
    a1.set_ylabel("slowest rank vs median rank (% slower)")
    a1.set_title("Stragglers per point")
    worst = max(good, key=lambda p: p["spread"])
    rt = np.array(worst["rank_times"])
    a2.bar(np.arange(len(rt)), rt * 1e3)
    a2.set_xticks(np.arange(len(rt)) if len(rt) <= 32 else np.linspace(0, len(rt) - 1, 9).astype(int))
    a2.axhline(np.median(rt) * 1e3, color="k", ls="--", label="median rank")
    a2.set_xlabel("rank")
    a2.set_ylabel("time (ms)")
    a2.set_title(f"Per-rank time, widest-spread point (S={worst['seq_len']}, R={worst['ring_size']})",
                 fontsize=9)
    a2.legend(fontsize=7)
    return _save(fig, out_dir, "rank_spread.png")


def cost_model(preds, out_dir):
    if not preds:
        raise NoData("no prediction (needs step times in ring points and a communication model)")
    fig, (a1, a2) = plt.subplots(1, 2, figsize=(11, 4.5))
    n_cfg = len({p["config"] for p in preds})
    sizes = []
    if len(preds) > MAX_SERIES:  # the longest measured series; the report's tables have all
        preds = sorted(preds, key=lambda pr: (-len(pr["measured"]), -pr["seq_len"]))[:MAX_SERIES]
    for pr in preds:
        lab = _label(pr["config"], n_cfg, f"S={pr['seq_len']}")
        r_m = [x["ring_size"] for x in pr["measured"]]
        r_e = [x["ring_size"] for x in pr["extrapolated"]]
        sizes += r_m + r_e
        line, = a1.plot(r_m, [x["measured_time"] for x in pr["measured"]], "o", label=f"{lab} measured",
                        color=series_colour(lab))
        rr = r_m + r_e
        tt = [x["predicted_time"] for x in pr["measured"]] + \
             [x["predicted_time"] for x in pr["extrapolated"]]
        order = np.argsort(rr)
        a1.plot(np.array(rr)[order], np.array(tt)[order], "--", color=line.get_color(),
                label=f"{lab} predicted")
        ee = [x["predicted_efficiency"] for x in pr["measured"]] + \
             [x["predicted_efficiency"] for x in pr["extrapolated"]]
        a2.plot(np.array(rr)[order], np.array(ee)[order], "--", color=line.get_color(), label=lab)
    for a in (a1, a2):
        _ring_axis(a, sizes)
        a.grid(True, which="both", alpha=0.3)
        a.legend(fontsize=6)
    a1.set_yscale("log")
    _eng_log(a1, "s")
    a1.set_ylabel("ring attention forward time")
    a1.set_title("Cost model: prediction vs measurement")
    a2.set_ylabel("predicted strong-scaling efficiency")
    a2.set_ylim(0, 1.05)
    a2.set_title("Predicted efficiency")
    return _save(fig, out_dir, "cost_model.png")


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


def _save_titled(fig, out_dir, name, title_inches):
    """_save with room for a suptitle (and legends outside the axes)."""
    fig.tight_layout(rect=(0, 0, 1, 1 - title_inches / fig.get_figheight()))
    path = os.path.join(out_dir, name)
    fig.savefig(path, dpi=100, bbox_inches="tight")
    plt.close(fig)
    return path


def _shade_phases(ax, spans, phases):
    for ph, t0, t1 in spans:
        ax.axvspan(t0, t1, color=phase_colour(ph, phases), alpha=0.13, lw=0)


def contention_monitor(panels, spans, phases, out_dir, name, title):
    """The monitor series against time, one panel each, the phases shaded; a panel without
    data is a short strip saying 'unavailable: <reason>'. panels: contention.monitor_panels()."""
    if not panels:
        raise NoData("no monitor panels")
    if all(p["unavailable"] for p in panels) and len({p["unavailable"] for p in panels}) == 1:
        raise NoData(f"no monitor series: {panels[0]['unavailable']}")
    heights = [0.45 if p["unavailable"] else 1.0 for p in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(12, 2.3 * sum(heights) + 1.6), sharex=True,
                             gridspec_kw={"height_ratios": heights})
    axes = np.atleast_1d(axes)
    for ax, p in zip(axes, panels):
        _shade_phases(ax, spans, phases)
        ax.set_title(p["title"], fontsize=9, loc="left")
        ax.grid(True, alpha=0.3)
        if p["unavailable"]:
            ax.set_yticks([])
            ax.text(0.5, 0.5, "unavailable: " + _wrap(p["unavailable"], 130), transform=ax.transAxes,
                    ha="center", va="center", fontsize=8, color="#444444",
                    bbox={"facecolor": "white", "edgecolor": "#999999", "alpha": 0.9})
            continue
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
    return _save_titled(fig, out_dir, name, 0.8)


def _wrap(text, width):
    import textwrap
    return "\n".join(textwrap.wrap(text, width)) or text
