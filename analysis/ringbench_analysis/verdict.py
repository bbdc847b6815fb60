"""Statistics of compare: a bootstrap confidence interval of the change NEW/BASE of one point,
and the verdict it gives against a tolerance and the point's night-to-night noise.

Samples are per-iteration (or, where a metric has one value per rank, per-rank) numbers of one
point. The statistic is a low quantile of the times (QUANTILE, default the 20th percentile;
for rates the matching high quantile): on a shared machine interference only ever adds time
(a neighbour's burst, a preempted rank), so the fast end of a point's iterations is what the
code costs, and it moves when the code gets slower. The median would move with every burst
that covers half the iterations. The ratio is always read as "how much worse": for times NEW/
BASE, for rates BASE/NEW, so 1.20 means 20 % worse in both.

Within one run, iterations are taken back to back, so their spread misses what changes from
one run to the next (which cores, which neighbours, the allocation's memory layout). A
regression must clear the tolerance by NOISE_SIGMAS of that run-to-run noise too: the point's
own, where the baseline's history gives it (history.py), and never less than the run-to-run
noise known for the run's backend and kind of point (RUN_NOISE; --run-noise sets one value).
"""
import math

import numpy as np

RESAMPLES = 2000
SEED = 20261123      # fixed: the same two files always give the same interval and verdict
MIN_SAMPLES = 5      # below this a bootstrap interval means little: at most a warning
LEVEL = 0.95
QUANTILE = 0.2       # of times (rates: 1 - QUANTILE); 0.5 = medians
NOISE_SIGMAS = 3.0   # night-to-night standard deviations a regression must clear

# Run-to-run noise by backend and kind of point (the class each metric's `noise` attribute names,
# and a memory point's noise_class): the standard deviation of the log change of
# the statistic between two back-to-back runs of a job on a quiet machine, where nothing
# better is known (docs/analysis.md#run-to-run-noise has the measurements).
#   host: 20 back-to-back pairs of the main job (inputs/small.yaml, 2 ranks) on this project's
#   2-core VM with nothing else running: ring attention 0.5-2.8 % by point, compute GEMMs
#   1.4-5 %, memory triad 23 %, p2p bandwidth 6-8 %, p2p latency (tiny messages) 40 %. Rounded
#   so that the largest change of those 20 pairs stays inside 3 sigma (+ tolerance); later
#   quiet series on the same VM moved more (ring up to 14 %: docs/analysis.md). Host
#   collectives were not measured (small.yaml's sizes are under --min-bytes): the shared-
#   machine value. A machine shared with other work moves whole sweeps 30-70 % between runs
#   (81 pairs measured under load): --run-noise 0.45 (SHARED_MACHINE_NOISE) there.
#   cuda: 21 back-to-back runs on one H100 (ring attention S=16K/32K, bf16 GEMM and TF32
#   8192^3, d2d and pinned h2d copies of 1 GiB): 0.1-0.8 % by metric, so 1 %; pinned h2d
#   copies, which cross PCIe and the host's memory, 4.3 % (up to +16 % between two runs).
SHARED_MACHINE_NOISE = 0.45
# A run whose nodes gave more than this share of their CPU time to other processes (or to the
# hypervisor: steal) ran on a shared machine (/run foreign_cpu_fraction): a quiet run of the
# main job on the 2-core VM measures 0.6-0.8 %, one beside two busy loops 50 %.
SHARED_CPU_FRACTION = 0.05
RUN_NOISE = {
    "host": {"ring": 0.01, "compute": 0.05, "memory": 0.25, "p2p_bandwidth": 0.08,
             "latency": 0.45, "*": SHARED_MACHINE_NOISE},
    "cuda": {"host_transfer": 0.05, "*": 0.01},
}
HOST_TRANSFER_NOISE = RUN_NOISE["cuda"]["host_transfer"]


def run_noise(backend, kind):
    """Run-to-run noise of a kind of point on a backend (0 when the backend is unknown)."""
    table = RUN_NOISE.get(backend, {})
    return table.get(kind, table.get("*", 0.0))


