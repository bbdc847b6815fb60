#!/usr/bin/env python3
"""What the terminal shows (issue #16): each sweep's results table after a 2-rank host run of
inputs/small.yaml, with numbers equal to the HDF5 file's; --quiet; --json read back against
the file; the login-node dry-run (no mpirun) with its time estimate; bad --world-size values.
Issue #32 item 6: stdout within 100 columns (--wide: one line a row), progress on stderr, the
end-of-run summary, and --json - (the JSON alone on stdout, no file named '-').

One CTest entry per check (tests/e2e.cmake). Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import json
import os
import re
import shutil
import sys
import warnings

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()


def small_run(args, extra, json_to="small.json", streams=False, relative=False):
    """Runs inputs/small.yaml on 2 ranks in the work directory; (stdout, h5 path, json path),
    or with streams=True (stdout, stderr, h5 path, json path). relative: --output small.h5, as
    the README's job names results/small_<time>.h5 (the summary's lines hold the path)."""
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    os.chdir(args.workdir)  # where a relative --json path (or a stray file named '-') lands
    out = "small.h5" if relative else os.path.join(args.workdir, "small.h5")
    js = os.path.join(args.workdir, json_to)
    config = os.path.join(args.source, "inputs", "small.yaml")
    r = mpirun(args, 2, [args.ringbench, config, "--output", out, "--json", json_to] + extra, timeout=600)
    check(r.returncode == 0, f"the run succeeds: {r.stderr[-2000:]}")
    return (r.stdout, r.stderr, out, js) if streams else (r.stdout, out, js)


# A progress line: "HH:MM:SS sweep k/N [name] ..." or "HH:MM:SS [name] done in ...".
PROGRESS = re.compile(r"^\d\d:\d\d:\d\d (sweep \d+/\d+ )?\[", re.M)


def close(printed, value):
    """A printed number equals the file's value to the precision it was printed with."""
    if printed == "-":
        return not np.isfinite(value)
    if "e" in printed:  # 7.75e-07: three significant digits
        return abs(float(printed) - value) <= 0.005 * abs(value)
    decimals = len(printed.split(".")[1]) if "." in printed else 0
    return abs(float(printed) - value) <= 0.5 * 10 ** -decimals + 1e-9 * abs(value) + 1e-12


def table_rows(stdout, name, subtitle=None):
    """The rows of sweep `name`'s results table (or of the table under `subtitle` in it), split
    into cells (two spaces or more apart); the header and units lines are skipped."""
    lines = stdout.splitlines()
    start = [i for i, l in enumerate(lines) if l.startswith(f"== {name} ")]
    if not check(len(start) == 1, f"{name}: one results table on the screen"):
        return []
    first = start[0] + 1
    if subtitle:
        first = next(i for i in range(first, len(lines)) if lines[i].startswith(subtitle)) + 1
    rows = []
    for line in lines[first:]:
        if not line.strip() or not line.startswith("   "):
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return [r for r in rows if not r[0].startswith("(") and not r[0].startswith("-")][1:]


def per_point(ds, inner=None, ranks="max"):
    """The screen's statistic from a [world, P, ...] dataset: inner (median, sum or cv over the
    axes after P), then over ranks (slowest: the rank with the largest median)."""
    a = np.asarray(ds[()], dtype=float)
    if a.dtype.kind in "iu" or ds.dtype.kind in "iu":
        a = np.where(np.asarray(ds[()]) == -1, np.nan, a)
    if ranks == "slowest":
        flat = a.reshape(a.shape[0], a.shape[1], -1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            slow = np.nanargmax(np.nanmedian(flat, axis=2), axis=0)
        return per_point_of(flat[slow, np.arange(a.shape[1])][None], inner)[0]
    a = per_point_of(a, inner)
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN points stay NaN
        return {"max": np.nanmax, "min": np.nanmin, "mean": np.nanmean, "sum": np.nansum,
                "rank0": lambda x, axis: x[0]}[ranks](a, axis=0)


def per_point_of(a, inner):
    """[world, P, ...] -> [world, P]: the inner statistic over the axes after P."""
    if inner == "cv":
        flat = a.reshape(a.shape[0], a.shape[1], -1)
        with np.errstate(all="ignore"), warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            return np.nanstd(flat, axis=2, ddof=1) / np.nanmean(flat, axis=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # all-NaN points stay NaN
        if inner == "median":
            return np.nanmedian(a.reshape(a.shape[0], a.shape[1], -1), axis=2)
        if inner == "sum":
            return np.nansum(a.reshape(a.shape[0], a.shape[1], -1), axis=2)
    return a


def report_ring_figures(path, name):
    """Per point, rb-analysis report's TFLOP/s per GPU (forward, fwd+bwd) and exposed wait (%),
    from its own code (results.ring_extras, model._step_numbers): the screen must print the
    same numbers under the same names (issue #31, one number per name)."""
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__)))), "analysis"))
    from ringbench_analysis import model, reader, results  # noqa: E402  pylint: disable=import-outside-toplevel
    sweep = reader.load(path).sweeps[name]
    out = []
    for p, extra in enumerate(results.ring_extras(sweep)):
        exposed = model._step_numbers(sweep, p)[0]  # pylint: disable=protected-access
        out.append((extra["tflops_fwd"], extra["tflops_total"],
                    float("nan") if exposed is None else 100 * exposed))
    return out


