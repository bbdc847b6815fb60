#!/usr/bin/env python3
"""End-to-end checks: run the real ringbench under mpiexec and read its HDF5 file back.

Each check is one CTest entry (tests/e2e.cmake). Exit 0 = pass, 1 = fail, 77 = skipped.
"""
import glob
import hashlib
import os
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from harness import check, mpirun  # noqa: E402
import harness  # noqa: E402

h5py, np = harness.h5py_and_numpy()


def every_dataset_documented(f):
    """Names of datasets lacking units, description or a role of 'key' or 'metric' (or
    'dimension', which only a dimension scale has)."""
    missing = []

    def visit(name, obj):
        if isinstance(obj, h5py.Dataset):
            for key in ("units", "description"):
                if key not in obj.attrs or not str(obj.attrs[key]):
                    missing.append(f"{name}@{key}")
            scale = obj.attrs.get("CLASS") == b"DIMENSION_SCALE"
            if obj.attrs.get("role") not in (("key", "metric", "dimension") if scale else ("key", "metric")):
                missing.append(f"{name}@role")
            problem = unit_name_problem(name.split("/")[-1], str(obj.attrs.get("units", "")))
            if problem:
                missing.append(f"{name}: {problem}")
    f.visititems(visit)
    return missing


UNIT_SUFFIXES = {"s": "_s", "B": "_bytes", "B/s": "_Bps", "TFLOP/s": "_tflops", "FLOP": "_flop",
                 "Hz": "_hz", "1": ""}


def unit_name_problem(name, units):
    """The unit-naming rule of docs/hdf5-schema.md (src/metrics/table.hpp)."""
    if units not in UNIT_SUFFIXES:
        return f"units '{units}' are outside the unit-naming rule"
    want = UNIT_SUFFIXES[units]
    if want:
        return "" if name.endswith(want) else f"units '{units}' need the suffix '{want}'"
    clash = [s for s in UNIT_SUFFIXES.values() if s and name.endswith(s)]
    return f"ends in '{clash[0]}' but has units '1'" if clash else ""


def is_scale(ds):
    """A dimension scale (role dimension, docs/hdf5-schema.md "Axes"): it names other datasets'
    axes; documented once there, not per sweep."""
    return ds.attrs.get("CLASS") == b"DIMENSION_SCALE" and ds.attrs.get("role") == "dimension"


def points_table_problems(f, ranks):
    """Schema v2: in every group with a points/ subgroup, keys are [P] with role key and the
    group's own datasets are [world, P, ...] with role metric (P = the group's 'points'), but
    for the dimension scales of their axes (rank [world], point [P], ...), attached to each."""
    problems = []

    def visit(name, obj):
        if not isinstance(obj, h5py.Group) or "points" not in obj or not isinstance(obj["points"], h5py.Group):
            return
        if "points" not in obj.attrs:
            problems.append(f"{name}: no 'points' attribute")
            return
        n = int(obj.attrs["points"])
        for key, ds in obj["points"].items():
            if ds.shape != (n,) or ds.attrs.get("role") != "key":
                problems.append(f"{name}/points/{key}: shape {ds.shape} role {ds.attrs.get('role')}")
            if [d.label for d in ds.dims] != ["point"]:
                problems.append(f"{name}/points/{key}: axis labels {[d.label for d in ds.dims]}")
        for metric, ds in obj.items():
            if not isinstance(ds, h5py.Dataset) or is_scale(ds):
                continue
            if ds.shape[:2] != (ranks, n) or ds.attrs.get("role") != "metric":
                problems.append(f"{name}/{metric}: shape {ds.shape} role {ds.attrs.get('role')}")
            if [d.label for d in ds.dims][:2] != ["rank", "point"] or not all(len(d) for d in ds.dims):
                problems.append(f"{name}/{metric}: axes {[d.label for d in ds.dims]}, each with its scale")
    f.visititems(visit)
    return problems


