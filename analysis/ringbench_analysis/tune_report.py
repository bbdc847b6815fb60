"""tune_report: the Markdown report of `rb-analysis tune --report FILE.md`, with one PNG per
shape group beside it (FILE_<shape>.png): the numbers first (machine, settings, switch points),
then per shape the per-block-rows timings, parity and the decision with its reason.
"""
import math
import os

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

from . import outfile, tuning  # noqa: E402


def _scalar(v):
    return v.item() if hasattr(v, "item") else v


def shape_words(shape):
    s = dict(zip(tuning.SHAPE_KEYS, shape))
    dilation = (f"dilated (segment {s['segment']}, rate {s['rate']})" if s["segment"]
                else "no dilation")
    return (f"{s['dtype']}, head_dim {s['head_dim']}, "
            f"{'causal' if s['causal'] else 'not causal'}, {dilation}")


def shape_slug(shape):
    """A file-name part for a shape: fp32_d16_causal_seg32_rate2."""
    s = dict(zip(tuning.SHAPE_KEYS, shape))
    slug = f"{s['dtype']}_d{s['head_dim']}_{'causal' if s['causal'] else 'full'}"
    return slug + (f"_seg{s['segment']}_rate{s['rate']}" if s["segment"] else "")


def _table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    out += ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows]
    return out + [""]


def _value(v):
    return "—" if v is None or v == "" else str(v)


def _speedup(v):
    return f"{v:.2f}x" if v is not None and math.isfinite(v) else "—"


def _rows_text(lo, hi):
    return f"{lo}" if lo == hi else f"{lo} – {hi}"


# ------------------------------------------------------------------------------ sections

def _header(run, sweep, policy):
    m = policy["machine"]
    iterations = sweep.attrs.get("iterations", "?")
    rows = [
        ["device", f"{_value(m['device'])}" + ("" if m["gpu"] else " (no GPU)")],
        ["GPU", _value(m["gpu"])],
        ["CUDA driver", _value(m["cuda_driver"])],
        ["CUDA runtime", _value(m["cuda_runtime"])],
        ["cuDNN", _value(m["cudnn"])],
        ["ringbench", f"{_value(m['ringbench_version'])}, commit {_value(m['commit'])}"],
        ["run date", f"{policy['date']} (started {_value(run.attrs.get('start_time'))})"],
        ["source", f"`{policy['source']}`, sweep `{policy['sweep']}` ({sweep.status})"],
        ["ranks", f"{run.world_size} (each times its own device alone; samples pooled)"],
        ["samples", f"{iterations} timed iterations after {sweep.attrs.get('warmup', '?')} "
                    "warm-up, per rank, path and shape"],
        ["safety margin", f"{policy['margin']:g} (a path replaces the default only when "
                          f"time(default) / time(path) >= {policy['margin']:g})"],
        ["hysteresis", f"{policy['hysteresis']} (a switch must hold on "
                       f"{policy['hysteresis']} consecutive block-rows points)"],
    ]
    md = [f"# Kernel-path tuning: `{os.path.basename(str(policy['source']))}`", ""]
    return md + _table(["", ""], rows)


def _switch_table(choices):
    rows = []
    for shape, ranges in choices.items():
        for r in ranges:
            rows.append([shape_words(shape), r.default_path, _rows_text(r.rows_lo, r.rows_hi),
                         r.path or "none (no path passed parity)",
                         "(default)" if r.path == r.default_path else _speedup(
                             r.speedup_vs_default)])
    return (["## Switch points", "",
             "Block rows are the query and key rows of the block one rank computes. Speedup is "
             "the smallest time(default) / time(path) over the range.", ""]
            + _table(["shape", "default", "block rows", "path", "speedup vs default"], rows))


def _paths_of(group, default):
    """The shape's paths, the default first, the others in the file's (table) order."""
    seen = list(dict.fromkeys(group["path"]))
    return [default] + [p for p in seen if p != default] if default in seen else seen


