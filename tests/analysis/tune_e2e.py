#!/usr/bin/env python3
"""End to end on the host path: the real ringbench runs inputs/tuning_host.yaml on 2 ranks,
then `rb-analysis tune` turns its file into a policy file and a report. The policy is checked
against the HDF5 file read here with h5py (every shape and block-rows point covered, the
default is the shape's auto_path, a chosen path passed parity on every rank), not against the
analysis package's own reading of it. A second run makes the default path of the first shape
fail parity on every rank (RINGBENCH_FAULT_PARITY_PATH): the policy must then never choose it.

    tune_e2e.py --ringbench BIN --mpiexec MPIEXEC --source DIR --workdir DIR

Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun, run  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy(echo_passes=True)

SHAPE_KEYS = ("dtype", "head_dim", "causal", "segment", "rate")  # the policy's rule keys


def analysis(args, *cli):
    r = run([os.path.join(args.source, "analysis", "rb-analysis")] + list(cli))
    print(r.stdout[-4000:])
    print(r.stderr[-3000:])
    return r


def file_points(path):
    """shape -> {block_rows: {path: passed on every rank that measured it}}, and
    shape -> auto_path, straight from the file."""
    points, auto = {}, {}
    with h5py.File(path, "r") as f:
        g = [s for s in f["sweeps"].values() if s.attrs["type"] == "kernel_tuning"][0]
        keys = {k: g[f"points/{k}"] for k in SHAPE_KEYS + ("block_rows", "path", "auto_path")}
        text = {k: (v.asstr()[()] if v.dtype.kind == "S" else v[()]) for k, v in keys.items()}
        status, parity = g["status"].asstr()[()], g["parity_ok"][()]
        for p in range(int(g.attrs["points"])):
            shape = tuple(bool(text[k][p]) if k == "causal" else
                          (str(text[k][p]) if k == "dtype" else int(text[k][p])) for k in SHAPE_KEYS)
            measured = [r for r in range(status.shape[0]) if status[r, p] != "oom"]
            ok = bool(measured) and all(parity[r, p] == 1 for r in measured)
            points.setdefault(shape, {}).setdefault(int(text["block_rows"][p]), {})[
                str(text["path"][p])] = ok
            auto.setdefault(shape, {})[int(text["block_rows"][p])] = str(text["auto_path"][p])
    return points, auto


def check_screen(stdout, points):
    """The sweep's table on screen: one line per point (block rows, head dim, dtype, causal,
    dilation as segment/rate or '-', path), so LongNet branches of one block size are told apart
    (4 x H200: they were not)."""
    lines = [ln.split() for ln in stdout.splitlines()]
    # A table wider than 100 columns is split into parts, each starting with these key columns:
    # a point has one line in each part.
    parts = max(1, sum(1 for t in lines if t[:2] == ["rows", "head_dim"]))
    missing = []
    for (dtype, head_dim, causal, segment, rate), at in points.items():
        for rows, paths in at.items():
            for path in paths:
                want = [str(rows), str(head_dim), dtype, str(int(causal)),
                        f"{segment}/{rate}" if segment else "-", path]
                if sum(1 for t in lines if t[:6] == want) != parts:
                    missing.append(" ".join(want))
    check(not missing, "the screen's tuning table has one line per point with its dilation"
                       + (f" (missing: {'; '.join(missing[:3])})" if missing else ""))


def check_policy(policy, points, auto):
    rules = {tuple(r[k] for k in SHAPE_KEYS): r for r in policy["rules"]}
    check(set(rules) == set(points), f"one rule per shape of the file ({len(points)} shapes): "
                                     f"{sorted(map(str, rules))}")
    for shape, at in points.items():
        rule = rules.get(shape)
        if rule is None:
            continue
        for rows, paths in sorted(at.items()):
            hits = [r for r in rule["ranges"] if r["block_rows_min"] <= rows <= r["block_rows_max"]]
            if not check(len(hits) == 1, f"{shape}: block rows {rows} in exactly one range"):
                continue
            check(hits[0]["default_path"] == auto[shape][rows],
                  f"{shape} rows {rows}: default_path {hits[0]['default_path']} is the file's "
                  f"auto_path {auto[shape][rows]}")
            chosen = hits[0]["path"]
            check(chosen is None or paths.get(chosen) is True,
                  f"{shape} rows {rows}: chosen {chosen} passed parity on every rank ({paths})")


def check_faulted_default(args, tuning, faulted):
    """The run with `faulted` failing parity everywhere: tune still writes a policy (the run
    failed, its file is whole), and no range chooses the faulted path."""
    h5 = os.path.join(args.workdir, "faulted.h5")
    out = os.path.join(args.workdir, "faulted.yaml")
    for stale in (h5, out):
        if os.path.exists(stale):
            os.remove(stale)
    config = os.path.join(args.source, "inputs", "tuning_host.yaml")
    r = mpirun(args, 2, [args.ringbench, config, "--output", h5, "--force"],
               env={"RINGBENCH_FAULT_PARITY_PATH": faulted})
    check(r.returncode != 0 and os.path.isfile(h5),
          f"ringbench with {faulted} failing parity: exit non-zero ({r.returncode}), file written")
    r = analysis(args, "tune", h5, "--safety-margin", "1.2", "--hysteresis", "1", "--out", out)
    check(r.returncode == 0, f"rb-analysis tune on the failed run exits 0 (got {r.returncode})")
    if not os.path.isfile(out):
        return
    policy = tuning.read_policy_yaml(out)
    points, auto = file_points(h5)
    check(all(not ok for at in points.values() for paths in at.values()
              for p, ok in paths.items() if p == faulted), f"the file says {faulted} failed parity")
    check_policy(policy, points, auto)
    chosen = {r["path"] for rule in policy["rules"] for r in rule["ranges"]}
    check(faulted not in chosen, f"{faulted} (failed parity) is never chosen: {sorted(map(str, chosen))}")


def main():
    ap = harness.arg_parser()
    args = ap.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    h5 = os.path.join(args.workdir, "tuning.h5")
    out, report = os.path.join(args.workdir, "tuned.yaml"), os.path.join(args.workdir, "tuning.md")
    for stale in (h5, out, report):
        if os.path.exists(stale):
            os.remove(stale)
    config = os.path.join(args.source, "inputs", "tuning_host.yaml")
    r = mpirun(args, 2, [args.ringbench, config, "--output", h5, "--force"])
    if not check(r.returncode == 0 and os.path.isfile(h5), f"ringbench {config} on 2 ranks"):
        print(r.stdout[-3000:], r.stderr[-3000:])
        return harness.exit_code()

    check_screen(r.stdout, file_points(h5)[0])
    r = analysis(args, "tune", h5, "--safety-margin", "1.2", "--out", out, "--report", report)
    check(r.returncode == 0, f"rb-analysis tune exits 0 (got {r.returncode})")
    check("shape(s)" in r.stdout and "policy:" in r.stdout, "tune prints its summary")
    check("per rank (2 ranks):" in r.stdout and "## Per rank" in open(report).read(),
          "tune of a 2-rank file says per rank where its choice differs (screen and report)")
    sys.path.insert(0, os.path.join(args.source, "analysis"))
    from ringbench_analysis import tuning
    try:
        policy = tuning.read_policy_yaml(out)
    except tuning.TuningError as exc:
        check(False, f"the policy file loads: {exc}")
        return harness.exit_code()
    check(True, "the policy file loads and is valid")
    check(policy["machine"]["device"] == "host" and policy["machine"]["gpu"] is None,
          f"machine: host device, no GPU ({policy['machine']})")
    check((policy["source"], policy["sweep"], policy["margin"]) == (h5, "tuning", 1.2),
          "source, sweep and margin recorded")
    points, auto = file_points(h5)
    check_policy(policy, points, auto)

    md = open(report).read() if os.path.isfile(report) else ""
    pngs = [n for n in os.listdir(args.workdir) if n.startswith("tuning_") and n.endswith(".png")]
    check(len(pngs) == len(points), f"one PNG per shape beside the report ({pngs})")
    check(all(f"]({n})" in md for n in pngs), "the report shows every PNG")
    r = analysis(args, "compare-tuning", out, out)
    check(r.returncode == 0 and r.stdout.strip().splitlines()[-1].startswith("OK"),
          "compare-tuning of the policy with itself: exit 0, OK")
    first = auto[sorted(auto)[0]]
    check_faulted_default(args, tuning, first[min(first)])
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
