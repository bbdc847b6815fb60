"""The report's "Contention" section: Markdown and JSON of every contention sweep of the
files (the verdicts, the per-phase, per-rank, bindings and tuning-mismatch tables, the
figures' links and why a figure or monitor panel has no data).
"""
import math
import os

import pandas as pd

from . import reader
from .contention_plots import draw
from .contention_read import (ALONE, KEYS, MEASURE, UNBOUND, ContentionError, read,
                              stored_tuning_mismatch)
from .contention_stats import (FOREIGN_ATTR, conditions, mismatch_disagreement, per_rank,
                               rank_stats, summary, tuning_mismatch)
from .contention_verdict import (CV_NOISE_FLOOR, FOREIGN_CPU_LIMIT, TIME_NOISE_FLOOR, Z, fmt_cv,
                                 fmt_pct, fmt_time, foreign_words, shape_label, verdicts)

MAX_BINDING_RANKS = 16  # rows of the bindings table; report.json has every rank


def _md_table(headers, rows):
    out = ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    return out + ["| " + " | ".join(str(x) for x in r) + " |" for r in rows]


def _num(v, fmt):
    return fmt(v) if v is not None and isinstance(v, (int, float)) and math.isfinite(v) else "-"


def _phase_rows(c, table, mismatch):
    """Rows of the per-phase table (one per point, in run order)."""
    shape = c.shape_keys
    mis = {} if mismatch is None else {r["phase"]: r for _, r in mismatch.iterrows()}
    rows = []
    for _, r in table.iterrows():
        m = mis.get(r[KEYS["phase"]])
        mtxt = ("-" if m is None or not m["shapes"] else "reference" if m["phase"] == m["reference"]
                else f"{m['mismatched']}/{m['shapes']}")
        rows.append([r[KEYS["phase"]], r[KEYS["binding"]] or "-", shape_label(r, shape),
                     r["ranks"], _num(r["median_s"], fmt_time), _num(r["cv"], fmt_cv),
                     _num(r["p95_s"], fmt_time), _num(r["p99_s"], fmt_time),
                     _num(r["slowdown"], fmt_pct), _num(r["worst_slowdown"], fmt_pct),
                     _num(r["spread"], lambda v: f"{v:.3f}")]
                    + ([mtxt] if mismatch is not None else []))
    return rows


def bindings(c):
    """One row per (rank, phase), ranks in order, phases in run order: role, cpuset, nodeset
    and binding_note as the sweep recorded them (the first point of the phase; the sweep binds
    once per phase, so every point of a phase holds the same)."""
    pl = c.placement.drop_duplicates(["rank", KEYS["phase"]])
    roles = {r: (MEASURE if (g["role"] == MEASURE).any() else str(g["role"].iloc[0]))
             for r, g in c.placement.groupby("rank")}
    order = {ph: i for i, ph in enumerate(c.phases)}
    rows = [{"rank": int(x["rank"]), "role": roles[x["rank"]], "phase": x[KEYS["phase"]],
             "cpuset": str(x["cpuset"]), "nodeset": str(x["nodeset"]),
             "binding_note": str(x["binding_note"])} for _, x in pl.iterrows()]
    return sorted(rows, key=lambda r: (r["rank"], order.get(r["phase"], len(order))))


def _binding_cell(x):
    if x is None or not x["cpuset"]:
        return "-"
    return x["cpuset"] + (f" (mem {x['nodeset']})" if x["nodeset"] else "")


def _binding_rows(c, rows):
    """Per rank (the first MAX_BINDING_RANKS) and phase: the cpuset (and memory policy) applied."""
    by_rank = {}
    for x in rows:
        by_rank.setdefault(x["rank"], {})[x["phase"]] = x
    return [[r, next(iter(mine.values()))["role"]] + [_binding_cell(mine.get(ph)) for ph in c.phases]
            for r, mine in list(by_rank.items())[:MAX_BINDING_RANKS]]