def _time_cell(row, world, chosen):
    if row is None or not math.isfinite(row.time_s):
        return "—"
    ms = row.time_s * 1e3
    text = f"{ms:.0f}" if ms >= 1000 else f"{ms:.3g}"  # no 1.2e+03 in a table of times
    if world > 1 and math.isfinite(row.rank_spread):
        text += f" ({row.rank_spread:.2f})"
    return f"**{text}**" if row.path == chosen else text


def _best_other(at, default):
    """(speedup, path) of the fastest non-default path that passed parity at one point."""
    base = at.get(default)
    if base is None or not math.isfinite(base.time_s):
        return None, None
    others = [r for p, r in at.items() if p != default and r.parity_ok and math.isfinite(r.time_s)]
    if not others:
        return None, None
    best = min(others, key=lambda r: r.time_s)
    return base.time_s / best.time_s, best.path


def _shape_rows(group, decisions, paths, world):
    rows = []
    for d in decisions:
        at = {r.path: r for r in group[group["block_rows"] == d.block_rows].itertuples()}
        speedup, best = _best_other(at, d.default_path)
        rows.append([d.block_rows]
                    + [_time_cell(at.get(p), world, d.path) for p in paths]
                    + [at[p].parity if p in at else "—" for p in paths]
                    + [f"{speedup:.2f}x ({best})" if best else "—",
                       d.path or "none", d.why])
    return rows


def _defaults_words(decisions):
    return tuning.defaults_text(tuning.ranges_from(decisions))


def _shape_section(shape, group, decisions, world, png):
    default = decisions[0].default_path
    defaults = {d.default_path for d in decisions}
    paths = _paths_of(group, default)
    unit = "median ms (rank spread)" if world > 1 else "median ms"
    headers = (["block rows"] + [f"{p} {unit}" for p in paths]
               + [f"{p} parity" for p in paths]
               + ["best non-default vs default", "chosen", "why"])
    md = [f"### {shape_words(shape)}", "",
          f"Default (the built-in auto rule on this shape, by block rows): **{_defaults_words(decisions)}**."
          + ("" if defaults <= set(paths) else " It has no measurement at this shape."), ""]
    md += _table(headers, _shape_rows(group, decisions, paths, world))
    if png:
        md += [f"![speedup over the default: {shape_words(shape)}]({os.path.basename(png)})", ""]
    return md


# ------------------------------------------------------------------------------ plots

def _plot_path(ax, rows, default_times, label):
    """One path's speedup curve; its parity failures as red crosses on the curve."""
    rows = [r for r in rows if r.block_rows in default_times and r.time_s > 0]
    xs = [r.block_rows for r in rows]
    ys = [default_times[r.block_rows] / r.time_s for r in rows]
    ax.plot(xs, ys, "o-", label=label)
    failed = [(x, y) for x, y, r in zip(xs, ys, rows) if not r.parity_ok]
    if failed:
        ax.plot(*zip(*failed), "x", color="red", markersize=11, mew=2.5)
    return dict(zip(xs, ys)), bool(failed)


