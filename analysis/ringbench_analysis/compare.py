"""compare: BASE.h5 NEW.h5 -> a verdict per matched point and an exit code.

Points are matched by sweep name and every key of the point (the datasets under
<sweep>/points/), never by position. By default the metrics the file marks as headline are
judged (`judged = headline`: ring attention's total time, collectives' bus bandwidth at message
sizes of at least --min-bytes, p2p bandwidth and latency, compute TFLOP/s, memory bandwidth,
kernel_tuning's pass times, contention's iteration times); --metric adds more. Whether higher is
better, how ranks combine and the noise class are the metric's attributes too (reader.py,
docs/hdf5-schema.md): nothing here is per sweep type. Each metric is judged on samples, not on
one number (compare_samples.py): per-iteration values reduced over ranks the way they limit the run
(`ranks = limiting`: the worst rank per iteration; `each`, a device measured on its own: every
rank's iterations), or per-rank values where the file keeps one number per rank. verdict.judge gives ok / faster /
warn / regression from a bootstrap interval of the change of a low quantile (verdict.QUANTILE)
NEW/BASE, and, with --history, the point's night-to-night noise (history.py).

Exit codes: 0 no regression; 1 at least one regression (a whole interval beyond the
tolerance, a point ok in BASE and failed/oom in NEW), or NEW is incomplete (its run did not
complete, a sweep did not finish or is missing, a metric BASE measured is missing: see
incomplete_new); 2 the comparison could not be made (missing or unusable file, no matched
point, unknown metric, or files that measure different work, unless allow_different).
"""
import dataclasses
import json
import math

import numpy as np

from . import compare_samples as CS, history as H, outfile, pointstats, reader, verdict as V

EXIT_OK, EXIT_REGRESSION, EXIT_ERROR = 0, 1, 2
DEFAULT_MIN_BYTES = 1 << 20

# /run config keys that name or place a run without changing what it measures.
NON_WORK_RUN_KEYS = ("name", "output_dir")


class CompareError(Exception):
    pass


def parse_tolerance(text, option="--tolerance"):
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
        raise CompareError(f"{option}: '{text}' is not a number or percentage (e.g. 5%)")
    if not (v >= 0 and math.isfinite(v)):
        raise CompareError(f"{option}: '{text}' must be a non-negative percentage")
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


def default_metrics(sweep):
    """What compare judges without --metric: the metrics the file marks as headline."""
    return sweep.headline_metrics()


def _label_keys(sweep):
    """Keys that vary within the sweep (matching uses all of them). ring_attention's `label`
    key repeats the others in words: shown only for a sweep of one point (no key varies)."""
    varying = [k for k in sweep.keys if sweep.points[k].nunique() > 1 and k != "label"]
    if varying:
        return varying
    return ["label"] if "label" in sweep.keys else list(sweep.keys)


def _skip_reasons(sweep, keys, min_bytes):
    """Per point, why it is not judged, or "": a message below --min-bytes, or a group of one
    rank (inter_node on one node, a ring of one: no link is measured)."""
    size_key = sweep.message_size_key()
    one_rank = np.zeros(sweep.npoints, dtype=bool)
    if sweep.type != "ring_attention" and "group_size" in sweep.metrics:
        one_rank = pointstats.over_ranks(sweep, "group_size", "max") <= 1
    return ["below --min-bytes" if min_bytes and size_key and float(k[size_key]) < min_bytes
            else "one-rank group" if one else "" for k, one in zip(keys, one_rank)]


