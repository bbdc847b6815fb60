"""Earlier nights of the same work: each point's night-to-night noise and its trend.

`compare --history DIR|RUN.h5 ...` reads earlier runs of BASE's work: a baseline store
directory (baseline.py; the entries of BASE's machine kind, oldest first) or plain files.
Per point and metric it takes each night's statistic (verdict.statistic of that night's
samples) and, from at least MIN_NIGHTS of them (BASE included), the night-to-night noise: the
standard deviation of log(statistic). The verdict then asks a regression to clear the
tolerance by verdict.NOISE_SIGMAS of that noise (a point that moves 10 % from night to night
cannot call a 10 % change a regression); --trend prints the nights of chosen points.
Runs of other work than BASE (another config, world size, GPU model) are left out and named.
"""
import hashlib
import math
import os

import numpy as np

from . import verdict as V

MIN_NIGHTS = 3  # fewer nights give no usable spread: the verdict stays within-run


def _store_entries(store, base_path):
    """(date, path) of the store's entries of BASE's kind, oldest first."""
    from . import baseline
    kind = baseline.run_identity(base_path)["kind"]
    entries = baseline.read_index(store).get(kind, [])
    return [(e.get("date", "?"), os.path.join(store, e["file"])) for e in entries
            if os.path.isfile(os.path.join(store, e["file"]))]


def nights(paths, base_path, last):
    """(date, path) of the history runs named by `paths` (store dirs or .h5 files), the last
    `last` of them by date, without BASE itself (nor a byte-identical copy of it, as the
    store keeps of a promoted BASE)."""
    from . import reader
    found = []
    for p in paths:
        if os.path.isdir(p):
            found += _store_entries(p, base_path)
        else:
            found.append((str(reader.load(p).attrs.get("start_time", "?")), p))
    found = [(d, p) for d, p in found if not _same_file(p, base_path)]
    found.sort(key=lambda dp: dp[0])
    return found[-last:] if last else found


def _same_file(a, b):
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    if os.path.getsize(a) != os.path.getsize(b):
        return False
    return _sha256(a) == _sha256(b)


def _sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def stats_of(points, quantile):
    """{point key: {metric: statistic}} of one run's _points() records."""
    out = {}
    for key, rec in points.items():
        for m, x in rec["metrics"].items():
            if x is not None and x.size:
                out.setdefault(key, {})[m] = float(V.statistic(x, quantile, rec["higher"][m]))
    return out


def noise(series):
    """{key: {metric: sigma}} from {key: {metric: [statistic per night]}}: the standard
    deviation of log(statistic) over at least MIN_NIGHTS positive nights."""
    out = {}
    for key, per_metric in series.items():
        for m, vals in per_metric.items():
            v = np.asarray([x for x in vals if x is not None and x > 0], dtype=float)
            if v.size >= MIN_NIGHTS:
                out.setdefault(key, {})[m] = float(np.std(np.log(v), ddof=1))
    return out


def add_night(series, stats):
    for key, per_metric in stats.items():
        for m, v in per_metric.items():
            series.setdefault(key, {}).setdefault(m, []).append(v)


def trend_lines(rows, history_dates, pattern, units_of):
    """Text lines: per judged row whose 'sweep point metric' contains `pattern` (any case),
    the statistic of each history night, BASE and NEW, and the change of NEW from BASE."""
    pat = pattern.lower()
    lines = []
    for r in rows:
        if "history" not in r or pat not in f"{r['sweep']} {r['point']} {r['metric']}".lower():
            continue
        unit = units_of(r["metric"])
        lines.append(f"trend {r['sweep']} {r['point']} {r['metric']}"
                     + (f" ({unit})" if unit else "")
                     + (f", night-to-night noise {r['noise']:.1%}" if r.get("noise") else ""))
        for date, v in zip(history_dates, r["history"]):
            lines.append(f"  {date:<22} {_fmt(v)}")
        lines.append(f"  {'BASE':<22} {_fmt(r.get('base'))}")
        lines.append(f"  {'NEW':<22} {_fmt(r.get('new'))}  {r['ratio'] - 1:+.1%}  {r['verdict']}")
    return lines or [f"trend: no judged point matches '{pattern}'"]


def _fmt(v):
    return "-" if v is None or (isinstance(v, float) and math.isnan(v)) else f"{v:.4g}"