def check_ring(stdout, f, name):
    g = f["sweeps"][name]
    rows = table_rows(stdout, name)
    fwd = per_point(g["forward_time_s"], "median") * 1e3
    report = report_ring_figures(f.filename, name)
    check(len(rows) == len(fwd), f"{name}: one row per point ({len(rows)} rows)")
    for i, row in enumerate(rows[:len(fwd)]):
        check(int(row[0]) == g["points/seq_len"][i], f"{name} row {i}: S")
        check(close(row[6], fwd[i]), f"{name} row {i}: fwd ms {row[6]} = file {fwd[i]}")
        for col, what, value in ((8, "fwd TFLOP/s/GPU", report[i][0]), (9, "fwd+bwd TFLOP/s/GPU", report[i][1]),
                                 (10, "exposed % of step", report[i][2])):
            check(close(row[col], value), f"{name} row {i}: {what} {row[col]} = the report's {value}")
        # parity and max rel err close every row; the overlap columns (#26) sit before them
        # when a ring travelled: hidden % (lowest rank) and kernel x alone (highest rank).
        check(row[-2] == g["status"][0, i].decode(), f"{name} row {i}: parity {row[-2]}")
        if len(row) == 15 and "overlap_efficiency" in g:
            hidden = per_point(g["overlap_efficiency"], None, "min")[i] * 100
            slow = per_point(g["kernel_slowdown"], None, "max")[i]
            if np.isnan(hidden):
                check(row[11] == "-", f"{name} row {i}: hidden {row[11]} where not measured")
            else:
                check(close(row[11].split("/")[0], hidden), f"{name} row {i}: hidden {row[11]} = file {hidden}")
                check(close(row[12].split("/")[0], slow), f"{name} row {i}: kernel x alone {row[12]} = file {slow}")


def check_collectives(stdout, f, name):
    g = f["sweeps"][name]
    busbw = per_point(g["busbw_Bps"], None, "min") / 1e9
    size = per_point(g["size_bytes"])
    key = {}
    for i in range(g.attrs["points"]):
        k = (g["points/operation"][i].decode(), g["points/group"][i].decode(),
             g["points/dtype"][i].decode(), int(size[i]), int(g["points/in_place"][i]))
        key[k] = i
    rows = [r for r in table_rows(stdout, name) if len(r) >= 15]
    check(len(rows) > 10, f"{name}: the nccl-tests table has rows ({len(rows)})")
    for row in rows:
        i = key.get((row[0], row[1], row[2], int(row[5]), 0))
        if check(i is not None, f"{name}: row {row[:6]} is a point of the file"):
            check(close(row[9], busbw[i]), f"{name} {row[:6]}: busbw {row[9]} = file {busbw[i]}")


def check_p2p(stdout, f, name):
    g = f["sweeps"][name]
    bw = per_point(g["bandwidth_Bps"], None, "min") / 1e9
    rows = table_rows(stdout, name, "  bandwidth (GB/s)")
    pairs = {(int(s), int(r)): i for i, (s, r) in
             enumerate(zip(g["points/sender"][()], g["points/receiver"][()])) if s >= 0}
    world = f["run"].attrs["world_size"]
    for a in range(world):
        row = rows[a]
        for b in range(world):
            if a != b:
                i = pairs[(a, b)]
                check(close(row[1 + b], bw[i]), f"{name}: bandwidth {a}->{b} {row[1 + b]} = {bw[i]}")


def check_rows_in_order(stdout, f, name, column, dataset, scale, ranks, inner=None):
    g = f["sweeps"][name]
    values = per_point(g[dataset], inner, ranks) * scale
    rows = table_rows(stdout, name)
    check(len(rows) == len(values), f"{name}: one row per point")
    for i, row in enumerate(rows[:len(values)]):
        check(close(row[column], values[i]), f"{name} row {i}: {row[column]} = file {values[i]}")