def _points(run, metrics, min_bytes=0):
    """({(sweep, key tuple): record}, units, {reason: count of skipped points}).
    A record: status, sweep, label, and per metric its samples (None: not measured)."""
    out, units, skipped = {}, {}, {}
    for s in run.sweeps.values():
        names = [m for m in default_metrics(s) + list(metrics or []) if m in s.metrics]
        names = list(dict.fromkeys(names))
        shown = _label_keys(s)
        keys = pointstats.point_keys(s)
        status = pointstats.first_text(s, "status", ("", "ok"))
        per_metric = {m: CS.point_samples(s, m) for m in names}
        for p, why in enumerate(_skip_reasons(s, keys, min_bytes)):
            if why:
                skipped[why] = skipped.get(why, 0) + 1
                continue
            units.update({m: s.units.get(m, "") for m in names})
            rec = {"status": status[p] or "ok", "sweep": s.name,
                   "metrics": {m: x[p] if x[p].size else None for m, x in per_metric.items()}, "type": s.type,
                   "higher": {m: s.direction_of(m) > 0 for m in names},
                   "noise": {m: s.noise_of(m, p) for m in names},
                   "label": ", ".join(f"{k}={keys[p][k]}" for k in shown) or f"point {p}"}
            out[(s.name,) + tuple(keys[p].items())] = rec
    return out, units, skipped


def _work_config(run):
    """The parsed config minus what only names or places the run; None if unparsable."""
    try:
        import yaml
        doc = yaml.safe_load(run.config_text) or {}
    except Exception:  # no PyYAML or unreadable text: the caller says it could not check
        return None
    if isinstance(doc, dict) and isinstance(doc.get("run"), dict):
        doc["run"] = {k: v for k, v in doc["run"].items() if k not in NON_WORK_RUN_KEYS}
        if not doc["run"]:
            del doc["run"]
    return doc


