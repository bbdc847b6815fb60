"""What the Python end-to-end checks share (tests/e2e/e2e_checks.py,
tests/ring/check_ring_output.py, tests/analysis/e2e_analysis.py).

CTest runs each script as `python3 <script>` from any folder, so a script finds this module by
putting tests/ on sys.path from its own location:

    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    import harness

Exit codes follow CTest's: 0 pass, 1 fail, 77 skipped (SKIP_RETURN_CODE 77 in tests/*.cmake).
"""
import argparse
import glob
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

SKIPPED = 77

# Every failed check, in order; a script's exit code comes from it (exit_code()).
FAILURES = []
# A script whose log should also list what passed sets this (the analysis checks do: their
# log then reads as the list of what the report was checked for).
ECHO_PASSES = False


def h5py_and_numpy(echo_passes=False):
    """(h5py, numpy), or exits 77: a machine without them cannot read the files back.
    echo_passes: the script's log lists what passed too (ECHO_PASSES)."""
    global ECHO_PASSES
    ECHO_PASSES = ECHO_PASSES or echo_passes
    try:
        import h5py
        import numpy
    except ImportError as exc:  # Debian: python3-h5py python3-numpy
        print(f"SKIPPED: {exc}")
        sys.exit(SKIPPED)
    return h5py, numpy


def check(cond, what):
    """Records a failed check and goes on, so that one run reports every broken thing."""
    if not cond:
        FAILURES.append(what)
        print(f"FAIL: {what}", flush=True)
    elif ECHO_PASSES:
        print(f"ok:   {what}", flush=True)
    return cond


def exit_code():
    """The end of every script's main: 1 with the count of failed checks, else 0."""
    if FAILURES:
        print(f"{len(FAILURES)} check(s) failed")
        return 1
    print("all checks passed")
    return 0


def arg_parser(*, source=True):
    """The options CTest passes every script: the program, mpiexec, the work folder and, where
    the script reads the source tree (configs, docs, launch scripts), --source."""
    ap = argparse.ArgumentParser()
    ap.add_argument("--ringbench", required=True)
    ap.add_argument("--mpiexec", required=True)
    if source:
        ap.add_argument("--source", required=True)
    ap.add_argument("--workdir", required=True)
    return ap


def run_check(checks):
    """The main of a script of several checks (CHECK --ringbench ... --workdir DIR): a fresh
    work folder, then checks[CHECK](args); the exit code."""
    ap = arg_parser()
    ap.add_argument("check", choices=list(checks))
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    checks[args.check](args)
    return exit_code()


def run(cmd, timeout=300, env=None, **kw):
    """Runs cmd with its output captured; env adds to (does not replace) this environment."""
    print("+", " ".join(cmd), flush=True)
    e = dict(os.environ)
    e.update(env or {})
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=e, **kw)


# Test machines and containers often run as root; Open MPI refuses that unless told.
MPI_AS_ROOT = {"OMPI_ALLOW_RUN_AS_ROOT": "1", "OMPI_ALLOW_RUN_AS_ROOT_CONFIRM": "1"}


def rank_pids(mpirun_pid):
    """The ringbench processes mpirun started (its children)."""
    pids = []
    for entry in os.listdir("/proc"):
        try:
            with open(f"/proc/{entry}/stat") as f:
                parent = int(f.read().rsplit(")", 1)[1].split()[1])
            with open(f"/proc/{entry}/comm") as f:
                comm = f.read().strip()
        except (OSError, IndexError, ValueError):
            continue
        if parent == mpirun_pid and comm == "ringbench":
            pids.append(int(entry))
    return pids


class Signalled:
    """A run signalled mid-way: its stderr up to the marker (seen), the rest of its output, exit
    code, the seconds from the signal to its end, and whether it had to be killed after 60 s."""
    seen = stdout = stderr = ""
    returncode = None
    ranks = ()
    seconds = 0.0
    killed = False