def _plot_shape(shape, group, decisions, margin, path):
    # The default may change with block rows (the built-in rule decides by kernel shape): each
    # point is measured against its own default.
    default_at = {d.block_rows: d.default_path for d in decisions}
    single = len(set(default_at.values())) == 1
    default = decisions[0].default_path
    fig, ax = plt.subplots(figsize=(7.5, 4.5))
    measured = group[group["time_s"].map(math.isfinite)]
    default_times = {r.block_rows: r.time_s for r in measured.itertuples()
                     if r.path == default_at.get(r.block_rows) and r.time_s > 0}
    curves, any_failed = {}, False
    for p in _paths_of(measured, default):
        if p != default or not single:
            rows = sorted(measured[measured["path"] == p].itertuples(), key=lambda r: r.block_rows)
            curves[p], failed = _plot_path(ax, rows, default_times, p)
            any_failed |= failed
    words = _defaults_words(decisions)
    ax.axhline(1.0, color="grey", lw=1.2, label=f"1.0 = default {words}")
    ax.axhline(margin, color="black", ls="--", lw=1.2, label=f"safety margin {margin:g}")
    _mark_choices(ax, decisions, curves)
    if any_failed:
        ax.plot([], [], "x", color="red", markersize=11, mew=2.5, label="parity FAILED (never chosen)")
    grid = sorted({d.block_rows for d in decisions})
    ax.set_xscale("log", base=2)
    ax.set_xticks(grid)
    ax.set_xticklabels([str(g) for g in grid])
    ax.set_xlim(grid[0] / 1.3, grid[-1] * 1.3)
    ax.set_ylim(0, max(ax.get_ylim()[1], margin * 1.15) * 1.1)
    for d in decisions:  # no speedup can be drawn there: say so instead of a silent gap
        if d.block_rows not in default_times:
            ax.annotate(f"default {d.default_path}\nnot measured;\nchosen: {d.path or 'none'}",
                        (d.block_rows, 0.97), ha="center", va="top", fontsize=7,
                        color="dimgrey", xycoords=("data", "axes fraction"))
    ax.set_xlabel("block rows (query and key rows per block, log2)")
    ax.set_ylabel("speedup over default: time(default) / time(path)")
    ax.set_title(f"{shape_words(shape)}\nspeedup over the default ({words})", fontsize=10)
    if not curves:
        ax.text(0.5, 0.5, "no other path at this shape", transform=ax.transAxes, ha="center")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="best")
    fig.tight_layout()
    outfile.save_figure(fig, path, dpi=100)
    plt.close(fig)
    return path


def _mark_choices(ax, decisions, curves):
    """A ring on the chosen path's point at each block rows (on 1.0 when it is the default)."""
    marks = []
    for d in decisions:
        if d.path is None:
            ax.plot([d.block_rows], [0.05], "X", color="red", markersize=10)
            continue
        y = 1.0 if d.path == d.default_path else curves.get(d.path, {}).get(d.block_rows)
        if y is not None and math.isfinite(y):
            marks.append((d.block_rows, y))
    if marks:
        ax.plot(*zip(*marks), "o", ms=15, mfc="none", mec="green", mew=2, label="chosen path")
    if any(d.path is None for d in decisions):
        ax.plot([], [], "X", color="red", markersize=10, label="no path passed parity")


# ------------------------------------------------------------------------------ write

def write(report_path, *, run, sweep, frame, decisions, choices, policy, notes, per_gpu=None,
          builtin=None):
    """Writes the report and its PNGs; returns the PNG paths."""
    out_dir = os.path.dirname(os.path.abspath(report_path))
    os.makedirs(out_dir, exist_ok=True)
    stem = os.path.splitext(os.path.basename(report_path))[0]
    md = _header(run, sweep, policy)
    if builtin:
        # What the policy is for: how far the built-in rule (points/auto_path) was from the best.
        text = tuning.builtin_quality_text(builtin)
        md += [f"**{text[0].upper()}{text[1:]}** (the default's time / the fastest passing "
               "path's at each grid point).", ""]
    md += _switch_table(choices)
    md += ["## Per shape", "",
           "Time: the median of every rank's forward + backward samples (one training step "
           "of the block), in ms"
           + ("; in brackets the rank spread, slowest rank's median / fastest rank's" if
              run.world_size > 1 else "")
           + ". The chosen path's time is bold. Parity: ok on every rank that measured the "
           "point, FAILED on one or more, oom where no rank had the memory, — not measured.", ""]
    pngs = []
    for shape, group in frame.groupby(list(tuning.SHAPE_KEYS), sort=True):
        shape = tuple(_scalar(v) for v in shape)
        png = os.path.join(out_dir, f"{stem}_{shape_slug(shape)}.png")
        pngs.append(_plot_shape(shape, group, decisions[shape], policy["margin"], png))
        md += _shape_section(shape, group, decisions[shape], run.world_size, png)
    from . import tune_gpus
    md += tune_gpus.report_lines(per_gpu)
    if notes:
        md += ["## Notes", ""] + [f"- {n}" for n in notes] + [""]
    with outfile.replacing(report_path) as f:
        f.write("\n".join(md))
    return pngs