OK, FASTER, WARN, REGRESSION = "ok", "faster", "warn", "regression"
VERDICTS = (REGRESSION, WARN, FASTER, OK)  # worst first


def statistic(x, quantile=QUANTILE, higher_is_better=False, axis=None):
    """The point's value: the `quantile` of times, the 1 - `quantile` of rates (both the
    "fast" end). quantile 0.5 is the median either way."""
    return np.quantile(x, 1.0 - quantile if higher_is_better else quantile, axis=axis)


def bootstrap_ratio(base, new, quantile=QUANTILE, higher_is_better=False, resamples=RESAMPLES,
                    seed=SEED, level=LEVEL):
    """(stat(new)/stat(base), lower, upper) with a percentile bootstrap interval: both sample
    sets resampled with replacement, all resamples at once (one numpy draw each)."""
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    point = float(statistic(new, quantile, higher_is_better) /
                  statistic(base, quantile, higher_is_better))
    rng = np.random.default_rng(seed)
    mb = statistic(base[rng.integers(0, base.size, size=(resamples, base.size))], quantile,
                   higher_is_better, axis=1)
    mn = statistic(new[rng.integers(0, new.size, size=(resamples, new.size))], quantile,
                   higher_is_better, axis=1)
    tail = 100.0 * (1.0 - level) / 2.0
    lo, hi = np.percentile(mn / mb, [tail, 100.0 - tail])
    return point, float(lo), float(hi)


def noise_margin(noise):
    """Factor a change must clear beyond the tolerance, given the point's night-to-night
    standard deviation of log(statistic) (0 or None: unknown, no margin)."""
    return math.exp(NOISE_SIGMAS * noise) if noise else 1.0


def judge(base, new, tolerance, higher_is_better=False, quantile=QUANTILE, noise=None):
    """dict(ratio, lo, hi, worse, worse_lo, worse_hi, n_base, n_new, cv_base, cv_new, limit,
    verdict). cv_*: each side's coefficient of variation (the point's noise within the run).

    worse* are the "how much worse" ratios (1.0 = unchanged); limit = (1 + tolerance) x the
    noise margin. Verdicts:
      regression  the whole interval is beyond the limit (and >= MIN_SAMPLES each side)
      warn        the change is beyond 1 + tolerance but its interval is not beyond the
                  limit, or it is beyond with fewer than MIN_SAMPLES samples on a side (unless
                  separated())
      faster      the whole interval is better than (1 - tolerance) / margin
      ok          otherwise
    """
    base = np.asarray(base, dtype=float)
    new = np.asarray(new, dtype=float)
    base, new = base[np.isfinite(base)], new[np.isfinite(new)]
    if base.size == 0 or new.size == 0 or np.median(base) <= 0 or np.median(new) <= 0:
        return None
    ratio, lo, hi = bootstrap_ratio(base, new, quantile, higher_is_better)
    if higher_is_better:  # worse = base/new: the interval flips
        worse, worse_lo, worse_hi = 1.0 / ratio, 1.0 / hi, 1.0 / lo
    else:
        worse, worse_lo, worse_hi = ratio, lo, hi
    few = min(base.size, new.size) < MIN_SAMPLES
    margin = noise_margin(noise)
    limit = (1.0 + tolerance) * margin
    if (worse_lo > limit and not few) or \
            (few and separated(base, new, limit - 1.0, higher_is_better)):
        verdict = REGRESSION
    elif worse > 1.0 + tolerance:
        verdict = WARN
    elif worse_hi < (1.0 - tolerance) / margin and not few:
        verdict = FASTER
    else:
        verdict = OK
    return dict(ratio=ratio, lo=lo, hi=hi, worse=worse, worse_lo=worse_lo, worse_hi=worse_hi,
                n_base=int(base.size), n_new=int(new.size), cv_base=cv(base), cv_new=cv(new),
                limit=limit, verdict=verdict)


def cv(x):
    """Standard deviation / mean of the samples (0 for one sample)."""
    return float(np.std(x) / np.mean(x)) if x.size > 1 else 0.0


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
