"""tune_cp: `rb-analysis tune-cp` (ring_attention sweeps that ran several schemes -> the CP
policy file `scheme: auto` follows, through `cp_policy:`). docs/analysis.md, tune-cp.

A CP shape is what the scheme choice may depend on besides the sequence: dtype, head dim, heads,
K/V heads, causal, layout, dilation, ring size and span (the group inside one node or across
nodes). Its grid axis is tokens per rank (S / ring size). The decision is tuning.decide's (the
parity gate, the safety margin over the default, hysteresis), with the ring as the default
everywhere: the scheme `scheme: auto` runs without a policy. The C++ reader and lookup are
src/sweeps/cp_policy.cpp.
"""
import math
import sys

import numpy as np
import pandas as pd

from . import pointstats, reader, tune, tuning

CP_KEYS = ("dtype", "head_dim", "num_heads", "num_kv_heads", "causal", "layout", "dilation",
           "ring_size", "span")
POLICY_KIND = "ringbench-cp-policy"
POLICY_VERSION = 1
DEFAULT_SCHEME = "ring"  # the built-in rule of scheme: auto
SWEEP_TYPE = "ring_attention"


def dilation_text(segments, rates):
    """As ringbench's cp_dilation_text: `none`, or `2048/1, 4096/2`."""
    segments = [int(s) for s in np.atleast_1d(segments if segments is not None else [])]
    rates = [int(r) for r in np.atleast_1d(rates if rates is not None else [])]
    if not segments:
        return "none"
    return ", ".join(f"{s}/{rates[i] if i < len(rates) else 1}" for i, s in enumerate(segments))


def candidate(scheme, degree):
    """The name a scheme runs under in the decision: hybrid carries its degree (hybrid:2)."""
    return f"hybrid:{int(degree)}" if scheme == "hybrid" else str(scheme)


def _sweep_rows(sweep):
    a, pts = sweep.attrs, sweep.points
    heads = int(a.get("num_heads", 0))
    base = {"head_dim": int(a.get("head_dim", 0)), "num_heads": heads,
            "num_kv_heads": int(a.get("num_kv_heads", heads)), "causal": bool(int(a.get("causal", 0))),
            "dilation": dilation_text(a.get("segment_lengths"), a.get("dilation_rates"))}
    # The slowest rank's median over iterations, and the status, of every point at once.
    time_s = pointstats.over_ranks(sweep, "total_time_s", "max")
    status = pointstats.first_text(sweep, "status", ("", "ok"))
    rows = []
    for p in range(sweep.npoints):
        asked = str(pts["scheme_asked"].iloc[p]) if "scheme_asked" in pts else str(pts["scheme"].iloc[p])
        if asked == "auto":  # a repeat of a named scheme's measurement, chosen by a policy
            continue
        if "ulysses_head_groups" in pts and int(pts["ulysses_head_groups"].iloc[p]) > 1:
            continue  # a policy names a scheme, not its head groups: auto runs the sweep's own
        R = int(pts["ring_size"].iloc[p])
        nodes = sweep.metrics["ring_nodes"][:, p] if "ring_nodes" in sweep.metrics else [1]
        rows.append(base | {
            "dtype": str(pts["dtype"].iloc[p]), "layout": str(pts["layout"].iloc[p]), "ring_size": R,
            "span": "nodes" if np.nanmax(np.asarray(nodes, dtype=float)) > 1 else "node",
            "block_rows": int(pts["seq_len"].iloc[p]) // R,
            "path": candidate(pts["scheme"].iloc[p], pts["ulysses_degree"].iloc[p]),
            "default_path": DEFAULT_SCHEME,
            "time_s": float(time_s[p]), "parity_ok": status[p] in ("", "ok")})
    return rows