def tables(args):
    """--wide: one line a row, as nccl-tests prints, so each row is read whole."""
    stdout, stderr, out, _ = small_run(args, ["--wide"], streams=True)
    print(stdout[-6000:])
    with h5py.File(out, "r") as f:
        for name, g in f["sweeps"].items():
            kind = g.attrs["type"]
            if kind == "ring_attention":
                check_ring(stdout, f, name)
            elif kind == "collectives":
                check_collectives(stdout, f, name)
            elif kind == "p2p_matrix":
                check_p2p(stdout, f, name)
            elif kind == "host_pingpong":
                check_rows_in_order(stdout, f, name, 1, "one_way_time_s", 1e6, "max", "median")
            elif kind == "compute":
                check_rows_in_order(stdout, f, name, 4, "rate_tflops", 1.0, "min")
            elif kind == "memory":
                check_rows_in_order(stdout, f, name, 2, "bandwidth_Bps", 1e-9, "min")
            else:
                check(f"== {name} " in stdout, f"{name}: a results table")
    check(re.search(r"^\d\d:\d\d:\d\d sweep 1/\d+ \[", stderr, re.M) is not None,
          "progress lines (stderr) start with the time and the sweep number")
    check("run ETA ~" in stderr, "progress lines carry the run's ETA")
    check(max(len(line) for line in stdout.splitlines()) > 100, "--wide keeps rows whole (over 100 columns)")


def narrow(args):
    """The default screen: every stdout line within 100 columns (wide tables split into parts
    that repeat the key columns), progress and warnings on stderr, and a summary at the end."""
    stdout, stderr, out, _ = small_run(args, [], streams=True, relative=True)
    print(stdout[-3000:], stderr[-3000:], sep="\n")
    long = [line for line in stdout.splitlines() if len(line) > 100]
    check(not long, f"every stdout line within 100 columns ({len(long)} longer: {long[:3]})")
    check(not PROGRESS.search(stdout) and "run ETA" not in stdout and "writing " not in stdout,
          "no progress line on stdout")
    check(PROGRESS.search(stderr) is not None and "run ETA ~" in stderr and f"writing {out}" in stderr,
          "progress lines and 'writing FILE' on stderr")
    check("== " not in stderr, "no results table on stderr")
    with h5py.File(out, "r") as f:
        names = list(f["sweeps"].keys())
    for name in names:
        check(f"== {name} " in stdout, f"{name}: its results table on stdout")
    check(stdout.startswith("ringbench ") and "\nlibraries: " in stdout, "the header on stdout")
    # The ring table is about 150 columns wide: split, each part starting with S and R.
    ring = stdout[stdout.index("== ring_causal "):]
    ring = ring[:ring.index("\n\n== ")]
    check(len(re.findall(r"^\s+S\s+R\s+rings", ring, re.M)) >= 2, "the ring table in parts, S R first in each")
    check("not shown at this width: redop, root, count" in stdout, "collectives: the left-out columns named")
    summary(stdout, out)


def summary(text, out):
    """The end-of-run summary: the status line with the file, what stood out, the report command."""
    tail = text[text.rindex(f"complete: {out}"):] if f"complete: {out}" in text else ""
    check(tail != "", f"the summary names the file: complete: {out}")
    check(re.search(r"^  \d+ sweep\(s\), \d+ point\(s\) in .*; (nothing stood out|what stood out:)",
                    tail, re.M) is not None, "the summary counts sweeps and points and says what stood out")
    check(re.search(rf"^  report: rb-analysis report {re.escape(out)}( \\\n +)? --out \S+$", tail, re.M)
          is not None, "the summary says how to report the file")


def json_stdout(args):
    """--json -: stdout is the JSON document alone; no file named '-'; tables and summary on stderr."""
    stdout, stderr, out, _ = small_run(args, [], json_to="-", streams=True)
    print(stderr[-3000:])
    check(not os.path.exists(os.path.join(args.workdir, "-")), "no file named '-' is created")
    try:
        doc = json.loads(stdout)
    except ValueError as e:
        check(False, f"stdout is one JSON document: {e}: {stdout[:300]!r}")
        return
    check(doc["status"] == "complete" and doc["output_file"] == out, "the run's final status and file")
    check(len(doc["records"]) > 100, f"the records ({len(doc['records'])})")
    check("== ring_causal " in stderr and PROGRESS.search(stderr) is not None, "tables and progress on stderr")
    summary(stderr, out)