def _diff(a, b, path="config"):
    """Paths where two parsed configs differ (lists by index, maps by key)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = []
        for k in list(a) + [k for k in b if k not in a]:
            out += _diff(a.get(k), b.get(k), f"{path}.{k}")
        return out
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in _diff(x, y, f"{path}[{i}]")]
    return [] if a == b else [f"{path}: {a!r} -> {b!r}"]


def comparability(base, new):
    """(differences, notes): what makes the two files measure different work (the config's
    work keys, world size, node count, GPU model), and what differs without changing the work
    (versions, commit, libraries)."""
    diffs, notes = [], []
    cb, cn = _work_config(base), _work_config(new)
    if cb is None or cn is None:
        notes.append("config_text could not be parsed: the configs were not compared")
    else:
        diffs += _diff(cb, cn)
    for what, b, n in (("world size", base.world_size, new.world_size),
                       ("node count", base.node_count, new.node_count),
                       ("GPU model", ", ".join(base.gpu_names()) or "none",
                        ", ".join(new.gpu_names()) or "none")):
        if b != n:
            diffs.append(f"{what}: {b} -> {n}")
    for key in ("ringbench_version", "git_commit", "backend"):
        b, n = base.attrs.get(key, "?"), new.attrs.get(key, "?")
        if b != n:
            notes.append(f"{key}: {b} -> {n}")
    for lib in sorted(set(base.libraries) | set(new.libraries)):
        b, n = base.libraries.get(lib, "-"), new.libraries.get(lib, "-")
        if b != n:
            notes.append(f"library {lib}: {b} -> {n}")
    return diffs, notes


def _float_or_none(x):
    return float(x) if x is not None and np.isfinite(float(x)) else None


def _shared_machine(base, new):
    """A sentence when either run's nodes gave more than SHARED_CPU_FRACTION of their CPU to
    other processes (/run foreign_cpu_fraction), else ""."""
    said = []
    for tag, r in (("base", base), ("new", new)):
        f = _float_or_none(r.attrs.get("foreign_cpu_fraction"))
        if f is not None and f > V.SHARED_CPU_FRACTION:
            said.append(f"{tag} {f:.0%}")
    return ("shared machine: other processes took " + ", ".join(said) + " of the nodes' CPU time "
            "during the run") if said else ""


def _check_metrics(base, new, metrics):
    known = set()
    for r in (base, new):
        for s in r.sweeps.values():
            known |= set(s.metrics)
    unknown = [m for m in metrics if m not in known]
    if unknown:
        raise CompareError(f"unknown metric(s) {', '.join(unknown)}; the files have: "
                           + ", ".join(sorted(known)))


def _judge_point(key, b, n, units, opts, hist):
    """Rows (dicts) of one matched point: its status change and one per metric."""
    rows = []
    base_row = {"sweep": b["sweep"], "point": b["label"]}
    if b["status"] == "ok" and n["status"] != "ok":
        rows.append(dict(base_row, metric="status", verdict=V.REGRESSION,
                         why=f"status {b['status']} -> {n['status']}"))
    for m, bs in b["metrics"].items():
        ns = n["metrics"].get(m)
        row = dict(base_row, metric=m, units=units.get(m, ""))
        hib = b["higher"][m]
        # The point's own night-to-night noise, never below the backend's run-to-run noise.
        noise = max(hist["noise"].get(key, {}).get(m) or 0.0, opts["run_noise_of"](b, m)) or None
        j = V.judge(bs, ns, opts["tolerance"], hib, opts["quantile"], noise) \
            if bs is not None and ns is not None else None
        if j is None:
            rows.append(dict(row, verdict="not measured"))
            continue
        row.update(j, base=float(V.statistic(bs, opts["quantile"], hib)),
                   new=float(V.statistic(ns, opts["quantile"], hib)), noise=noise)
        if hist["dates"]:
            row["history"] = [x[key][m] if m in x.get(key, {}) else None for x in hist["stats"]]
        rows.append(row)
    return rows


def _history(paths, last, base_path, base_run, bp, units, quantile, notes):
    """{dates, stats (per night), noise}: the nights of BASE's work among `paths` (history.py);
    nights of other work are left out and named in `notes`."""
    hist = {"dates": [], "stats": [], "noise": {}}
    if not paths:
        return hist
    series = {}
    for date, path in H.nights(paths, base_path, last):
        run = reader.load(path)
        diffs, _ = comparability(base_run, run)
        if diffs:
            notes.append(f"history: {path} left out (other work: {diffs[0]})")
            continue
        pts, _, _ = _points(run, list(units), 0)
        st = H.stats_of(pts, quantile)
        hist["dates"].append(date)
        hist["stats"].append(st)
        H.add_night(series, st)
    H.add_night(series, H.stats_of(bp, quantile))
    hist["noise"] = H.noise(series)
    notes.append(f"history: {len(hist['dates'])} earlier night(s) + base; noise known for "
                 f"{len(hist['noise'])} point(s) (>= {H.MIN_NIGHTS} nights)")
    return hist


def _best_of(side, repeats, units, quantile):
    """Each point's samples from the run where the point's statistic is best (the fastest
    time, the highest rate): one slow run of several is the machine, not the code. `side`:
    _points() of the side's first run, updated; `repeats`: _points() of its other runs."""
    for other in repeats:
        for key, rec in side.items():
            o = other.get(key)
            if o is None:
                continue
            for m, x in rec["metrics"].items():
                y = o["metrics"].get(m)
                if y is None or x is None:
                    continue
                hib = rec["higher"][m]
                sx, sy = V.statistic(x, quantile, hib), V.statistic(y, quantile, hib)
                if (sy > sx) if hib else (sy < sx):
                    rec["metrics"][m] = y


def _repeats(first, paths, metrics, min_bytes, units, tag):
    """_points() of each repeat run (paths: the same work as `first`, else CompareError)."""
    recs = []
    for path in paths:
        run = reader.load(path)
        diffs, _ = comparability(first, run)
        if diffs:
            raise CompareError(f"{tag} repeat {path} measures other work than the first {tag} "
                               f"file: {diffs[0]}")
        pts, u, _ = _points(run, metrics, min_bytes)
        units.update(u)
        recs.append(pts)
    return recs


