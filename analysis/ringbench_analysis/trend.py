"""rb-analysis trend STORE --out DIR: each headline metric of the nightly's baseline store over
its last nights, with the noise band compare judges against and the nights it would call a
regression (trend_html.py draws the page; this module computes what it shows).

The store (baseline.py) keeps, per machine kind, the promoted baselines and the recorded
nights (index.json, oldest first). Per point and headline metric (the file's headline metrics, the points
compare judges: --min-bytes as compare's) each entry's statistic is compare's (verdict.py: the
20th percentile of times, the 80th of rates) of the samples compare takes (compare_samples.py).
Each entry is judged as the nightly would have judged it: against the baseline that was current
then (the last one promoted at or before it; a baseline against the one before it), with the
tolerance and the point's noise: the larger of its night-to-night noise over the
HISTORY_NIGHTS entries before it and its baseline (history.noise, from history.MIN_NIGHTS of
them) and the backend's run-to-run noise (verdict.RUN_NOISE; the shared-machine noise where
either run shared its node). The band is what that judgement allows: from (1 - tolerance) /
margin to (1 + tolerance) x margin of the baseline's statistic (margin = exp(3 x noise));
beyond its worse edge, by the whole bootstrap interval, is a regression. Recorded nights passed
compare when the nightly recorded them, so a regression here means the noise or the baseline has
changed since (a promoted baseline is judged against the previous one, which is where a step
shows).
"""
import os

from . import baseline, compare, fmt, history as H, reader, verdict as V

DEFAULT_NIGHTS = 30
HISTORY_NIGHTS = 10  # as compare's --nights and the nightly's RB_NIGHTS default


class TrendError(Exception):
    pass


def role(entry):
    """'baseline' or 'night' (entries from before `baseline record` were all promotions)."""
    return entry.get("role") or "baseline"


def _reference(entries, i):
    """Index of the baseline entry i is judged against, or None: the last baseline at or
    before it; a baseline's own is the one before it."""
    for j in range(i - 1 if role(entries[i]) == "baseline" else i, -1, -1):
        if role(entries[j]) == "baseline":
            return j
    return None


def links(store, entry, out_dir):
    """{what: path relative to out_dir} of what the store and the nightly kept of an entry:
    the stored file, and the night's report, compare output and verdict where the nightly's
    folder (the entry's `source`) still has them."""
    found = {"file": os.path.join(store, entry["file"])}
    src = os.path.dirname(entry.get("source") or "")
    if src:
        for what, name in (("report", "report/report.html"), ("report", "report/report.md"),
                           ("compare", "compare.txt"), ("verdict", "verdict.txt")):
            if what not in found and os.path.isfile(os.path.join(src, name)):
                found[what] = os.path.join(src, name)
    return {k: os.path.relpath(os.path.abspath(v), os.path.abspath(out_dir)) for k, v in found.items()
            if os.path.isfile(v)}


def _readable(store, entries):
    """(entries whose file reads, [why each other one was left out]): a night's file removed
    or damaged by hand costs that night, not the page."""
    keep, left = [], []
    for e in entries:
        path = os.path.join(store, e.get("file", ""))
        try:
            if not os.path.isfile(path):
                raise reader.RingbenchFileError(f"{e.get('file')}: named in index.json, but missing")
            reader.filecheck.check([path])
            keep.append(e)
        except reader.RingbenchFileError as err:
            left.append(f"{e.get('date', '?')}: {err}")
    return keep, left


def _load(store, entries, wanted, min_bytes):
    """{entry index: (run, points, units)} of the entries in `wanted`, read once each."""
    out = {}
    for i in sorted(wanted):
        run = reader.load(os.path.join(store, entries[i]["file"]))
        pts, units, _ = compare._points(run, [], min_bytes)
        out[i] = (run, pts, units)
    return out


def _noise_of(rec, metric, backend, shared):
    """The run-to-run noise compare assumes for a point without history (verdict.RUN_NOISE)."""
    if shared and backend == "host":
        return V.SHARED_MACHINE_NOISE
    return V.run_noise(backend, rec["noise"][metric])


def _band(ref_stat, tolerance, noise, higher_is_better):
    """(low, high) edges of what the verdict calls neither a regression nor faster."""
    margin = V.noise_margin(noise)
    worse, better = (1.0 + tolerance) * margin, (1.0 - tolerance) / margin
    if higher_is_better:  # worse = base / new
        return ref_stat / worse, ref_stat / better
    return ref_stat * better, ref_stat * worse


