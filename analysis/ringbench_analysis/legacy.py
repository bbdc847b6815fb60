"""What a schema_version 2 file's columns meant, for reading nightly baselines written before
the files described their columns (schema 3, docs/hdf5-schema.md "What a column says").

Schema 3 files carry each metric's direction, headline flag, rank reduction, noise class and
inner axis as attributes; the analysis reads only those. A schema 2 file has none of them: this
module supplies them from the rules the analysis used then (by sweep type and metric name), so
an old baseline still compares against a new run. Nothing else reads these tables; a new sweep
or metric never needs an entry here.
"""
# The metrics compare judged by default, by sweep type (schema 2 had no headline for
# kernel_tuning or contention: their points were never judged).
HEADLINE = {
    "ring_attention": ("total_time_s",),
    "collectives": ("busbw_Bps",),
    "p2p_matrix": ("bandwidth_Bps", "latency_s"),
    "host_pingpong": ("bandwidth_Bps", "one_way_time_s"),
    "compute": ("rate_tflops",),
    "memory": ("bandwidth_Bps",),
}
# Per-iteration time samples besides iteration_time_s; the last spreads one-number metrics.
ITERATION_SAMPLES = {
    "ring_attention": ("forward_time_s", "backward_time_s", "total_time_s"),
    "host_pingpong": ("one_way_time_s",),
}
SIZED_TYPES = ("collectives", "host_pingpong")  # whose byte-sized key --min-bytes filters
PER_DEVICE_TYPES = ("compute", "memory")  # each rank measures its own device
RATE_UNITS = ("B/s", "TFLOP/s", "Hz")


def _direction(units, name):
    if units in RATE_UNITS:
        return "higher"
    if units == "s" or (units == "B" and "memory" in name):
        return "lower"
    return "none"


def _noise(sweep_type, metric):
    if sweep_type == "ring_attention":
        return "ring"
    if sweep_type in PER_DEVICE_TYPES:
        return sweep_type
    if metric in ("latency_s", "one_way_time_s"):
        return "latency"
    if sweep_type in ("p2p_matrix", "host_pingpong"):
        return "p2p_bandwidth"
    return "*"


def _memory_point_noise(sweep):
    """Host<->device copies (kind h2d*/d2h*) had their own noise class."""
    kinds = [str(k) for k in sweep.points["kind"]] if "kind" in sweep.keys else []
    return lambda p: "host_transfer" if p < len(kinds) and kinds[p][:3] in ("h2d", "d2h") else ""


def describe(sweep):
    """Fills a schema 2 sweep's judging (PointsTable.judging, key_axes, iteration_times)."""
    t = sweep.type
    samples = ITERATION_SAMPLES.get(t, ())
    for m, col in sweep.metrics.columns.items():
        per_iteration = m in samples or (m == "iteration_time_s" and col.ndim > 2)
        sweep.judging[m] = {
            "direction": _direction(sweep.units.get(m), m),
            "judged": "headline" if m in HEADLINE.get(t, ()) else "no",
            "ranks": "each" if t in PER_DEVICE_TYPES else "limiting",
            "noise": _noise(t, m),
            "inner_axis": "iteration" if per_iteration else ("none" if col.ndim == 2 else "?"),
        }
    timed = [n for n in ("iteration_time_s",) + samples
             if n in sweep.metrics.columns and sweep.metrics.columns[n].ndim > 2]
    sweep.iteration_times = timed[-1] if timed else None
    size_key = sweep.key_with_units("B")
    if t in SIZED_TYPES and size_key:
        sweep.key_axes[size_key] = "message_size"
    if t == "memory":
        sweep.point_noise = _memory_point_noise(sweep)