@dataclasses.dataclass(frozen=True)
class Options:
    """What a comparison is asked (rb-analysis compare's options, docs/analysis.md#compare).
    json_to: "-" prints only the JSON document to stdout, a path writes it there. history:
    store dirs or earlier runs of BASE's work (the last `nights` of them); trend: print those
    nights for points matching it. run_noise: the run-to-run noise (sd of log) a regression
    must clear by NOISE_SIGMAS where history does not give more; None: verdict.RUN_NOISE of
    BASE's backend. base_repeats, new_repeats: more runs of the same work on each side (run
    back to back in the same night): each point is judged on the side's run where it was
    fastest. reference: a reference file (references.py) NEW's values must lie within."""
    tolerance: float = 0.05
    metrics: tuple = ()
    min_bytes: int = DEFAULT_MIN_BYTES
    allow_different: bool = False
    show_all: bool = False
    json_to: str = None
    quantile: float = V.QUANTILE
    history: tuple = ()
    nights: int = 10
    trend: str = None
    run_noise: float = None
    base_repeats: tuple = ()
    new_repeats: tuple = ()
    reference: str = None


def compare(base_path, new_path, options=None, out=print, **changes):
    """Prints the summary (and with show_all every row) of BASE against NEW as `options`
    (Options; `changes` override its fields, e.g. tolerance=0.1) ask. Returns the exit code."""
    o = dataclasses.replace(options or Options(), **changes)
    # One checking process for every file of the comparison (filecheck.py).
    reader.filecheck.check([base_path, new_path] + list(o.base_repeats) + list(o.new_repeats))
    base, new = reader.load(base_path), reader.load(new_path)
    ref = _reference(o.reference, new)
    metrics = list(o.metrics)
    run_noise = o.run_noise
    _check_metrics(base, new, metrics)
    if not 0.0 < o.quantile < 1.0:
        raise CompareError(f"--quantile {o.quantile}: must be between 0 and 1 (0.5 = medians)")
    text = (lambda *a, **k: None) if o.json_to == "-" else out
    diffs, notes = comparability(base, new)
    if diffs and not o.allow_different:
        raise CompareError("the files measure different work (--allow-different compares them "
                           "anyway):\n  " + "\n  ".join(diffs[:20]))
    bp, units, skipped = _points(base, metrics, o.min_bytes)
    np_, units2, skipped_new = _points(new, metrics, o.min_bytes)
    units.update(units2)
    for side, run, paths, tag in ((bp, base, o.base_repeats, "base"), (np_, new, o.new_repeats, "new")):
        _best_of(side, _repeats(run, paths, metrics, o.min_bytes, units, tag), units, o.quantile)
    if o.base_repeats or o.new_repeats:
        notes.append(f"repeats: base {1 + len(o.base_repeats)} run(s), new {1 + len(o.new_repeats)} run(s); "
                     "each point judged on each side's fastest run")
    matched = [k for k in bp if k in np_]
    if not matched:
        raise CompareError("no point of the two files matched (different sweeps or configs?); "
                           f"base has {len(bp)} point(s), new has {len(np_)}")
    hist = _history(o.history, o.nights, base_path, base, bp, units, o.quantile, notes)
    given = run_noise is not None
    backend = str(base.attrs.get("backend", ""))
    if given and run_noise < 0:
        raise CompareError(f"--run-noise {run_noise}: must be >= 0 (0: within-run noise only)")
    # By default each kind of point has its backend's run-to-run noise (verdict.RUN_NOISE: a
    # host ring point 1 %, a host p2p latency 45 %, a GPU's host<->device copy 5 %);
    # --run-noise sets one value for every point.
    shared = _shared_machine(base, new)
    source = "--run-noise" if given else "default"
    if shared and not given and backend == "host":
        # Host timings beside other work move whole sweeps: the quiet-machine noise does not hold.
        given, run_noise, source = True, V.SHARED_MACHINE_NOISE, "shared machine"
        notes.append(f"{shared}: judged with the shared-machine run-to-run noise "
                     f"{V.SHARED_MACHINE_NOISE:.0%} (--run-noise sets another)")
    elif shared:
        notes.append(shared)
    noise_of = (lambda rec, m: run_noise) if given else \
        (lambda rec, m: V.run_noise(backend, rec["noise"][m]))
    if not given:
        run_noise = V.run_noise(backend, "*")
    opts = {"tolerance": o.tolerance, "quantile": o.quantile, "run_noise_of": noise_of}
    rows = [r for k in matched for r in _judge_point(k, bp[k], np_[k], units, opts, hist)]
    incomplete = incomplete_new(base, new, bp, np_, matched)
    run_regression = incomplete[0] if incomplete and new.status != "complete" else ""
    _count_skipped(skipped, skipped_new, bp, np_)
    notes += [f"diff (allowed): {d}" for d in diffs]
    # NEW's unfinished parts are the verdict's `incomplete` lines; a failed sweep shows as its points.
    notes += [f"base: {line}" for line in base.problems()]
    code = EXIT_REGRESSION if (incomplete or any(r["verdict"] == V.REGRESSION for r in rows)
                               or (ref and ref["failures"])) else EXIT_OK
    doc = {"base": str(base_path), "new": str(new_path), "tolerance": o.tolerance,
           "quantile": o.quantile, "min_bytes": o.min_bytes, "history": hist["dates"],
           "run_noise": run_noise, "run_noise_default": not given, "run_noise_source": source,
           "runs": {"base": 1 + len(o.base_repeats), "new": 1 + len(o.new_repeats)},
           "run_noise_by_kind": None if given else V.RUN_NOISE.get(backend, {}),
           "shared_machine": shared,
           "foreign_cpu_fraction": {t: _float_or_none(r.attrs.get("foreign_cpu_fraction"))
                                    for t, r in (("base", base), ("new", new))},
           "backend": str(base.attrs.get("backend", "")),
           "exit_code": code, "counts": _counts(rows), "skipped": skipped,
           "run_regression": run_regression, "incomplete": incomplete, "notes": notes, "rows": rows,
           "reference": ref}
    _print_text(doc, base, new, text, o.show_all, bp, np_)
    if o.trend:
        for line in H.trend_lines(rows, hist["dates"], o.trend, lambda m: units.get(m, "")):
            text(line)
    _write_json(doc, o.json_to, out)
    return code