def measurements(run, names=None):
    """One row per (CP shape, tokens per rank, scheme) of the run's ring_attention sweeps (all,
    or those named), in tuning.decide's columns: block_rows = tokens per rank, path = scheme."""
    sweeps = [s for s in run.sweeps_of_type(SWEEP_TYPE) if names is None or s.name in names]
    missing = [n for n in (names or []) if n not in {s.name for s in sweeps}]
    if missing:
        raise tune.TuneError(f"{run.path}: no ring_attention sweep named {', '.join(missing)}")
    rows = [r for s in sweeps if "scheme" in s.keys for r in _sweep_rows(s)]
    frame = pd.DataFrame(rows)
    if frame.empty or frame.groupby(list(CP_KEYS) + ["block_rows"])["path"].nunique().max() < 2:
        raise tune.TuneError(f"{run.path}: no point was run under two or more schemes (give the "
                             "ring_attention sweep a list, e.g. scheme: [ring, allgather, ulysses])")
    return frame


def read_policy(path):
    """A CP policy file's dict (its kind and version checked; ringbench checks the rest)."""
    try:
        import yaml
        with open(path) as f:
            d = yaml.safe_load(f)
    except (OSError, ImportError) as exc:
        raise tune.TuneError(f"{path}: cannot read ({exc})") from None
    except RecursionError:
        raise tune.TuneError(f"{path}: not a CP policy file (YAML nested too deeply)") from None
    if not isinstance(d, dict) or d.get("kind") != POLICY_KIND or d.get("version") != POLICY_VERSION:
        raise tune.TuneError(f"{path}: not a CP policy file (kind {POLICY_KIND}, version {POLICY_VERSION})")
    return d


def lookup(policy, shape, tokens):
    """The scheme (and ulysses degree) ringbench runs under `scheme: auto` for a CP shape (a
    tuple in CP_KEYS order) at `tokens` per rank, or None for the built-in ring: the rule of the
    shape; inside a range its scheme, between two the nearer by ratio (a tie: the lower); beyond
    the rule's ranges by more than a factor 2, or a null scheme: None. The C++ rule
    (CpPolicy::pick) restated, so tests can predict a run."""
    for rule in policy.get("rules", []):
        if tuple(rule[k] for k in CP_KEYS) != tuple(shape):
            continue
        ranges = rule["ranges"]
        if tokens < ranges[0]["tokens_min"] / 2 or tokens > ranges[-1]["tokens_max"] * 2:
            return None

        def distance(r):
            lo, hi = r["tokens_min"], r["tokens_max"]
            return math.log2(lo / tokens) if tokens < lo else math.log2(tokens / hi) if tokens > hi else 0.0
        best = min(ranges, key=distance)  # min keeps the first (lower) of equal distances
        if best["scheme"] is None:
            return None
        return best["scheme"], best.get("ulysses_degree", shape[CP_KEYS.index("ring_size")]
                                        if best["scheme"] == "ulysses" else 1)
    return None


def policy_picks(policy, frame):
    """What `scheme: auto` under `policy` would run at each (CP shape, tokens per rank) of a
    measurements() frame, against the fastest scheme that passed parity there: one row each
    with the pick, its time, the fastest and their ratio (pick / fastest; NaN where the pick
    was not measured or failed parity)."""
    rows = []
    for key, group in frame.groupby(list(CP_KEYS) + ["block_rows"], sort=True):
        shape, tokens = tuple(key[:-1]), int(key[-1])
        ok = group[group["parity_ok"]]
        picked = lookup(policy, shape, tokens)
        pick = candidate(*picked) if picked else DEFAULT_SCHEME
        mine = ok[ok["path"] == pick]["time_s"]
        fastest = ok.loc[ok["time_s"].idxmin()] if not ok.empty else None
        rows.append(dict(zip(CP_KEYS, shape), tokens=tokens, pick=pick,
                         pick_s=float(mine.iloc[0]) if not mine.empty else math.nan,
                         fastest=fastest["path"] if fastest is not None else None,
                         fastest_s=float(fastest["time_s"]) if fastest is not None else math.nan))
    out = pd.DataFrame(rows)
    out["ratio"] = out["pick_s"] / out["fastest_s"]
    return out