# Set for the small runs: one variable of each MPI/fabric family ringbench records (names no
# library reads, so the run itself is unchanged).
FABRIC_ENV = {"FI_RINGBENCH_CHECK": "fi", "I_MPI_RINGBENCH_CHECK": "impi",
              "MPICH_RINGBENCH_CHECK": "mpich", "PMIX_RINGBENCH_CHECK": "pmix"}


JUDGING_WORDS = {"direction": ("higher", "lower", "none"), "judged": ("headline", "no"),
                 "ranks": ("limiting", "each"),
                 "noise": ("*", "ring", "compute", "memory", "host_transfer", "p2p_bandwidth", "latency")}


def check_judging_attrs(f):
    """Every metric of every sweep says how it is judged (docs/hdf5-schema.md, "What a column
    says"), every sweep with measurements has a headline, and a headline has a direction."""
    for name, g in f["sweeps"].items():
        headline = []
        for m, d in g.items():
            if not isinstance(d, h5py.Dataset) or d.attrs.get("role") != "metric":
                continue
            bad = {a: d.attrs.get(a) for a, ok in JUDGING_WORDS.items() if d.attrs.get(a) not in ok}
            check(not bad and d.attrs.get("inner_axis"), f"/sweeps/{name}/{m} says how it is judged ({bad})")
            if d.attrs.get("judged") == "headline":
                headline.append(m)
                check(d.attrs.get("direction") != "none", f"/sweeps/{name}/{m}: a headline has a direction")
        check(headline, f"/sweeps/{name} has a headline metric")


def check_provenance(f, ranks, fabric_env=None):
    run = f["run"].attrs
    check(int(run.get("schema_version", 0)) == 4, "/run schema_version is 4")
    check_judging_attrs(f)
    libs = f["run/libraries"].attrs if "run/libraries" in f else {}
    for lib in ("mpi", "hdf5", "hwloc", "kokkos"):
        check(str(libs.get(lib, "")) != "", f"/run/libraries has {lib}")
    check("run/environment" in f, "/run/environment is recorded")
    if "run/environment" in f:
        env = f["run/environment"].attrs
        families = ("NCCL_", "CUDA_", "RINGBENCH_", "OMPI_", "UCX_", "FI_", "PMIX_", "I_MPI_", "MPICH_",
                    "OMP_", "KOKKOS_", "SLURM_")
        check(all(k.startswith(families) for k in env),
              f"only result-changing variables recorded: {[k for k in env if not k.startswith(families)][:8]}")
        # The MPI and fabric families (set for the run by check_small), with their values.
        for name, value in (fabric_env or {}).items():
            check(env.get(name) == value, f"/run/environment records {name}={value} ({env.get(name)!r})")
    ranks_grp = f["ranks"]
    for col in ("sm_clock_max_hz", "sm_clock_hz", "sm_clock_note"):
        check(col in ranks_grp and ranks_grp[col].shape == (ranks,), f"/ranks/{col} has {ranks} rows")
    if "sm_clock_hz" in ranks_grp:
        check(ranks_grp["sm_clock_hz"].attrs.get("role") == "metric", "clocks are metrics")
        host = ranks_grp["gpu_index"][()] < 0
        check(np.all(np.isnan(ranks_grp["sm_clock_hz"][()][host])), "no GPU: the clock is NaN, not 0")
    check(ranks_grp["hostname"].attrs.get("role") == "key", "/ranks/hostname is a key")


def documented_datasets(source, sweep_type):
    """{name: role} from the dataset tables of docs/sweeps/<type>.md (first cell: `name`s)."""
    doc = os.path.join(source, "docs", "sweeps", sweep_type + ".md")
    out = {}
    if not os.path.exists(doc):
        return None
    prefix = ""  # a section headed `dump/` or `model/` documents the names inside that group
    for line in open(doc):
        if line.startswith("#"):
            groups = [g for g in re.findall(r"`([^`]+)`", line) if g.endswith("/") and not g.startswith("/")]
            prefix = groups[0] if groups else ""
            continue
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) >= 3 and cells[1] in ("key", "metric"):
            for name in re.findall(r"`([^`]+)`", cells[0]):
                out[name if name.startswith(prefix) else prefix + name] = cells[1]
    return out