def _reference(path, new):
    """NEW against the reference file (None without one); an unusable file cannot compare."""
    if not path:
        return None
    from . import references as R  # references -> values -> compare: imported when used
    try:
        return R.check(path, new)
    except R.ReferenceFileError as e:
        raise CompareError(f"--reference {e}")


def incomplete_new(base, new, bp, np_, matched):
    """What NEW lacks to be judged whole, one line each: its run status, sweeps that did not
    finish or cannot be read, sweeps BASE has and NEW does not, and metrics BASE measured at
    points NEW ran (status ok) without a value. Any of them fails the comparison: a killed
    run measures less, and what it did not measure cannot be a regression."""
    out = []
    if new.status != "complete":
        why = f": {new.failure}" if new.failure else \
            " (killed, timed out or crashed?)" if new.status == "running" else ""
        out.append(f"run status '{new.status}'{why}")
    for s in new.sweeps.values():
        if s.status not in ("complete", "failed"):  # failed: it ended; its points say how
            out.append(f"sweep '{s.name}' ({s.type}) status '{s.status}': it did not finish"
                       + (f" ({s.cut_short()}; those are judged)" if s.cut_short() else ""))
    out += [f"sweep '{name}' unreadable: {why}" for name, why in new.unreadable.items()]
    out += [f"sweep '{name}' ({s.type}) is missing (BASE has it)" for name, s in base.sweeps.items()
            if name not in new.sweeps and name not in new.unreadable]
    return out + _unmeasured(new, bp, np_, matched)


def _unmeasured(new, bp, np_, matched):
    """Per sweep and metric: the points with a BASE value and none in NEW (NEW's status ok)."""
    missing = {}
    for k in matched:
        b, n = bp[k], np_[k]
        if n["status"] != "ok":
            continue  # a status regression already
        for m, x in b["metrics"].items():
            if x is not None and n["metrics"].get(m) is None:
                missing.setdefault((b["sweep"], m), []).append(b["label"])
    out = []
    for (sweep, m), labels in missing.items():
        if m not in new.sweeps[sweep].metrics:
            out.append(f"sweep '{sweep}' has no {m} (BASE has it)")
            continue
        shown = ", ".join(labels[:5]) + (f" and {len(labels) - 5} more" if len(labels) > 5 else "")
        out.append(f"sweep '{sweep}': {m} not measured at {len(labels)} point(s) BASE measured: {shown}")
    return out


