"""The contention sweep (docs/sweeps/contention.md): the same workloads run alone, then
concurrently with every rank unbound, then concurrently bound under each policy, with GPU
and system monitor series. This module is the entry point: it gives the names of the modules
that turn one such sweep into pandas tables, per-phase statistics, one verdict per binding
policy, the figures' data and the report's "Contention" section, one job each:

    contention_read.py     the file layout's names; the sweep read into DataFrames
    contention_stats.py    per (point, rank), per point and per (shape, rank); tuning mismatch;
                           the run's conditions (foreign load, policies placed as unbound)
    contention_verdict.py  the noise rule, one verdict per (bound policy, shape), number words
    contention_plots.py    box data, monitor panels, phase spans; drawing both figures
    contention_report.py   the report's Markdown and JSON

    from ringbench_analysis import reader, contention
    run = reader.load("results/contention.h5")
    c = contention.read(run.sweeps["contention"])
    c.samples          # one row per (point, measuring rank, iteration): phase, workload, time_s
    c.placement        # one row per (point, rank): role, cpuset, nodeset, phase_start_s, phase_end_s
    c.monitor          # one row per (rank, sample): t_s and every series (NaN: not measured)
    s = contention.summary(c)      # per point (phase, workload): median_s, cv, p95_s, p99_s,
                                   # slowdown, worst_slowdown, spread
    for v in contention.verdicts(s, conditions=contention.conditions(c)):
        print(v["sentence"])       # "numa binding cut CV from 0.12 to 0.03 and slowdown ..."
                                   # or no verdict: foreign load, a policy placed as unbound

Definitions (docs/analysis.md, "Contention"): each rank's statistics come from its own
per-iteration times; a point's number is the median over its measuring ranks of that
statistic, except `worst_slowdown` (the largest) and `spread` (largest / smallest rank median).
"""
from .contention_plots import (MAX_RANK_LINES, PANEL_YLIM, PANELS, box_data, monitor_panels,
                               phase_spans)
from .contention_read import (ALONE, BOUND_PREFIX, KEYS, MEASURE, METRICS, MISMATCH_GROUP, MONITOR,
                              MONITOR_GROUP, SHAPE_KEYS, UNBOUND, Contention, ContentionError,
                              is_contention, read, stored_tuning_mismatch)
from .contention_report import bindings, report_section, section
from .contention_stats import (CV_DDOF, conditions, mismatch_disagreement, numa_nodes, per_rank,
                               phase_cpu_busy, rank_stats, same_as_unbound, summary,
                               tuning_mismatch)
from .contention_verdict import (CV_NOISE_FLOOR, FOREIGN_CPU_LIMIT, TIME_NOISE_FLOOR, Z, fmt_time,
                                 policy_of, shape_label, verdict, verdicts)

__all__ = [  # what `contention.X` has always given, whichever module now holds it
    "KEYS", "METRICS", "SHAPE_KEYS", "MONITOR_GROUP", "MISMATCH_GROUP", "MONITOR", "ALONE",
    "UNBOUND", "BOUND_PREFIX", "MEASURE", "ContentionError", "Contention", "is_contention", "read",
    "stored_tuning_mismatch",
    "CV_DDOF", "rank_stats", "summary", "per_rank", "tuning_mismatch", "mismatch_disagreement",
    "conditions", "same_as_unbound", "numa_nodes", "phase_cpu_busy",
    "Z", "TIME_NOISE_FLOOR", "CV_NOISE_FLOOR", "FOREIGN_CPU_LIMIT", "policy_of", "fmt_time",
    "shape_label", "verdict", "verdicts",
    "PANELS", "PANEL_YLIM", "MAX_RANK_LINES", "monitor_panels", "phase_spans", "box_data",
    "section", "report_section", "bindings",
]