def check_sweeps_documented(f, source):
    """Every dataset a sweep wrote is in its docs/sweeps/<type>.md table, with the same role."""
    for name, g in f["sweeps"].items():
        sweep_type = g.attrs.get("type", "")
        docs = documented_datasets(source, sweep_type)
        check(docs is not None, f"docs/sweeps/{sweep_type}.md exists")
        if docs is None:
            continue
        found = []
        g.visititems(lambda n, o: found.append((n, o)) if isinstance(o, h5py.Dataset) else None)
        for rel, ds in found:
            if is_scale(ds):
                continue
            rel = re.sub(r"(^|/)R\d+/", r"\1R<R>/", rel)  # one table per ring size: steps/R<R>/
            role = ds.attrs.get("role")
            rel = re.sub(r"^steps/R\d+/", "steps/", rel)  # one table per ring size, documented once
            check(rel in docs, f"{name}/{rel} is documented in docs/sweeps/{sweep_type}.md")
            if rel in docs:
                check(docs[rel] == role, f"{name}/{rel}: role {role} as documented ({docs[rel]})")


def check_run_file(path, ranks, config_path, expect_status="complete", fabric_env=None):
    check(os.path.isfile(path), f"output file {path} exists")
    with h5py.File(path, "r") as f:
        run = f["run"].attrs
        check(run["status"] == expect_status, f"/run status is {expect_status} (got {run['status']})")
        check(int(run["world_size"]) == ranks, f"/run world_size == {ranks}")
        iso = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
        check(iso.match(run["start_time"]) is not None, "start_time is UTC ISO 8601")
        if expect_status != "running":
            check(iso.match(run["end_time"]) is not None, "end_time is UTC ISO 8601")
        with open(config_path) as cf:
            check(run["config_text"] == cf.read(), "config_text is the config file verbatim")
        for key in ("ringbench_version", "git_commit", "command_line", "backend", "mpi_thread_level"):
            check(key in run and str(run[key]) != "", f"/run has {key}")
        ranks_grp = f["ranks"]
        check(list(ranks_grp["rank"][()]) == list(range(ranks)), "/ranks/rank is 0..n-1")
        for col in ("hostname", "node_index", "local_rank", "gpu_index", "gpu_name", "gpu_uuid",
                    "cpuset", "numa_node", "binding_policy"):
            check(col in ranks_grp and ranks_grp[col].shape == (ranks,), f"/ranks/{col} has {ranks} rows")
        hosts = ranks_grp["hostname"].asstr()[()]
        check(all(h for h in hosts), "every rank has a hostname")
        check_provenance(f, ranks, fabric_env)
        missing = every_dataset_documented(f)
        check(not missing, f"every dataset has units, description, role and a name by the unit rule: {missing[:5]}")
        if expect_status != "running":
            problems = points_table_problems(f, ranks)
            check(not problems, f"points tables follow schema v2: {problems[:5]}")
        return {name: dict(g.attrs) for name, g in f["sweeps"].items()} if "sweeps" in f else {}


def sweep_names(config_path):
    names = []
    current_type = None
    for line in open(config_path):
        m = re.match(r"^\s*-\s*type:\s*(\S+)", line)
        if m:
            current_type = m.group(1)
            names.append(current_type)
        m = re.match(r"^\s+name:\s*(\S+)", line)
        if m and current_type and names:
            names[-1] = m.group(1)
    return names