def sigterm_at(cmd, env, marker, ranks, to_ranks=True):
    """Starts cmd (an mpirun of `ranks` ringbench ranks) in the background, reads its stderr
    until `marker` (at most 120 s), waits a second, sends SIGTERM to every rank (to_ranks) or to
    mpirun, and collects the rest: a Signalled. The caller checks what the run should have done."""
    print("+ (background)", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    r = Signalled()
    t0 = time.monotonic()
    while time.monotonic() - t0 < 120 and marker not in r.seen:
        line = p.stderr.readline()
        if not line:
            break
        r.seen += line
    time.sleep(1.0)
    r.ranks = rank_pids(p.pid)
    check(len(r.ranks) == ranks, f"found the {ranks} ranks: {r.ranks}")
    t_signal = time.monotonic()
    for pid in r.ranks if to_ranks else [p.pid]:
        os.kill(pid, signal.SIGTERM)
    try:
        r.stdout, r.stderr = p.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        r.stdout, r.stderr = p.communicate()
        r.killed = True
    r.returncode, r.seconds = p.returncode, time.monotonic() - t_signal
    print(f"ended {r.seconds:.1f} s after SIGTERM, exit code {p.returncode}")
    return r


def mpirun(args, ranks, cmd, timeout=300, per_rank_exit_dir=None, env=None):
    """Runs cmd on `ranks` ranks with args.mpiexec. With per_rank_exit_dir, each rank writes its
    own exit code to exit.<rank> there: mpiexec's own code says only that some rank failed."""
    full = [args.mpiexec, "-np", str(ranks), "--oversubscribe"]
    if per_rank_exit_dir:
        wrapper = ('"$0" "$@"; rc=$?; echo $rc > "%s/exit.$OMPI_COMM_WORLD_RANK"; exit $rc'
                   % per_rank_exit_dir)
        full += ["sh", "-c", wrapper] + cmd
    else:
        full += cmd
    e = {k: os.environ.get(k, v) for k, v in MPI_AS_ROOT.items()}
    e.update(env or {})
    return run(full, timeout=timeout, env=e)


def rank_exit_codes(directory):
    """{rank (text): exit code} from the exit.<rank> files mpirun(per_rank_exit_dir=...) left."""
    codes = {}
    for path in glob.glob(os.path.join(directory, "exit.*")):
        with open(path) as f:
            codes[path.rsplit(".", 1)[1]] = int(f.read().strip())
    return codes


# The ring checks' configs (tests/ring): one ring_attention sweep "ra" on the host path, the
# run named after the file's stem; the sweep's own keys follow.
RING_CONFIG_HEAD = """
run: {{name: {stem}, output_dir: {out}}}
backend: host
sweeps:
  - type: ring_attention
    name: ra
"""


def ringbench_on(args, ranks, config, stem, extra=(), timeout=300, tail=3000):
    """args.ringbench on `ranks` ranks with the config text written to WORKDIR/STEM.yaml, into
    WORKDIR/STEM.h5 (an old one removed first: a failed run must not leave the last run's file to
    check); the ends of its stdout and stderr printed. (result, output path)"""
    cfg = os.path.join(args.workdir, stem + ".yaml")
    out = os.path.join(args.workdir, stem + ".h5")
    with open(cfg, "w") as fh:
        fh.write(config)
    if os.path.exists(out):
        os.remove(out)
    res = mpirun(args, ranks, [args.ringbench, cfg, "--output", out, *extra], timeout=timeout)
    print(res.stdout[-tail:])
    print(res.stderr[-tail:], file=sys.stderr)
    return res, out


def run_in_workdir(args, check_fn):
    """check_fn(args, work) in a fresh folder under args.workdir named after args.check; the exit
    code. The folder is removed when every check passed and kept to look into when one failed."""
    os.makedirs(args.workdir, exist_ok=True)
    work = tempfile.mkdtemp(prefix=args.check + "_", dir=args.workdir)
    check_fn(args, work)
    code = exit_code()
    if code == 0:
        shutil.rmtree(work, ignore_errors=True)
    return code
