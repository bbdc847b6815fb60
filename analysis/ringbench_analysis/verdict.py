"""Statistics of compare: a bootstrap confidence interval of the ratio of medians NEW/BASE,
and the verdict it gives against a tolerance.

Samples are per-iteration (or, where a metric has one value per rank, per-rank) numbers of one
point. The ratio is always read as "how much worse": for times (lower is better) NEW/BASE, for
rates (higher is better) BASE/NEW, so 1.20 means 20 % worse in both.
"""
import math

import numpy as np

RESAMPLES = 2000
SEED = 20261123      # fixed: the same two files always give the same interval and verdict
MIN_SAMPLES = 5      # below this a bootstrap interval means little: at most a warning
LEVEL = 0.95

OK, FASTER, WARN, REGRESSION = "ok", "faster", "warn", "regression"
VERDICTS = (REGRESSION, WARN, FASTER, OK)  # worst first


def bootstrap_ratio(base, new, resamples=RESAMPLES, seed=SEED, level=LEVEL):
    """(median(new)/median(base), lower, upper) with a percentile bootstrap interval: both
    sample sets resampled with replacement, all resamples at once (one numpy draw each)."""
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    point = float(np.median(new) / np.median(base))
    rng = np.random.default_rng(seed)
    mb = np.median(base[rng.integers(0, base.size, size=(resamples, base.size))], axis=1)
    mn = np.median(new[rng.integers(0, new.size, size=(resamples, new.size))], axis=1)
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(mn / mb, [tail, 100.0 - tail])
    return point, float(lo), float(hi)


def judge(base, new, tolerance, higher_is_better=False):
    """dict(ratio, lo, hi, worse, worse_lo, worse_hi, n_base, n_new, verdict).

    worse* are the "how much worse" ratios (1.0 = unchanged). Verdicts:
      regression  the whole interval is beyond 1 + tolerance (and >= MIN_SAMPLES each side)
      warn        the median ratio is beyond 1 + tolerance but the interval crosses it, or
                  it is beyond with fewer than MIN_SAMPLES samples on a side (unless separated())
      faster      the whole interval is better than 1 - tolerance
      ok          otherwise
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    base, new = base[np.isfinite(base)], new[np.isfinite(new)]
    if base.size == 0 or new.size == 0 or np.median(base) <= 0 or np.median(new) <= 0:
        return None
    ratio, lo, hi = bootstrap_ratio(base, new)
    if higher_is_better:  # worse = base/new: the interval flips
        worse, worse_lo, worse_hi = 1.0 / ratio, 1.0 / hi, 1.0 / lo
    else:
        worse, worse_lo, worse_hi = ratio, lo, hi
    few = min(base.size, new.size) < MIN_SAMPLES
    limit = 1.0 + tolerance
    if (worse_lo > limit and not few) or (few and separated(base, new, tolerance, higher_is_better)):
        verdict = REGRESSION
    elif worse > limit:
        verdict = WARN
    elif worse_hi < 1.0 - tolerance and not few:
        verdict = FASTER
    else:
        verdict = OK
    return dict(ratio=ratio, lo=lo, hi=hi, worse=worse, worse_lo=worse_lo, worse_hi=worse_hi,
                n_base=int(base.size), n_new=int(new.size), verdict=verdict)


def separated(base, new, tolerance, higher_is_better=False, alpha=1.0 - LEVEL):
    """With too few samples for a bootstrap: every NEW sample worse than every BASE sample by
    more than the tolerance, and that ordering unlikely by chance (exact Mann-Whitney: one of
    C(nb + nn, nb) equally likely orderings <= alpha; 3 against 3 is 1/20). A run of 3
    iterations 1000x slower is then a regression; 2 against 2 (1/6) never is."""
    if 1.0 / math.comb(base.size + new.size, base.size) > alpha:
        return False
    if higher_is_better:
        return bool(new.max() * (1.0 + tolerance) < base.min())
    return bool(new.min() > base.max() * (1.0 + tolerance))
