"""A small baseline store (baseline.py's layout) of synthetic nights, for the trend page's tests:
a baseline, recorded nights around it with a few percent of noise, a second baseline promoted
later, and one night whose ring points are SLOW times slower (recorded as the nightly never
would: the trend page must mark it). Nights 0-2 have a nightly folder beside their file with a
report, compare.txt and verdict.txt, as slurm/nightly.sbatch leaves them."""
import datetime
import os

import synthetic
from ringbench_analysis import baseline

NIGHTS = 12
PROMOTED = (0, 6)     # nights promoted as baselines (the others recorded as nights)
SLOW_NIGHT = 9
SLOW = 1.5


def make_store(root, nights=NIGHTS, slow_night=SLOW_NIGHT, slow=SLOW, report=None):
    """Writes ROOT/store and ROOT/nightly_<n>/nightly.h5; returns the store path. report: a
    function(run path, report dir) writing a night's report (nights 0-2), None for none."""
    store = os.path.join(root, "store")
    start = datetime.datetime(2026, 11, 1, 2, 0, tzinfo=datetime.timezone.utc)
    for n in range(nights):
        night_dir = os.path.join(root, f"nightly_{n}")
        os.makedirs(night_dir, exist_ok=True)
        path = synthetic.make_noisy_run(os.path.join(night_dir, "nightly.h5"), world=2, iterations=20,
                                        noise=0.02, seed=n, factor=slow if n == slow_night else 1.0,
                                        ring_sizes=[1, 2])
        if n < 3:
            for name, text in (("compare.txt", "verdicts: ok\n"), ("verdict.txt", "nightly: VERDICT 0\n")):
                with open(os.path.join(night_dir, name), "w") as f:
                    f.write(text)
            if report:
                report(path, os.path.join(night_dir, "report"))
        when = start + datetime.timedelta(days=n)
        (baseline.promote if n in PROMOTED else baseline.record)(path, store, now=when)
    return store