def _count_skipped(skipped, skipped_new, bp, np_):
    skipped.update({"only in base": len([k for k in bp if k not in np_]),
                    "only in new": len([k for k in np_ if k not in bp])})
    for reason, n in skipped_new.items():  # the same points, counted once (new's count if larger)
        skipped[reason] = max(skipped.get(reason, 0), n)
    for k in [k for k, v in skipped.items() if not v]:
        del skipped[k]


def _write_json(doc, json_to, out):
    if json_to == "-":
        out(json.dumps(doc, indent=1, default=_jsonable))
    elif json_to:
        with outfile.replacing(json_to) as f:
            json.dump(doc, f, indent=1, default=_jsonable)


def _jsonable(v):
    if isinstance(v, np.generic):
        return v.item()
    raise TypeError(type(v).__name__)


def _counts(rows):
    counts = {v: 0 for v in V.VERDICTS + ("not measured",)}
    for r in rows:
        counts[r["verdict"]] = counts.get(r["verdict"], 0) + 1
    return counts


def _badness(r):
    return r.get("worse", math.inf if r["verdict"] == V.REGRESSION else 0.0)


def _print_text(doc, base, new, out, show_all, bp, np_):
    tol = doc["tolerance"]
    out(f"compare: base {doc['base']} (status {base.status}, {base.world_size} ranks)")
    out(f"         new  {doc['new']} (status {new.status}, {new.world_size} ranks)")
    q = doc["quantile"]
    stat = "medians" if q == 0.5 else f"p{100 * q:g} of times (p{100 * (1 - q):g} of rates)"
    out(f"tolerance {tol:.1%}; {V.LEVEL:.0%} bootstrap interval ({V.RESAMPLES} resamples) of the "
        f"change of {stat} NEW/BASE; times: slowest rank per iteration, rates: slowest rank "
        "(compute, memory: every rank)")
    rn, kinds = doc["run_noise"], doc.get("run_noise_by_kind")
    own = ", or the point's own night-to-night noise where larger" if doc["history"] else ""
    if kinds:
        where = f"{doc['backend']} path" if doc["backend"] else "run"
        out(f"run-to-run noise assumed for the {where} on a quiet machine (a regression must be "
            "beyond): " + ", ".join(f"{'other' if k == '*' else k.replace('_', ' ')} {v:.0%} "
                                    f"({(1 + tol) * V.noise_margin(v) - 1:+.0%})" for k, v in kinds.items())
            + own + f"; on a shared machine --run-noise {V.SHARED_MACHINE_NOISE:g}; "
            "docs/analysis.md#run-to-run-noise")
    elif rn:
        why = "set by --run-noise" if doc.get("run_noise_source") == "--run-noise" else \
            "a shared machine: see the note below"
        out(f"run-to-run noise {rn:.0%} ({why}): a regression must be beyond "
            f"{(1 + tol) * V.noise_margin(rn) - 1:+.0%}" + own + "; docs/analysis.md#run-to-run-noise")
    if doc["history"]:
        out(f"history: {len(doc['history'])} earlier night(s) ({doc['history'][0]} .. "
            f"{doc['history'][-1]}); a regression must also clear {V.NOISE_SIGMAS:g} x the "
            "point's night-to-night noise")
    out("verdicts: " + ", ".join(f"{k} {v}" for k, v in doc["counts"].items() if v or k in V.VERDICTS)
        + (f"; NEW incomplete: {len(doc['incomplete'])} (listed at the end)" if doc["incomplete"] else ""))
    out("skipped points: " + (", ".join(f"{k} {v}" for k, v in doc["skipped"].items()) or "none"))
    for line in doc["notes"]:
        out(f"note: {line}")
    rows = doc["rows"]
    worst = sorted([r for r in rows if r["verdict"] != "not measured"], key=_badness, reverse=True)
    out("")
    out("worst changes:" if not show_all else "every judged metric:")
    _print_table(rows if show_all else worst[:10], out)
    for title, keys, src in (("only in base (not compared)", [k for k in bp if k not in np_], bp),
                             ("only in new (not compared)", [k for k in np_ if k not in bp], np_)):
        if keys:
            out(f"\n{len(keys)} point(s) {title}:")
            for k in keys:
                out(f"  {src[k]['sweep']} {src[k]['label']} (status {src[k]['status']})")
    out("")
    _print_verdict(doc, rows, out)