def check_small(args, ranks):
    work = args.workdir
    out = os.path.join(work, "small.h5")
    config = os.path.join(args.source, "inputs", "small.yaml")
    names = sweep_names(config)
    extra = []
    if ranks == 1:
        # small.yaml has rings of 2 ranks: one rank must be refused before anything runs,
        # naming the key; the host sweeps that fit one rank still run with --only.
        r = mpirun(args, 1, [args.ringbench, config, "--output", out, "--force"], timeout=120)
        check(r.returncode != 0, "small.yaml on 1 rank is refused (ring size 2 > world 1)")
        check("ring_sizes" in r.stderr and "small.yaml" in r.stderr,
              f"the error names the file and ring_sizes: {r.stderr[-600:]}")
        check(not os.path.exists(out), "nothing was written for the refused run")
        names = [n for n in names if not n.startswith("ring_")]
        extra = ["--only", ",".join(names)]
    r = mpirun(args, ranks, [args.ringbench, config, "--output", out, "--force"] + extra, timeout=600,
               env=FABRIC_ENV)
    print(r.stdout[-4000:], r.stderr[-4000:])
    check(r.returncode == 0, f"ringbench exits 0 on {ranks} ranks")
    check(f"complete: {out}" in r.stdout, "rank 0 prints where the file went")
    check(r.stdout.count("ringbench ") >= 1 and r.stderr.count("writing ") == 1,
          "the header and 'writing' line appear once (rank 0 only)")
    sweeps = check_run_file(out, ranks, config, fabric_env=FABRIC_ENV)
    with h5py.File(out, "r") as f:
        check_sweeps_documented(f, args.source)
    for name in names:
        check(name in sweeps, f"sweep {name} in /sweeps")
        if name in sweeps:
            check(sweeps[name].get("status") == "complete", f"sweep {name} status complete")
    with h5py.File(out, "r") as f:
        pp = [g for g in f["sweeps"].values() if g.attrs.get("type") == "host_pingpong"]
        for g in pp:  # docs: src/sweeps/host_pingpong.cpp's points table
            t = g["one_way_time_s"][()]
            sizes = g["points/message_size_bytes"][()]
            check(t.shape[0] == ranks and t.shape[1] == len(sizes), "one_way_time_s is [rank, point, iter]")
            check(np.all(t > 0), "every ping-pong time is positive")
            check(np.all(g["corrupt_echo"][()] == 0), "no corrupted echoes")


BAD_CONFIGS = {
    "syntax.yaml": ("sweeps:\n  - type: host_pingpong\n    message_sizes: [8, 16\n", r":\d+:\d+:"),
    "unknown_key.yaml": ("run: {name: x}\nsweeps:\n  - type: host_pingpong\n    iteratons: 5\n",
                         r"iterations"),
    "zero_iterations.yaml": ("sweeps:\n  - type: host_pingpong\n    iterations: 0\n", r"iterations"),
    "unknown_type.yaml": ("sweeps:\n  - type: host_pingpng\n", r"host_pingpong"),
    "empty.yaml": ("", r"empty"),
}


def check_bad_configs(args):
    work = args.workdir
    for fname, (text, pattern) in BAD_CONFIGS.items():
        path = os.path.join(work, fname)
        with open(path, "w") as fh:
            fh.write(text)
        exits = os.path.join(work, "exits_" + fname)
        os.makedirs(exits, exist_ok=True)
        out = os.path.join(work, "bad.h5")
        r = mpirun(args, 2, [args.ringbench, path, "--output", out], per_rank_exit_dir=exits)
        codes = [int(open(p).read()) for p in sorted(glob.glob(exits + "/exit.*"))]
        check(len(codes) == 2 and all(c != 0 for c in codes),
              f"{fname}: every rank exits non-zero (got {codes})")
        lines = [l for l in r.stderr.splitlines() if "invalid config" in l]
        check(len(lines) == 1, f"{fname}: exactly one error message (got {len(lines)}: {r.stderr[-800:]})")
        if lines:
            check(path in lines[0], f"{fname}: message names the file: {lines[0]}")
            check(re.search(pattern, lines[0]) is not None, f"{fname}: message matches {pattern}: {lines[0]}")
        check(not os.path.exists(out), f"{fname}: no output file written")
    missing = os.path.join(work, "does_not_exist.yaml")
    r = mpirun(args, 2, [args.ringbench, missing])
    check(r.returncode != 0 and missing in r.stderr, "a missing file is reported by name")