def quiet(args):
    stdout, out, _ = small_run(args, ["--quiet"])
    print(stdout)
    check("==" not in stdout and "point " not in stdout, "--quiet prints no tables or progress")
    check(stdout.strip() == f"complete: {out}", f"--quiet prints the final line only: {stdout[:500]!r}")


def json_values(args):
    _, out, js = small_run(args, [])
    with open(js) as fh:
        doc = json.load(fh)
    check(doc["status"] == "complete" and doc["ringbench_version"], "header and status")
    check("hdf5" in doc["libraries"] and isinstance(doc["environment"], dict), "libraries, environment")
    n = 0
    with h5py.File(out, "r") as f:
        check(doc["git_commit"] == f["run"].attrs["git_commit"], "the commit is the file's")
        check(sorted(s["name"] for s in doc["sweeps"]) == sorted(f["sweeps"].keys()), "every sweep")
        for rec in doc["records"]:
            g = f["sweeps"][rec["sweep"]]
            i = rec["point"]
            for k, v in rec["keys"].items():
                fv = g["points"][k][i]
                fv = fv.decode() if isinstance(fv, bytes) else fv
                check(v == fv or (isinstance(v, float) and abs(v - fv) <= 1e-12 * abs(fv)),
                      f"{rec['sweep']} point {i}: key {k} {v} = {fv}")
            for m in rec["metrics"].values():
                ds = g[m["dataset"]]
                if ds.dtype.kind in "SOU":
                    continue
                inner = None if m["over_inner"] == "none" else m["over_inner"]
                want = per_point(ds, inner, m["over_ranks"])[i]
                got = m["value"]
                ok = (got is None and not np.isfinite(want)) or \
                     (got is not None and abs(got - want) <= 1e-9 * abs(want) + 1e-300)
                check(ok, f"{rec['sweep']} point {i}: {m['dataset']} ({m['statistic']}) {got} = {want}")
                n += 1
    check(n > 100, f"many values compared ({n})")


def json_on_timeout(args):
    """A run stopped by the hang guard in its collectives sweep: the --json file is valid, says
    'running', and holds the sweeps that finished with their records."""
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    js = os.path.join(args.workdir, "stopped.json")
    config = os.path.join(args.source, "inputs", "small.yaml")
    cmd = ["-x", "RINGBENCH_TEST_HANG_POINT", args.ringbench, config, "--output",
           os.path.join(args.workdir, "stopped.h5"), "--json", js, "--timeout", "20", "--quiet"]
    r = mpirun(args, 2, cmd, timeout=120, env={"RINGBENCH_TEST_HANG_POINT": "collectives:0"})
    check(r.returncode == 124, f"the hang guard stops the run (exit {r.returncode})")
    with open(js) as fh:
        doc = json.load(fh)
    check(doc["status"] == "running", "the file says the run did not reach its end")
    import yaml
    with open(config) as fh:
        names = [sw.get("name", sw["type"]) for sw in yaml.safe_load(fh)["sweeps"]]
    before = names[:names.index("collectives")]
    done = [s["name"] for s in doc["sweeps"] if s["status"] == "complete"]
    check(done == before, f"the sweeps before the hang, complete: {done} (expected {before})")
    check({rec["sweep"] for rec in doc["records"]} == set(done), "their records")


def dry_run_64(args):
    """inputs/large.yaml (backend cuda) plans in a CUDA build; a host-only build cannot
    validate it and skips."""
    config = os.path.join(args.source, "inputs", "large.yaml")
    r = run([args.ringbench, config, "--dry-run", "--world-size", "64", "--ranks-per-node", "8"],
            timeout=120)
    print(r.stdout, r.stderr)
    if "built without CUDA" in r.stderr:
        print("SKIPPED: inputs/large.yaml needs a ringbench built with CUDA")
        sys.exit(harness.SKIPPED)
    check(r.returncode == 0, f"exit 0 without mpirun: {r.stderr[-1000:]}")
    check("ranks 64, nodes 8" in r.stdout, "planned for 64 ranks on 8 nodes")
    check(re.search(r"^total: .* estimated run time", r.stdout, re.M) is not None, "a total estimate")
    check("#SBATCH --time=" in r.stdout, "a suggested #SBATCH --time")
    check("assumed per rank" in r.stdout, "the cost model's assumptions are printed")
    check(len(r.stdout.splitlines()) < 60, "without --verbose: one line per sweep, not per point")
    v = run([args.ringbench, config, "--dry-run", "--world-size", "64", "--ranks-per-node", "8",
             "--verbose"], timeout=120)
    check(v.returncode == 0 and len(v.stdout.splitlines()) > 200, "--verbose lists every point")
    # #17: the same file at 1,024 ranks (128 nodes of 8) plans within 10 minutes, parity
    # checks included (sampled pairs, fewer parity rows per rank on large rings).
    r = run([args.ringbench, config, "--dry-run", "--world-size", "1024", "--ranks-per-node", "8"],
            timeout=300)
    print(r.stdout[-3000:])
    m = re.search(r"^total: .* estimated run time (.*)$", r.stdout, re.M)
    secs = plan_seconds(m.group(1)) if m else None
    check(r.returncode == 0 and secs is not None and 0 < secs <= 600 and "pairs sample:4096" in r.stdout,
          f"inputs/large.yaml at 1024 x 8 plans within 10 minutes ({m.group(1) if m else r.stderr[-500:]})")