def _print_verdict(doc, rows, out):
    """The last lines: reference failures and NEW's incomplete parts, then REGRESSION, FAIL
    (values outside their reference bounds, or NEW incomplete) or OK."""
    from . import references as R
    tol = doc["tolerance"]
    for line in R.lines(doc.get("reference")):
        out(line)
    ref_bad = (doc.get("reference") or {}).get("failures", 0)
    for line in doc["incomplete"]:
        out(f"NEW is incomplete: {line}")
    bad = [r for r in rows if r["verdict"] == V.REGRESSION]
    judged = (f"{len(rows)} judged metric(s) of {len(set((r['sweep'], r['point']) for r in rows))} "
              "matched point(s)")
    if bad:
        out(f"REGRESSION: {len(bad)} regression(s) beyond {tol:.1%}"
            + (" (and NEW is incomplete)" if doc["incomplete"] else "")
            + (f" (and {ref_bad} value(s) outside their reference bounds)" if ref_bad else "") + ":")
        for r in bad:
            what = _change(r) if "ratio" in r else r.get("why", r["verdict"])
            out(f"  {r['sweep']} {r['point']}: " + (f"{r['metric']} {what}" if "ratio" in r else what))
    elif ref_bad:
        out(f"FAIL: {ref_bad} value(s) outside their reference bounds ({doc['reference']['file']}); "
            f"{judged}, no regression beyond {tol:.1%} among them")
    elif doc["incomplete"]:
        out(f"FAIL: NEW is incomplete ({len(doc['incomplete'])} line(s) above), so it cannot pass; "
            f"{judged}, no regression beyond {tol:.1%} among them")
    else:
        out(f"OK: {judged}, no regression beyond {tol:.1%}")


def _change(r):
    """'+20.0% [+18.1%, +22.3%]' (NEW/BASE - 1 with its interval), or the status change."""
    if "ratio" not in r:
        return r.get("why", r["verdict"])
    return f"{r['ratio'] - 1:+.1%} [{r['lo'] - 1:+.1%}, {r['hi'] - 1:+.1%}]"


def _num(v):
    if v is None:
        return "-"
    return f"{v:.4g}"


def _print_table(rows, out):
    if not rows:
        out("(no judged metrics)")
        return
    noisy = any(r.get("noise") for r in rows)
    headers = ["sweep", "point", "metric", "base", "new", "change [95% CI]", "n", "CV"] + \
        (["noise"] if noisy else []) + ["verdict"]
    cells = [[r["sweep"], r["point"], r["metric"], _num(r.get("base")), _num(r.get("new")),
              _change(r) if r["verdict"] != "not measured" else "",
              f"{r['n_base']}/{r['n_new']}" if "n_base" in r else "",
              f"{r['cv_base']:.1%}/{r['cv_new']:.1%}" if "cv_base" in r else ""] +
             ([f"{r['noise']:.1%}" if r.get("noise") else "-"] if noisy else []) +
             [r["verdict"].upper() if r["verdict"] in (V.REGRESSION, V.WARN) else r["verdict"]]
             for r in rows]
    widths = [max(len(str(h)), *(len(str(c[i])) for c in cells)) for i, h in enumerate(headers)]
    out("  ".join(str(h).ljust(w) for h, w in zip(headers, widths)))
    out("  ".join("-" * w for w in widths))
    for c in cells:
        out("  ".join(str(x).ljust(w) for x, w in zip(c, widths)))