def _range(r):
    scheme, _, degree = (r.path or "").partition(":")
    out = {"tokens_min": int(r.rows_lo), "tokens_max": int(r.rows_hi), "scheme": scheme or None}
    if scheme == "hybrid":
        out["ulysses_degree"] = int(degree)
    out["default_scheme"] = DEFAULT_SCHEME
    out["speedup"] = (round(float(r.speedup_vs_default), 4)
                      if r.speedup_vs_default is not None and math.isfinite(r.speedup_vs_default) else None)
    return out


def policy_dict(choices, machine, margin, hysteresis, date, source, sweep):
    """tuning.choose()'s result on CP shapes -> the plain dict of the CP policy file."""
    rules = []
    for shape in sorted(choices, key=lambda s: tuple(str(v) for v in s)):
        rule = {k: tuning._plain(v) for k, v in zip(CP_KEYS, shape)}
        rule["causal"] = bool(rule["causal"])
        rule["ranges"] = [_range(r) for r in choices[shape]]
        rules.append(rule)
    return {"version": POLICY_VERSION, "kind": POLICY_KIND,
            "machine": {k: tuning._plain(machine.get(k)) for k in tuning.MACHINE_KEYS},
            "source": str(source), "sweep": sweep, "date": date, "margin": float(margin),
            "hysteresis": int(hysteresis), "rules": rules}


def tune_cp(path, sweep_names, margin, hysteresis, out):
    """Reads the run, decides, writes the CP policy; returns the summary for the screen."""
    tune.check_settings(margin, hysteresis)
    run = reader.load(path)
    frame = measurements(run, sweep_names)
    try:
        decisions = tuning.decide(frame, None, margin, hysteresis, keys=CP_KEYS)
    except tuning.TuningError as exc:
        raise tune.TuneError(f"{path}: {exc}") from None
    choices = {shape: tuning.ranges_from(d) for shape, d in decisions.items()}
    names = sorted({s.name for s in run.sweeps_of_type(SWEEP_TYPE) if sweep_names is None or s.name in sweep_names})
    policy = policy_dict(choices, tune.machine_info(run), margin, hysteresis, tune.run_date(run),
                         path, ", ".join(names))
    tuning.write_policy_yaml(policy, out)
    return {"policy": out, "choices": choices,
            "ring": tuning.builtin_quality(frame, keys=CP_KEYS)}


def _range_text(r):
    tokens = f"{r.rows_lo}" if r.rows_lo == r.rows_hi else f"{r.rows_lo}..{r.rows_hi}"
    speed = (f" ({r.speedup_vs_default:.2f}x)" if r.path not in (None, DEFAULT_SCHEME)
             and math.isfinite(r.speedup_vs_default) else "")
    return f"{tokens} {r.path or 'none (no scheme passed parity)'}{speed}"


def print_summary(summary, stream=None):
    stream = stream or sys.stdout
    choices = summary["choices"]
    other = sum(1 for ranges in choices.values() for r in ranges if r.path not in (None, DEFAULT_SCHEME))
    print(f"tune-cp: {len(choices)} shape(s), {other} range(s) where another scheme beats the ring",
          file=stream)
    for shape, ranges in choices.items():
        print(f"  {tuning.shape_text(shape, CP_KEYS)}: tokens/rank "
              + " | ".join(_range_text(r) for r in ranges), file=stream)
    text = tuning.builtin_quality_text(summary["ring"], what="scheme", rows_name="tokens/rank")
    print(text.replace("built-in rule:", "ring only (the built-in rule):"), file=stream)
    print(f"policy: {summary['policy']}", file=stream)


def command(args):
    """`rb-analysis tune-cp`: exit 0 written, 2 unusable input or settings."""
    try:
        summary = tune_cp(args.file, args.sweep, args.safety_margin, args.hysteresis, args.out)
    except (tune.TuneError, reader.RingbenchFileError) as exc:
        print(f"rb-analysis tune-cp: {exc}", file=sys.stderr)
        return tune.EXIT_ERROR
    except OSError as exc:
        print(f"rb-analysis tune-cp: cannot write {exc.filename}: {exc.strerror}", file=sys.stderr)
        return tune.EXIT_ERROR
    print_summary(summary)
    return tune.EXIT_OK