def plan_seconds(text):
    """'6 min 24 s', '45 s', '1 h 2 min' -> seconds (None if unreadable)."""
    units = {"h": 3600, "min": 60, "s": 1}
    parts = re.findall(r"([0-9.]+)\s*(h|min|s)\b", text)
    return sum(float(v) * units[u] for v, u in parts) if parts else None


def estimate_from(args):
    """A 2-rank run, then its plan at 2 ranks from the file: every sweep measured, the total
    their wall times; at 4 ranks the sweeps whose points changed fall back to the model."""
    _, out, _ = small_run(args, ["--quiet"])
    config = os.path.join(args.source, "inputs", "small.yaml")
    r = run([args.ringbench, config, "--dry-run", "--world-size", "2", "--estimate-from", out])
    print(r.stdout, r.stderr)
    with h5py.File(out, "r") as f:
        names = list(f["sweeps"].keys())
    check(r.returncode == 0 and f"{len(names)} of {len(names)} sweeps from the measured times" in r.stdout,
          "at the same size every sweep's time comes from the file")
    r = run([args.ringbench, config, "--dry-run", "--world-size", "4", "--estimate-from", out])
    check(r.returncode == 0 and "model (" in r.stdout, f"at 4 ranks some sweeps use the model: {r.stdout}")
    # More sequence lengths in the first ring sweep: its old points measured, the new modelled.
    text = open(config).read()
    more = os.path.join(args.workdir, "more.yaml")
    open(more, "w").write(re.sub(r"seq_lengths: \[(\d+)\]", r"seq_lengths: [\1, 512]", text, count=1))
    r = run([args.ringbench, more, "--dry-run", "--world-size", "2", "--estimate-from", out])
    print(r.stdout, r.stderr)
    check(r.returncode == 0 and re.search(r"measured (\d+) of (\d+) points, model the rest", r.stdout),
          "a sweep with new points: the matching ones measured, the rest modelled")
    r = run([args.ringbench, config, "--dry-run", "--world-size", "2", "--estimate-from",
             os.path.join(args.workdir, "missing.h5")])
    check(r.returncode == 2 and "--estimate-from" in r.stderr, "a missing file is a usage error")


def bad_world_size(args):
    config = os.path.join(args.source, "inputs", "small.yaml")
    for bad, says in ((["--world-size", "0"], "--world-size"),
                      (["--world-size", "x"], "--world-size"),
                      (["--world-size", "6", "--ranks-per-node", "4"], "multiple of --ranks-per-node"),
                      (["--world-size", "4"], "--dry-run")):
        extra = ["--dry-run"] if bad[-1] != "4" or len(bad) > 2 else []
        r = run([args.ringbench, config] + extra + bad, timeout=120)
        check(r.returncode == 2 and says in r.stderr,
              f"{' '.join(extra + bad)}: exit 2 and a message naming {says!r}: {r.returncode} {r.stderr[-400:]}")
    r = run([args.ringbench, config, "--dry-run", "--world-size", "3"], timeout=120)
    check(r.returncode == 1 and "ring size 2 does not divide the world size 3" in r.stderr,
          f"a config impossible at that size is invalid: {r.stderr[-400:]}")


def main():
    ap = harness.arg_parser()
    ap.add_argument("check")
    args = ap.parse_args()
    checks = {"tables": tables, "narrow": narrow, "json_stdout": json_stdout, "quiet": quiet, "json": json_values, "dry_run_64x8": dry_run_64, "estimate_from": estimate_from,
              "json_on_timeout": json_on_timeout,
              "bad_world_size": bad_world_size}
    checks[args.check](args)
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
