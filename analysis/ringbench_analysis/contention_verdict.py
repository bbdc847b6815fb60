"""Contention verdicts: one per (bound policy, shape) against concurrent_unbound, by the noise
rule of docs/analysis.md ("Contention"), as numbers and a sentence; with the number words
(time, CV, slowdown, shape label) the sentences and the report share.
"""
import math

from .contention_read import BOUND_PREFIX, KEYS, SHAPE_KEYS, UNBOUND
from .verdict import SHARED_CPU_FRACTION

# ---- the verdict rule (docs/analysis.md): a change counts only beyond the noise ----
Z = 2.0                 # how many combined standard errors a change must exceed
TIME_NOISE_FLOOR = 0.02  # ... and at least this relative change of the median time
CV_NOISE_FLOOR = 0.01    # ... and at least this absolute change of the CV
# No verdict at all when other processes took more than this share of the nodes' CPU time
# during the run (/run foreign_cpu_fraction): their load is mixed into every phase unevenly,
# so a binding's effect cannot be told from theirs. The value compare calls a shared machine
# (verdict.SHARED_CPU_FRACTION, 5 %: a quiet run on the 2-core VM measures 0.2-2.2 %).
FOREIGN_CPU_LIMIT = SHARED_CPU_FRACTION


def policy_of(phase):
    """'concurrent_bound:numa' -> 'numa'; other phases -> None."""
    return phase[len(BOUND_PREFIX):] if str(phase).startswith(BOUND_PREFIX) else None


def _median_se(cv, n):
    """Relative standard error of a median of n samples with this CV (normal samples:
    sqrt(pi/2) * sigma / sqrt(n))."""
    return 1.2533 * cv / math.sqrt(max(n, 1))


def _cv_se(cv, n):
    """Standard error of a sample CV (normal samples: cv / sqrt(2 (n - 1)))."""
    return cv / math.sqrt(max(2 * (n - 1), 1))


def fmt_pct(slowdown):
    """Slowdown 1.18 -> '18 %' (how much slower than alone)."""
    x = (slowdown - 1) * 100
    return f"{x:.0f} %" if abs(x) >= 10 or abs(x - round(x)) < 0.05 else f"{x:.1f} %"


def fmt_cv(v):
    """CV 0.1234 -> '0.12'; below 0.01 one significant digit ('0.004')."""
    return f"{v:.2f}" if v >= 0.01 else f"{v:.1g}"


def fmt_time(v):
    """Seconds 0.0123 -> '12.3 ms' (3 significant digits, s / ms / us / ns); '-' if not finite."""
    if v is None or not math.isfinite(v):
        return "-"
    for f, u in ((1, "s"), (1e-3, "ms"), (1e-6, "us")):
        if v >= f:
            return f"{v / f:.3g} {u}"
    return f"{v * 1e9:.3g} ns"


def shape_label(row, keys):
    """'triad', 'attention (flash, rows 8192)': a path or rows the workload lacks ("", 0) is left out."""
    vals = [f"rows {row[k]}" if k == KEYS["rows"] else str(row[k]) for k in keys
            if str(row[k]) not in ("", "0")]
    return vals[0] + (f" ({', '.join(vals[1:])})" if len(vals) > 1 else "") if vals else "?"


def _change(u, b):
    """(time state, CV state): 'better' | 'worse' | 'same' (within noise), and the numbers."""
    n = min(u["n"], b["n"])
    dt = b["median_s"] / u["median_s"] - 1
    band_t = max(TIME_NOISE_FLOOR, Z * math.hypot(_median_se(u["cv"], n), _median_se(b["cv"], n)))
    dcv = b["cv"] - u["cv"]
    band_cv = max(CV_NOISE_FLOOR, Z * math.hypot(_cv_se(u["cv"], n), _cv_se(b["cv"], n)))

    def state(d, band):
        return "better" if d < -band else "worse" if d > band else "same"
    return {"time": state(dt, band_t), "cv": state(dcv, band_cv), "time_change": dt,
            "time_band": band_t, "cv_change": dcv, "cv_band": band_cv}


def _clauses(u, b):
    """{metric: (from-to words, a -> b words)} for CV and slowdown (median time without alone)."""
    out = {"cv": (f"CV from {fmt_cv(u['cv'])} to {fmt_cv(b['cv'])}",
                  f"CV {fmt_cv(u['cv'])} -> {fmt_cv(b['cv'])}")}
    if math.isfinite(u["slowdown"]) and math.isfinite(b["slowdown"]):
        out["time"] = (f"slowdown from {fmt_pct(u['slowdown'])} to {fmt_pct(b['slowdown'])}",
                       f"slowdown {fmt_pct(u['slowdown'])} -> {fmt_pct(b['slowdown'])}")
    else:
        out["time"] = (f"median time from {fmt_time(u['median_s'])} to {fmt_time(b['median_s'])}",
                       f"median time {fmt_time(u['median_s'])} -> {fmt_time(b['median_s'])}")
    return out


