"""compare: BASE.h5 NEW.h5 -> a table of matched points and a verdict (the exit code).

Points are matched by sweep name and every key of the point (the datasets under
<sweep>/points/: seq_len, ring_size, layout, ... or operation, group, message size), never by
position. Per point, each metric is reduced over ranks the way it limits the run: times by
the slowest rank (max), rates (B/s, TFLOP/s, Hz) by the slowest rank (min), memory by the
largest rank (max); per-iteration samples are first reduced to each rank's median. A metric
regressed when it got worse by more than the tolerance: times and memory up, rates down.

Exit codes: 0 no regression; 1 at least one regression (a metric beyond the tolerance, or a
point that was ok in BASE and is failed/oom in NEW, or NEW's run failed where BASE's did
not); 2 the comparison could not be made (missing or unusable file, no matched point,
unknown metric).
"""
import math

from . import reader

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2


class CompareError(Exception):
    pass


def parse_tolerance(text):
    """'5%' -> 0.05, '0.05' -> 0.05, '5' -> 0.05 (a bare number above 1 is a percentage)."""
    s = str(text).strip()
    try:
        if s.endswith("%"):
            v = float(s[:-1]) / 100.0
        else:
            v = float(s)
            if v >= 1.0:
                v /= 100.0
    except ValueError:
        raise CompareError(f"--tolerance: '{text}' is not a number or percentage (e.g. 5%)")
    if not (v >= 0 and math.isfinite(v)):
        raise CompareError(f"--tolerance: '{text}' must be a non-negative percentage")
    return v


def parse_bytes(text):
    """'1048576', '64KiB', '1MiB', '2GiB' (as the config's byte sizes) -> int."""
    t = str(text).strip().replace(" ", "")
    for suffix, f in (("KiB", 1 << 10), ("MiB", 1 << 20), ("GiB", 1 << 30), ("B", 1)):
        if t.endswith(suffix):
            t, factor = t[:-len(suffix)], f
            break
    else:
        factor = 1
    if not t.isdigit():
        raise CompareError(f"--min-bytes: '{text}' is not a byte size (e.g. 1048576, 64KiB, 1MiB)")
    return int(t) * factor


def direction(units, name):
    """+1 when higher is better (rates), -1 when lower is better (times, memory), 0 when the
    metric is not a performance number (counts, errors, sizes)."""
    if units in reader.RATE_UNITS:
        return +1
    if units == "s":
        return -1
    if units == "B" and "memory" in name:
        return -1
    return 0


def default_metrics(sweep):
    """What compare looks at without --metric: scalar performance metrics and the
    per-iteration time samples; not the reference check's own time."""
    names = [m for m in sweep.scalar_metrics() if direction(sweep.units.get(m), m)]
    names += sweep.iteration_samples()
    return [m for m in names if "parity" not in m]


def _label_keys(sweep):
    """Keys that vary within the sweep (matching uses all of them). ring_attention's `label`
    key repeats the others in words, so it is not shown."""
    varying = [k for k in sweep.keys if sweep.points[k].nunique() > 1 and k != "label"]
    return varying or [k for k in sweep.keys if k != "label"]


def _points(run, metrics, min_bytes=0):
    """{(sweep, key tuple): {"status", "label", "sweep", metric: value}} for every point.
    Points with a message size below min_bytes are left out: latency-bound sizes move by tens
    of percent between two allocations of the same machine, so a nightly check that keeps
    them cries wolf."""
    out, units = {}, {}
    for s in run.sweeps.values():
        names = [m for m in (metrics or default_metrics(s)) if m in s.metrics]
        size_key = s.key_with_units("B")
        shown = _label_keys(s)
        for p in range(s.npoints):
            keys = {k: reader._py(s.points[k].iloc[p]) for k in s.keys}
            if min_bytes and size_key and float(keys[size_key]) < min_bytes:
                continue
            rec = {"status": s.point_status(p), "sweep": s.name,
                   "label": ", ".join(f"{k}={keys[k]}" for k in shown) or f"point {p}"}
            for m in names:
                d = direction(s.units.get(m), m) or -1
                units[m] = s.units.get(m, "")
                v = s.rank_values(m, p)
                rec[m] = (float(v.min()) if d > 0 else float(v.max())) if v.size else None
            out[(s.name,) + tuple(keys.items())] = rec
    return out, units