def _night(i, entries, loaded, refs, key, metric, opts):
    """One entry's record of one point and metric (None where the entry has no value)."""
    run, pts, _ = loaded[i]
    rec = pts.get(key)
    x = rec["metrics"].get(metric) if rec else None
    if x is None:
        return None
    hib = rec["higher"][metric]
    out = {"date": entries[i].get("date", "?"), "commit": entries[i].get("commit", "?"),
           "role": role(entries[i]), "value": float(V.statistic(x, opts["quantile"], hib)),
           "cv": V.cv(x), "n": int(x.size), "verdict": "", "reference": None}
    j = refs[i]
    ref = loaded[j][1].get(key, {}).get("metrics", {}).get(metric) if j is not None else None
    if ref is None:
        return out
    shared = compare._shared_machine(loaded[j][0], run)
    noise = max(opts["noise"][i].get(key, {}).get(metric) or 0.0,
                _noise_of(rec, metric, opts["backend"], shared)) or None
    j_ = V.judge(ref, x, opts["tolerance"], hib, opts["quantile"], noise)
    if j_ is not None:
        ref_stat = float(V.statistic(ref, opts["quantile"], hib))
        out.update(verdict=j_["verdict"], reference=entries[j].get("date"), ref_value=ref_stat,
                   worse=j_["worse"], worse_lo=j_["worse_lo"], worse_hi=j_["worse_hi"], noise=noise,
                   limit=j_["limit"], band=_band(ref_stat, opts["tolerance"], noise, hib))
    return out


def _history_noise(window, loaded, refs, quantile, last=HISTORY_NIGHTS):
    """{entry index: {key: {metric: sigma}}}: per entry, the night-to-night noise compare would
    have had judging it: the `last` entries before it and its baseline (history.py: from
    MIN_NIGHTS of them). The entry itself is left out, so a slow night does not widen its own band."""
    stats = {i: H.stats_of(loaded[i][1], quantile)
             for i in set(window) | {j for j in refs.values() if j is not None}}
    out = {}
    for pos, i in enumerate(window):
        series = {}
        for j in sorted(set(window[max(0, pos - last):pos]) | ({refs[i]} if refs[i] is not None else set())):
            H.add_night(series, stats[j])
        out[i] = H.noise(series)
    return out


def kind_trend(store, kind, entries, out_dir, nights, tolerance, min_bytes, quantile):
    """The trend of one machine kind: its entries shown (with links) and one series per point
    and headline metric."""
    entries, left_out = _readable(store, sorted(entries, key=lambda e: e.get("date", "")))
    window = list(range(len(entries)))[-nights:] if nights else list(range(len(entries)))
    refs = {i: _reference(entries, i) for i in window}
    loaded = _load(store, entries, set(window) | {j for j in refs.values() if j is not None}, min_bytes)
    backend = str(loaded[window[-1]][0].attrs.get("backend", "")) if window else ""
    opts = {"tolerance": tolerance, "quantile": quantile, "backend": backend,
            "noise": _history_noise(window, loaded, refs, quantile)}
    keys = list(dict.fromkeys(k for i in window for k in loaded[i][1]))
    series = []
    for key in keys:
        rec = next(loaded[i][1][key] for i in window if key in loaded[i][1])
        units = next(loaded[i][2] for i in window if key in loaded[i][1])
        for metric in rec["metrics"]:
            pts = [_night(i, entries, loaded, refs, key, metric, opts) for i in window]
            if any(p is not None for p in pts):
                series.append({"sweep": rec["sweep"], "point": rec["label"], "metric": metric,
                               "units": units.get(metric, ""), "type": rec["type"],
                               "higher_is_better": rec["higher"][metric],
                               "nights": pts})
    shown = [dict(entries[i], role=role(entries[i]), links=links(store, entries[i], out_dir)) for i in window]
    return {"kind": kind, "backend": backend, "entries": shown, "total_entries": len(entries), "series": series,
            "left_out": left_out}


def collect(store, out_dir, nights=DEFAULT_NIGHTS, tolerance=0.05, min_bytes=compare.DEFAULT_MIN_BYTES,
            kinds=None, quantile=V.QUANTILE):
    """{store, nights, tolerance, quantile, min_bytes, kinds: [kind_trend]} of the store's
    kinds (or those named in `kinds`)."""
    if not os.path.isdir(store):
        raise TrendError(f"{store}: not a baseline store directory (rb-analysis baseline promote makes one)")
    try:
        idx = baseline.read_index(store)
    except baseline.BaselineError as e:
        raise TrendError(str(e))
    unknown = [k for k in kinds or [] if k not in idx]
    if unknown:
        raise TrendError(f"no kind {', '.join(unknown)} in {store}; it has: {', '.join(sorted(idx)) or 'none'}")
    names = [k for k in sorted(idx) if not kinds or k in kinds]
    found = [kind_trend(store, k, idx[k], out_dir, nights, tolerance, min_bytes, quantile) for k in names]
    found = [k for k in found if k["entries"]]
    if not found:
        raise TrendError(f"{store}: no readable baseline or night recorded yet")
    return {"store": store, "nights": nights, "tolerance": tolerance, "quantile": quantile,
            "min_bytes": min_bytes, "kinds": found}


def value_text(v, units):
    """A statistic with its unit, as the report writes it (fmt)."""
    if units == "s":
        return fmt.time(v)
    if units == "TFLOP/s":
        return f"{fmt.tflops(v)} TFLOP/s"
    if units in reader.RATE_UNITS:
        return fmt.si(v, units)
    return fmt.num(v, 4, f" {units}" if units else "")