def _json_rows(df):
    if df is None:
        return None
    return [{k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
            for row in df.to_dict("records")]


def section(c, out_dir, tag, backend="", heading="###"):
    """(markdown lines, json dict, {plot name: file}, {plot name: why not}) for one sweep."""
    stats = rank_stats(c)
    table = summary(c, stats)
    by_rank = per_rank(c, stats)
    cond = conditions(c)
    found = verdicts(table, conditions=cond)
    placed = bindings(c)
    mismatch = tuning_mismatch(c, table)
    disagree = mismatch_disagreement(mismatch, stored_tuning_mismatch(c))
    ranks = c.measuring_ranks()
    feeders = sorted(set(c.placement["rank"]) - set(ranks))
    md = [f"Sweep `{c.name}` ({c.sweep.status}): {len(ranks)} measuring rank(s)"
          + (f", {len(feeders)} feeder(s) (ranks {', '.join(map(str, feeders))}) loading the node"
             if feeders else "") + f"; phases {', '.join(c.phases)}.", ""]
    md += _verdict_lines(found, heading, cond) + _error_lines(c)
    md += _table_lines(c, table, mismatch, heading) + _binding_lines(c, placed, cond, heading)
    md += _per_rank_lines(c, by_rank, heading)
    if disagree:
        md += ["**Warning:** the file's tuning_mismatch/ differs from the one computed here: "
               + "; ".join(disagree) + ".", ""]
    lines, drawn, why, gone = _plot_lines(c, table, out_dir, tag, backend, heading)
    md += lines
    js = {"file": c.path, "sweep": c.name, "table": _json_rows(table), "per_rank": _json_rows(by_rank),
          "verdicts": found, "bindings": placed,
          "conditions": {"foreign_cpu_fraction": cond["foreign_cpu_fraction"],
                         "foreign_cpu_limit": FOREIGN_CPU_LIMIT,
                         "same_as_unbound": sorted(cond["same_as_unbound"]),
                         "numa_nodes": cond["numa_nodes"], "phase_cpu_busy": cond["phase_cpu_busy"]},
          "tuning_mismatch": _json_rows(mismatch),
          "tuning_mismatch_disagrees": disagree,
          "unavailable": {p["title"]: p["unavailable"] for p in gone}}
    return md, js, {f"contention_{tag}_{k}": v for k, v in drawn.items()}, \
        {f"contention_{tag}_{k}": v for k, v in why.items()}


def _verdict_lines(found, heading, cond):
    md = [f"{heading} Verdicts", ""]
    foreign = cond["foreign_cpu_fraction"]
    busy = foreign is not None and foreign > FOREIGN_CPU_LIMIT
    if busy:
        md += [f"**No verdict: {foreign_words(foreign)}** (`/run` {FOREIGN_ATTR}, above the "
               f"{FOREIGN_CPU_LIMIT * 100:g} % limit): their load falls on the phases unevenly, so "
               "no binding's effect can be told from theirs. Rerun on a quiet node.", ""]
    if not found:
        md += [f"No verdict: the sweep needs a `{UNBOUND}` phase and at least one "
               "`concurrent_bound:<policy>` phase of the same workload."]
    else:
        md += [f"- {v['sentence']}" for v in found]
        md += ["", f"Each bound policy against `{UNBOUND}` on the same workload. A change "
               f"counts only beyond the noise: {Z:g} combined standard errors of the two values "
               f"and at least {TIME_NOISE_FLOOR:.0%} of the median time or {CV_NOISE_FLOOR} of CV "
               "(docs/analysis.md, \"Contention\"). No verdict where other processes took more "
               f"than {FOREIGN_CPU_LIMIT * 100:g} % of the CPUs, or where a policy gave every rank "
               f"the same CPUs as `{UNBOUND}`."]
    return md + [""] + _foreign_lines(cond, busy)


def _foreign_lines(cond, busy):
    """Other processes' share of the CPUs (the run's figure) and the node's busy CPUs per
    phase (every process's: not the foreign load, which the file has for the whole run only)."""
    foreign = cond["foreign_cpu_fraction"]
    if foreign is None:
        text = (f"Other processes' share of the CPUs is not in the file (`/run` {FOREIGN_ATTR} "
                "absent or NaN: a run that did not end, or /proc/stat unreadable): a busy node "
                "would go unnoticed here.")
    elif busy:
        text = (f"Other processes' share of the CPUs: {foreign * 100:.0f} % over the whole run "
                "(the file has no per-phase figure).")
    else:
        text = (f"Other processes took {foreign * 100:.1f} % of the CPUs during the run (`/run` "
                f"{FOREIGN_ATTR}, over the whole run; limit {FOREIGN_CPU_LIMIT * 100:g} %).")
    per_phase = cond["phase_cpu_busy"]
    if per_phase:
        phases = ", ".join(f"{ph} {v * 100:.0f} %" for ph, v in per_phase.items())
        text += (" Node CPUs busy per phase (monitor cpu_busy, every process, this run's ranks "
                 f"and feeders included): {phases}.")
    return [text]


def _table_lines(c, table, mismatch, heading):
    """The per-phase table, the tuning mismatch (with `path`) and the bindings applied."""
    md = ["", f"{heading} Per phase", "",
          "Per workload and phase, the median over the measuring ranks of each rank's statistic "
          "of its per-iteration times; slowdown = rank median / the same rank's `alone` median "
          "(worst: the largest over ranks); spread = slowest / fastest rank median.", ""]
    headers = ["phase", "binding", "workload", "ranks", "median", "CV", "p95", "p99", "slowdown",
               "worst rank", "spread"] + (["path mismatches"] if mismatch is not None else [])
    md += _md_table(headers, _phase_rows(c, table, mismatch)) + [""]
    if mismatch is not None:
        md += _mismatch_lines(mismatch)
    return md


def _binding_lines(c, rows, cond, heading):
    """The cpuset and memory policy each rank ran under per phase, the policies that placed
    every rank as unbound, and the bindings that failed."""
    md = [f"{heading} Bindings applied", ""]
    if not any(x["cpuset"] for x in rows):
        return md + ["The file records no cpuset for any rank and phase (metric `cpuset`): the "
                     "bindings applied are unknown, and no policy can be shown to differ from "
                     f"`{UNBOUND}`.", ""]
    md += ["The cpuset (and memory policy) each rank ran under, per phase, as the sweep read it "
           "back:", ""]
    md += _md_table(["rank", "role"] + c.phases, _binding_rows(c, rows)) + [""]
    ranks = sorted({x["rank"] for x in rows})
    if len(ranks) > MAX_BINDING_RANKS:
        md += [f"Ranks {ranks[MAX_BINDING_RANKS]}-{ranks[-1]} not shown (report.json has every "
               "rank).", ""]
    for policy, note in cond["same_as_unbound"].items():
        md += [f"`{policy}` gave every rank the same CPUs as `{UNBOUND}`{note}: its timings can "
               "differ from unbound's only by noise.", ""]
    failed = [x for x in rows if x["binding_note"].startswith("binding failed")]
    md += [f"- rank {x['rank']}, {x['phase']}: {x['binding_note']}" for x in failed]
    return md + ([""] if failed else [])


def _per_rank_lines(c, by_rank, heading):
    """Per GPU (measuring rank) and phase: the rank's own median, CV and slowdown, so one GPU
    that suffers more than the others shows (the per-phase table gives medians over ranks)."""
    if len(c.measuring_ranks()) < 2 or not len(by_rank):
        return []
    gpus = by_rank["gpu_index"].notna().any()
    md = [f"{heading} Per {'GPU' if gpus else 'rank'}", "",
          "Each measuring rank's own statistics of its per-iteration times: median (CV, slowdown "
          "against its own `alone` median) per phase.", ""]
    headers = ["workload", "GPU (rank)" if gpus else "rank"] + c.phases
    rows = []
    for _, r in by_rank.iterrows():
        who = (f"GPU {int(r['gpu_index'])} (rank {r['rank']})" if gpus and pd.notna(r["gpu_index"])
               else f"rank {r['rank']}")
        cells = []
        for ph in c.phases:
            med, cv, slow = (r.get(f"{ph} {m}", math.nan) for m in ("median_s", "cv", "slowdown"))
            cells.append("-" if not math.isfinite(med) else
                         f"{fmt_time(med)} ({_num(cv, fmt_cv)}"
                         + ("" if ph == ALONE else f", {_num(slow, fmt_pct)}") + ")")
        rows.append([shape_label(r, c.shape_keys), who] + cells)
    return md + _md_table(headers, rows) + [""]


def _plot_lines(c, table, out_dir, tag, backend, heading):
    """(markdown, drawn {name: file}, not drawn {name: why}, the unavailable panels)."""
    drawn, why, panels = draw(c, table, out_dir, tag, backend)
    md = []
    for name, title in (("boxes", "Per-iteration times per phase"), ("monitor", "Monitors")):
        md += [f"{heading} {title}", ""]
        md += [f"![{title}]({drawn[name]})" if name in drawn else f"Not plotted: {why[name]}", ""]
    gone = [p for p in panels if p["unavailable"]]
    if gone and "monitor" in drawn:
        by_reason = {}
        for p in gone:
            by_reason.setdefault(p["unavailable"], []).append(p["title"])
        md += ["Monitor panels without data:", ""]
        md += [f"- {', '.join(titles)}: unavailable: {reason}" for reason, titles in by_reason.items()]
        md.append("")
    return md, drawn, why, gone


def _error_lines(c, most=20):
    """The workloads that failed on a rank (the `error` metric), most lines at most."""
    bad = c.placement[c.placement["error"].str.len() > 0]
    if not len(bad):
        return []
    out = ["", f"**Failed on some ranks** ({len(bad)} rank-points; their iterations are not "
               "in the numbers):", ""]
    out += [f"- rank {r['rank']}, {r[KEYS['phase']]}, {r[KEYS['workload']]}: {r['error']}"
            for _, r in bad.head(most).iterrows()]
    return out + ([f"- ... {len(bad) - most} more"] if len(bad) > most else [])


def _mismatch_lines(mismatch):
    md = ["Tuning mismatch (shapes timed with more than one kernel path whose fastest path "
          f"differs from `{mismatch['reference'].iloc[0]}`):", ""]
    md += _md_table(["phase", "shapes", "mismatched", "fraction", "changes"],
                    [[r["phase"], r["shapes"], r["mismatched"], _num(r["fraction"], lambda v: f"{v:.0%}"),
                      "; ".join(r["changes"]) or "-"] for _, r in mismatch.iterrows()])
    return md + [""]


def report_section(runs, out_dir, summary_json):
    """The report's "Contention" section: [] when no file has a contention sweep. Adds
    summary_json["contention"], its plots, and a problem for a sweep it cannot read."""
    found = [(run, s) for run in runs for s in run.sweeps_of_type(reader.CONTENTION_TYPES)]
    if not found:
        return []
    md = ["## Contention", ""]
    for i, (run, s) in enumerate(found):
        label = f"`{s.name}` of `{os.path.basename(run.path)}`"
        tag = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in
                      (s.name if len(found) == 1 else f"{i}_{s.name}"))
        if len(found) > 1:
            md += [f"### {label}", ""]
        try:
            c = read(s)
        except ContentionError as e:
            md += [f"Sweep {label} not analysed: {e}", ""]
            summary_json["problems"].append(f"{os.path.basename(run.path)}: contention sweep "
                                            f"'{s.name}' not analysed: {e}")
            continue
        lines, js, drawn, why = section(c, out_dir, tag, str(run.attrs.get("backend", "")),
                                        heading="####" if len(found) > 1 else "###")
        md += lines
        summary_json.setdefault("contention", []).append(js)
        summary_json["plots"].update(drawn)
        summary_json["not_plotted"].update(why)
    return md