def compare(base_path, new_path, tolerance=0.05, metrics=None, out=print, min_bytes=0):
    base, new = reader.load(base_path), reader.load(new_path)
    metrics = list(metrics or [])
    if metrics:
        known = set()
        for r in (base, new):
            for s in r.sweeps.values():
                known |= set(s.metrics)
        unknown = [m for m in metrics if m not in known]
        if unknown:
            raise CompareError(f"unknown metric(s) {', '.join(unknown)}; the files have: "
                               + ", ".join(sorted(known)))
    bp, units = _points(base, metrics, min_bytes)
    np_, units2 = _points(new, metrics, min_bytes)
    units.update(units2)
    matched = [k for k in bp if k in np_]
    only_base = [k for k in bp if k not in np_]
    only_new = [k for k in np_ if k not in bp]
    regressions, rows = [], []
    for k in matched:
        b, n = bp[k], np_[k]
        if b["status"] == "ok" and n["status"] != "ok":
            regressions.append(f"{b['sweep']} {b['label']}: status {b['status']} -> {n['status']}")
            rows.append([b["sweep"], b["label"], "status", b["status"], n["status"], "", "REGRESSION"])
        for m in [m for m in b if m not in ("status", "label", "sweep")]:
            bv, nv = b.get(m), n.get(m)
            d = direction(units.get(m), m) or -1
            if bv is None or nv is None:
                rows.append([b["sweep"], b["label"], m, _num(bv), _num(nv), "", "not measured"])
                continue
            change = (nv - bv) / abs(bv) if bv != 0 else (0.0 if nv == bv else math.inf)
            worse = -change if d > 0 else change
            verdict = "ok"
            if worse > tolerance:
                verdict = "REGRESSION"
                regressions.append(f"{b['sweep']} {b['label']}: {m} {_num(bv)} -> {_num(nv)} "
                                   f"({change:+.1%}, tolerance {tolerance:.1%})")
            elif -worse > tolerance:
                verdict = "improved"
            rows.append([b["sweep"], b["label"], m, _num(bv), _num(nv), f"{change:+.1%}", verdict])

    out(f"compare: base {base_path} (status {base.status}, {base.world_size} ranks)")
    out(f"         new  {new_path} (status {new.status}, {new.world_size} ranks)")
    out(f"tolerance {tolerance:.1%}; times and memory: slowest/largest rank, rates: slowest rank")
    out("")
    _print_table(["sweep", "point", "metric", "base", "new", "change", "verdict"], rows, out)
    out("")
    for title, keys, src in (("only in base (not compared)", only_base, bp),
                             ("only in new (not compared)", only_new, np_)):
        if keys:
            out(f"{len(keys)} point(s) {title}:")
            for k in keys:
                out(f"  {src[k]['sweep']} {src[k]['label']} (status {src[k]['status']})")
            out("")
    if base.status == "complete" and new.status != "complete":
        regressions.append(f"new run status '{new.status}'" + (f": {new.failure}" if new.failure else ""))
    for r, tag in ((base, "base"), (new, "new")):
        for line in r.problems():
            out(f"note ({tag}): {line}")
    if not matched:
        raise CompareError("no point of the two files matched (different sweeps or configs?); "
                           f"base has {len(bp)} point(s), new has {len(np_)}")
    if regressions:
        out(f"REGRESSION: {len(regressions)} regression(s) beyond {tolerance:.1%}:")
        for r in regressions:
            out(f"  {r}")
        return EXIT_REGRESSION
    out(f"OK: {len(matched)} matched point(s), no metric regressed beyond {tolerance:.1%}")
    return EXIT_OK


def _num(v):
    if v is None:
        return "-"
    return f"{v:.4g}"


def _print_table(headers, rows, out):
    if not rows:
        out("(no matched metrics)")
        return
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    out("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    out("  ".join("-" * w for w in widths))
    for r in rows:
        out("  ".join(str(c).ljust(w) for c, w in zip(r, widths)))