def check_dry_run(args):
    work = args.workdir
    config = os.path.join(work, "dry.yaml")
    text = open(os.path.join(args.source, "inputs", "small.yaml")).read()
    text = re.sub(r"output_dir:.*", f"output_dir: {work}/results", text)
    open(config, "w").write(text)
    r = mpirun(args, 2, [args.ringbench, config, "--dry-run"])
    print(r.stdout)
    check(r.returncode == 0, "--dry-run exits 0")
    check("points" in r.stdout and "nothing was run" in r.stdout, "--dry-run prints the plan")
    check(not os.path.exists(os.path.join(work, "results")), "--dry-run writes no file")

    # inputs/large.yaml (backend cuda, GPU-only keys) is planned on a machine without GPUs too,
    # with a note; the run itself is refused there.
    version = subprocess.run([args.ringbench, "--version"], capture_output=True, text=True).stdout
    if "CUDA path built" in version:
        large = os.path.join(args.source, "inputs", "large.yaml")
        r = mpirun(args, 4, [args.ringbench, large, "--dry-run", "--verbose"])
        check(r.returncode == 0 and "nothing was run" in r.stdout,
              f"large.yaml plans on 4 ranks: {r.stdout[-300:]} {r.stderr[-600:]}")
        check("R=4 (1 ring)" in r.stdout, "ring_sizes: powers_of_two reaches the world size")
        # The other GPU-node configs (kernel: flash / cudnn sweeps included) plan as well.
        for name in ("gpu_checks.yaml", "ring_weak_scaling.yaml"):
            r = mpirun(args, 4, [args.ringbench, os.path.join(args.source, "inputs", name), "--dry-run"])
            check(r.returncode == 0 and "nothing was run" in r.stdout,
                  f"{name} plans on 4 ranks: {r.stdout[-300:]} {r.stderr[-600:]}")
        if "no GPU is visible here" in r.stdout:
            r = mpirun(args, 2, [args.ringbench, large, "--output", os.path.join(work, "l.h5")])
            check(r.returncode != 0 and "sees no GPU" in r.stderr, "without GPUs the run is refused")
            check(not os.path.exists(os.path.join(work, "l.h5")), "and writes nothing")


def check_help(args):
    r = subprocess.run([args.ringbench, "--help"], capture_output=True, text=True)
    check(r.returncode == 0, "--help exits 0")
    check(r.stdout.startswith("usage: ringbench"), f"--help starts with the usage: {r.stdout[:200]!r}")
    for what in ("--ranks-per-node", "Sweep types:", "host_pingpong", "Kernel paths"):
        check(what in r.stdout, f"--help mentions {what}")
    r = subprocess.run([args.ringbench, "--version"], capture_output=True, text=True)
    check(r.returncode == 0 and r.stdout.startswith("ringbench ") and "hdf5:" in r.stdout,
          f"--version names the libraries: {r.stdout[:300]!r}")
    r = mpirun(args, 2, [args.ringbench, "x.yaml", "--placement", "cyclic"])
    check(r.returncode == 2 and "--ranks-per-node" in r.stderr, f"--placement alone is a usage error: {r.stderr[-300:]}")


