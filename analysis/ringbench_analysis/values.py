"""Each point's headline values, with their units and the statistic that made them: what
`rb-analysis export` writes and what a reference file (references.py) bounds.

The headline metrics are those the file marks `judged = headline` (the numbers a nightly
judges), plus ring attention's TFLOP/s per GPU, which the report derives. A point's value
follows the report's convention (docs/analysis.md, "The report"): each rank's median over its
inner axis (iterations), then the slowest rank (the largest time, the smallest rate), so an
exported number is the one the report prints.
"""
import hashlib
import os

import numpy as np

from . import pointstats, reader, results

# "total_tflops" of ring attention is the report's TFLOP/s per GPU (results.ring_extras), not
# the stored per-rank metric of that name.
RING_TFLOPS_DESCRIPTION = "forward + backward FLOPs per GPU per second of one iteration"
RING_TFLOPS_STATISTIC = ("per GPU: mean forward_flop over ranks x (1 + the sweep's backward factor) / "
                         "the slowest rank's median total_time_s (the report's TFLOP/s per GPU)")


def statistic(sweep, metric):
    """The words for how a point's value is made from the [world, P, ...] dataset."""
    if sweep.type == "ring_attention" and metric == "total_tflops":
        return RING_TFLOPS_STATISTIC
    over = "min over ranks" if sweep.direction_of(metric) > 0 else "max over ranks"
    inner = "median over iterations, " if sweep.metrics[metric].ndim > 2 else ""
    return inner + over


def value(sweep, metric, point):
    """The point's value of a headline metric (NaN where no rank measured it)."""
    return float(point_values(sweep, metric, (point, point + 1))[0])


def point_values(sweep, metric, span=None):
    """value() of each point of `span` (default every point), computed over them at once."""
    if sweep.type == "ring_attention" and metric == "total_tflops":
        return np.array([x["tflops_total"] for x in results.ring_extras(sweep, span)])
    return pointstats.over_ranks(sweep, metric, "min" if sweep.direction_of(metric) > 0 else "max", span=span)


def unit(sweep, metric):
    return "TFLOP/s" if sweep.type == "ring_attention" and metric == "total_tflops" \
        else sweep.units.get(metric, "")


def _one_rank(sweep):
    """Per point, a collective group of one rank: a local copy that measures no link (left out,
    as in the report and compare)."""
    if sweep.type == "ring_attention" or "group_size" not in sweep.metrics:
        return np.zeros(sweep.npoints, dtype=bool)
    return pointstats.over_ranks(sweep, "group_size", "max") <= 1


def point_keys(sweep, point):
    return {k: reader._py(sweep.points[k].iloc[point]) for k in sweep.keys}


def headline_metrics(sweep):
    """The sweep's exported metrics: its headline metrics, and ring attention's TFLOP/s per GPU
    where it has total times."""
    derived = ["total_tflops"] if sweep.type == "ring_attention" and "total_time_s" in sweep.metrics else []
    return sweep.headline_metrics() + derived


def records(run):
    """(one dict per (sweep, point, metric): sweep, sweep_type, point (keys), status, metric,
    value, unit, statistic, description; the count of one-rank collective points left out)."""
    out, left_out = [], 0
    for s in run.sweeps.values():
        metrics = headline_metrics(s)
        if not metrics:
            continue
        vals = {m: point_values(s, m) for m in metrics}
        one_rank = _one_rank(s)
        left_out += int(one_rank.sum())
        status = pointstats.first_text(s, "status", ("", "ok"))
        for p, keys in enumerate(pointstats.point_keys(s)):
            if one_rank[p]:
                continue
            for m in metrics:
                desc = (RING_TFLOPS_DESCRIPTION if m == "total_tflops" and s.type == "ring_attention"
                        else s.descriptions.get(m, ""))
                out.append({"sweep": s.name, "sweep_type": s.type, "point": keys, "status": status[p] or "ok",
                            "metric": m, "value": float(vals[m][p]), "unit": unit(s, m),
                            "statistic": statistic(s, m), "description": desc})
    return out, left_out


def gpu_model(run):
    """Rank 0's GPU model, "host" on the host path (as baseline.py's machine kind)."""
    names = run.ranks["gpu_name"] if "gpu_name" in run.ranks else []
    return str(names[0]).strip() if len(names) and str(names[0]).strip() else "host"


def config_sha256(run):
    """baseline.config_hash of the run's config (run.name and run.output_dir left out), so an
    export joins the baseline store's machine kinds; without PyYAML, the text's own sha256."""
    from . import baseline
    try:
        return baseline.config_hash(run.config_text)
    except (ImportError, baseline.BaselineError):
        return hashlib.sha256(run.config_text.encode()).hexdigest()


def labels(run, path):
    """The run's labels: where (file, machine) and what built it (versions, commit, config)."""
    from . import baseline
    gpu, cfg = gpu_model(run), config_sha256(run)
    hosts = run.ranks["hostname"] if "hostname" in run.ranks else []
    return {"file": os.path.basename(path), "gpu": gpu,
            "host": str(hosts[0]) if len(hosts) else "",
            "backend": str(run.attrs.get("backend", "")), "nodes": run.node_count,
            "ranks": run.world_size,
            "machine_kind": baseline._identity(gpu, run.node_count, cfg, "")["kind"],
            "ringbench_version": str(run.attrs.get("ringbench_version", "")),
            "git_commit": str(run.attrs.get("git_commit", "")), "config_sha256": cfg,
            "start_time": str(run.attrs.get("start_time", "")), "run_status": run.status}