def _not_judged(base, kind, why, sentence, u=None, b=None):
    """A verdict that judges nothing: helped None, no time/CV state; no_verdict: the kind of
    reason ('no_samples', 'same_as_unbound', 'foreign_load'), why: the reason in words."""
    out = dict(base, helped=None, no_verdict=kind, why=why, sentence=sentence, time=None, cv=None)
    if u is not None and b is not None:  # the numbers as measured, for the record
        out.update(unbound={k: u[k] for k in ("median_s", "cv", "slowdown")},
                   bound={k: b[k] for k in ("median_s", "cv", "slowdown")})
    return out


def foreign_words(fraction):
    """0.95 -> 'other processes took 95 % of the CPUs during the run'."""
    pct = fraction * 100
    return f"other processes took {pct:.0f} % of the CPUs during the run" if pct >= 9.5 else \
        f"other processes took {pct:.1f} % of the CPUs during the run"


def verdict(policy, shape, u, b, conditions=None):
    """The sentence and numbers for one bound policy against concurrent_unbound on one shape.
    Helped: CV or the median time (slowdown) improved beyond the noise and neither got worse
    beyond it; anything else 'did not help'. conditions (contention_stats.conditions): no
    verdict (helped None, `no_verdict` the reason) when the policy placed every rank as unbound
    ('same_as_unbound') or other processes took more than FOREIGN_CPU_LIMIT of the CPUs
    ('foreign_load')."""
    base = {"policy": policy, "shape": shape}
    conditions = conditions or {}
    for row, ph in ((u, UNBOUND), (b, BOUND_PREFIX + policy)):
        if not (row["ranks"] and math.isfinite(row["median_s"]) and math.isfinite(row["cv"])):
            why = f"{ph} has no timed iterations of it"
            return _not_judged(base, "no_samples", why,
                               f"{policy} binding: no verdict on {shape}: {why}.")
    alike = conditions.get("same_as_unbound") or {}
    if policy in alike:
        why = f"{policy} gave every rank the same CPUs as unbound"
        return _not_judged(base, "same_as_unbound", why, f"{policy} binding: no difference "
                           f"possible on {shape}: {why}{alike[policy]}.", u, b)
    foreign = conditions.get("foreign_cpu_fraction")
    if foreign is not None and foreign > FOREIGN_CPU_LIMIT:
        why = foreign_words(foreign)
        return _not_judged(base, "foreign_load", why, f"{policy} binding: no verdict on {shape}: "
                           f"{why}; rerun on a quiet node.", u, b)
    ch = _change(u, b)
    words = _clauses(u, b)
    order = ("cv", "time")
    better = [words[m][0] for m in order if ch[m] == "better"]
    worse = [words[m][0].replace(" from ", " rose from ", 1) for m in order if ch[m] == "worse"]
    same = [words[m][1] for m in order if ch[m] == "same"]
    noise = (f"; {' and '.join(same)} {'is' if len(same) == 1 else 'are'} within noise" if same else "")
    helped = bool(better) and not worse
    if helped:
        sentence = f"{policy} binding cut {' and '.join(better)} on {shape}{noise}."
    elif worse:
        fell = [w.replace(" from ", " fell from ", 1) for w in better]
        sentence = (f"{policy} binding did not help on {shape}: {' and '.join(worse)}"
                    + (f" while {' and '.join(fell)}" if fell else "") + f"{noise}.")
    else:
        sentence = f"{policy} binding did not help on {shape}: {' and '.join(same)} are within noise."
    return dict(base, helped=helped, no_verdict=None, why="", sentence=sentence, **ch,
                unbound={k: u[k] for k in ("median_s", "cv", "slowdown")},
                bound={k: b[k] for k in ("median_s", "cv", "slowdown")})


def verdicts(table, shape_keys=None, conditions=None):
    """One verdict per (bound policy, shape) against concurrent_unbound, policies in run order.
    table: summary(c); conditions: contention_stats.conditions(c) (without them nothing is
    known of foreign load or placement, and only the timings decide). [] without a
    concurrent_unbound phase or without bound phases."""
    shape_keys = shape_keys or [k for k in SHAPE_KEYS if k in table]
    phase = KEYS["phase"]
    unbound = {tuple(r[k] for k in shape_keys): r for _, r in table[table[phase] == UNBOUND].iterrows()}
    out = []
    for ph in dict.fromkeys(table[phase]):
        policy = policy_of(ph)
        if policy is None:
            continue
        for _, b in table[table[phase] == ph].iterrows():
            u = unbound.get(tuple(b[k] for k in shape_keys))
            if u is not None:
                out.append(verdict(policy, shape_label(b, shape_keys), u, b, conditions))
    return out