def check_simulated_layout(args):
    """--ranks-per-node 2 on 4 ranks: block puts ranks 0,1 on node 0; cyclic puts 0,2 there."""
    config = os.path.join(args.source, "inputs", "small.yaml")
    expected = {"block": [0, 0, 1, 1], "cyclic": [0, 1, 0, 1]}
    for placement, nodes in expected.items():
        out = os.path.join(args.workdir, f"layout_{placement}.h5")
        r = mpirun(args, 4, [args.ringbench, config, "--output", out, "--only", "host_pingpong",
                             "--ranks-per-node", "2", "--placement", placement])
        check(r.returncode == 0, f"{placement}: exits 0: {r.stderr[-400:]}")
        check(f"2 ranks per node, {placement} placement" in r.stdout, f"{placement}: the header says so")
        if not os.path.exists(out):
            continue
        with h5py.File(out, "r") as f:
            check(list(f["ranks/node_index"][()]) == nodes, f"{placement}: node_index {nodes}")
            check(int(f["run"].attrs["node_count"]) == 2, f"{placement}: two nodes")
            check(int(f["run"].attrs["simulated_ranks_per_node"]) == 2, f"{placement}: recorded K")
            check(f["run"].attrs["simulated_placement"] == placement, f"{placement}: recorded placement")
    # The environment form, for test binaries; the command line is not needed.
    r = mpirun(args, 4, [args.ringbench, config, "--dry-run"],
               env={"RINGBENCH_RANKS_PER_NODE": "2", "RINGBENCH_PLACEMENT": "cyclic"})
    check(r.returncode == 0 and "nodes 2 (simulated: 2 ranks per node, cyclic placement)" in r.stdout,
          f"RINGBENCH_RANKS_PER_NODE/RINGBENCH_PLACEMENT simulate too: {r.stdout[:400]}")


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def check_force(args):
    work = args.workdir
    out = os.path.join(work, "force.h5")
    config = os.path.join(args.source, "inputs", "small.yaml")
    r = mpirun(args, 2, [args.ringbench, config, "--output", out, "--only", "host_pingpong"])
    check(r.returncode == 0, "first run succeeds")
    before = sha(out)
    r = mpirun(args, 2, [args.ringbench, config, "--output", out, "--only", "host_pingpong"])
    check(r.returncode != 0, "second run without --force fails")
    check("--force" in r.stderr, "the message mentions --force")
    check(sha(out) == before, "the existing file is untouched")
    r = mpirun(args, 2, [args.ringbench, config, "--output", out, "--force", "--only", "host_pingpong"])
    check(r.returncode == 0 and sha(out) != before, "--force overwrites")


def check_interrupted(args):
    """Kills a run inside its second sweep: the first sweep must stay readable."""
    work = args.workdir
    config = os.path.join(work, "interrupted.yaml")
    open(config, "w").write(
        "run: {name: interrupted, output_dir: " + work + "}\nbackend: host\nsweeps:\n"
        "  - {type: host_pingpong, name: first, message_sizes: [8], iterations: 5}\n"
        "  - {type: host_pingpong, name: endless, message_sizes: [1048576], iterations: 1000000}\n")
    out = os.path.join(work, "interrupted.h5")
    cmd = [args.mpiexec, "-np", "2", "--oversubscribe", args.ringbench, config, "--output", out, "--force"]
    print("+", " ".join(cmd), flush=True)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                         start_new_session=True)
    deadline = time.time() + 120
    seen = ""
    while time.time() < deadline:
        line = p.stdout.readline()
        seen += line
        if "[first] done" in line:
            break
    time.sleep(1.0)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    check("[first] done" in seen, f"the first sweep finished before the kill: {seen[-1000:]}")
    sweeps = check_run_file(out, 2, config, expect_status="running")
    check(sweeps.get("first", {}).get("status") == "complete", "the completed sweep is readable and complete")
    with h5py.File(out, "r") as f:
        check(f["sweeps/first/one_way_time_s"].shape[0] == 2, "its data is readable")


def main():
    ap = harness.arg_parser()
    ap.add_argument("check")
    args = ap.parse_args()
    shutil.rmtree(args.workdir, ignore_errors=True)
    os.makedirs(args.workdir)
    checks = {
        "small_np1": lambda: check_small(args, 1),
        "small_np2": lambda: check_small(args, 2),
        "small_np4": lambda: check_small(args, 4),
        "bad_configs": lambda: check_bad_configs(args),
        "dry_run": lambda: check_dry_run(args),
        "force": lambda: check_force(args),
        "interrupted": lambda: check_interrupted(args),
        "help": lambda: check_help(args),
        "simulated_layout": lambda: check_simulated_layout(args),
    }
    checks[args.check]()
    return harness.exit_code()


if __name__ == "__main__":
    sys.exit(main())
