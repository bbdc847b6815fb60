"""Command line: python3 -m ringbench_analysis
{report,compare,table,tune,tune-cp,compare-tuning,nccl-tests,scheme-model,...} (or analysis/rb-analysis)."""
import argparse
import errno
import importlib
import os
import sys

# The commands whose module does all the work: command -> (module, its function of args).
# Imported after parsing, so --help works without h5py and yaml.
_MODULE_COMMANDS = {"export": ("export", "command"), "nccl-tests": ("nccl_tests", "command"),
                    "baseline": ("baseline", "command"), "scheme-model": ("scheme_report", "command"),
                    "tune-cp": ("tune_cp", "command"), "tune": ("tune", "tune_command"),
                    "compare-tuning": ("tune", "compare_tuning_command")}


# Every command's one-line help (rb-analysis --help) and description (rb-analysis CMD --help),
# in the order --help lists them; argparse fills each into one paragraph.
_COMMANDS = {
    "report": ("write DIR/report.md with PNG plots from one or more runs",
        """\
        Writes report.md, report.json, points.csv and PNG plots. Several files (or directories
        of .h5 files) from runs at different rank counts combine into one scaling study."""),
    "compare": ("compare two runs point by point; exit 1 on a regression",
        """\
        Judges each matched point's headline metric with a bootstrap interval of the change
        NEW/BASE of a low quantile of its per-iteration samples, and with --history the point's
        night-to-night noise (docs/analysis.md); prints a summary. Exit 0: no regression; 1: a
        regression (the whole interval beyond the limit, or a point failed in NEW only), or NEW
        is incomplete (its run or a sweep did not finish, a sweep or metric of BASE is missing);
        2: the files could not be compared or measure different work (config, world size, nodes,
        GPU model)."""),
    "table": ("print one sweep's table (one row per point and rank) as CSV",
        None),
    "tune": ("turn a kernel_tuning sweep into a tuned kernel policy file",
        """\
        Chooses a kernel path per shape and block-rows range from a kernel_tuning sweep: a path
        replaces the built-in default only when it passed parity on every rank and is faster by
        the safety margin. Writes the policy file (docs/analysis.md) and, with --report, a
        Markdown report with PNG plots. Exit 0: written; 2: unusable input or settings."""),
    "tune-cp": ("turn ring_attention sweeps over several schemes into a CP policy file (scheme: "
                "auto)",
        """\
        Chooses a context-parallel scheme per shape and tokens-per-rank range from
        ring_attention points run under several schemes: a scheme replaces the ring only when it
        passed parity and is faster by the safety margin. Writes the CP policy file
        (docs/analysis.md, tune-cp) that cp_policy: reads. Exit 0: written; 2: unusable input or
        settings."""),
    "compare-tuning": ("compare two tuned policy files; exit 1 when a choice changed",
        """\
        Prints each change of the chosen paths, one per line, and a verdict. Exit 0: same, or
        switch points moved by one grid step at most; 1: a choice moved further or changed; 2: a
        file is unreadable or not a valid policy."""),
    "baseline": ("pinned nightly baselines per machine kind: promote, record, show, path",
        """\
        A store of baselines per machine kind (GPU model x node count x config), kept with
        history. promote RUN.h5: add it as the kind's current baseline; record RUN.h5: keep it
        as a history night (compare --history STORE learns each point's night-to-night noise
        from them); show: list the store (* current, n night); path RUN.h5 (or CONFIG.yaml with
        --gpu/--nodes): print the current baseline. Exit 0: done; 2: unusable input; 3: path
        found none."""),
    "nccl-tests": ("a collectives sweep's busbw beside nccl-tests' output; exit 1 when they differ",
        """\
        Matches each nccl-tests result line (size, out-of-place / in-place) with the collectives
        sweep's point of the same operation, size_bytes, group and dtype, and prints both busbw
        values and their ratio. Exit 0: within --tolerance at and above --min-bytes; 1: a point
        differs by more; 2: unusable input."""),
    "scheme-model": ("the per-scheme cost model: predicted vs measured per scheme point, and the "
                     "crossover tokens/GPU where ulysses or allgather beats the ring",
        """\
        Predicts each context-parallel scheme's forward and backward time (compute at the
        measured attention rate + exposed communication from the collectives' alpha-beta fits
        per link class), against every point of the sweeps that ran several schemes, and
        projects where each scheme beats the ring at larger group sizes, within a node and
        across nodes (docs/analysis.md). Files are pooled: a collectives sweep of another run on
        the same machine supplies the fits. Exit 0: printed; 2: unusable input or no sweep ran
        two or more schemes."""),
    "export": ("every point's headline values with units and labels as JSON Lines, OpenMetrics "
               "or CSV",
        """\
        Writes each point's headline values (compare's headline metrics and ring attention's
        TFLOP/s per GPU; the slowest rank's median, as the report) with their units, the
        statistic, the point's keys and the run's labels: GPU model, host, versions, commit,
        config hash, sweep (docs/analysis.md, export). Exit 0: written; 2: unusable input."""),
    "trend": ("the baseline store's headline metrics night by night as an offline HTML page",
        """\
        Writes DIR/trend.html (and trend.json): per machine kind of the store (baseline
        promote/record), each headline metric compare judges over the last N entries, with the
        noise band compare allows and the nights it calls a regression, and links to each
        night's report where the nightly kept one (docs/analysis.md, trend). Exit 0: written; 2:
        unusable store."""),
}

def _command(sub, name):
    """The subparser of one command, with its words from _COMMANDS."""
    brief, description = _COMMANDS[name]
    return sub.add_parser(name, help=brief, description=description)


def _inputs(parser):
    parser.add_argument("files", nargs="+", metavar="RUN.h5", help="ringbench output files or directories")


def _out_dir(parser):
    parser.add_argument("--out", required=True, metavar="DIR", help="output directory (created)")


def main(argv=None):
    """Entry point of `rb-analysis` (the console script) and `python3 -m ringbench_analysis`."""
    try:
        rc = _run(argv)
        sys.stdout.flush()  # a full disk under stdout fails here, in the handler below
        return rc
    except BrokenPipeError:  # `rb-analysis table ... | head`
        sys.stderr.close()
        return 0
    except OSError as e:
        if e.errno not in _WRITE_FAILURES:
            raise
        return _write_failed(e)
    except ImportError:
        from . import deps
        lost = deps.missing()
        if not lost:
            raise  # not a missing dependency: a bug, keep its traceback
        print(deps.message(lost), file=sys.stderr)
        return 2


# A write the file system refused (full, over quota, too large, an I/O error): a message, not a
# traceback, wherever the command was writing (its files name themselves; else stdout).
_WRITE_FAILURES = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EIO)


def _write_failed(e):
    where = e.filename or "standard output"
    print(f"rb-analysis: could not write {where}: {e.strerror}", file=sys.stderr)
    try:  # what stdout still buffers would fail again at exit: let it go to /dev/null
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):
        pass
    return 1


def _run(argv):
    p = argparse.ArgumentParser(
        prog="rb-analysis",
        description="Post-process ringbench HDF5 files (docs/analysis.md).")
    from . import __version__  # the release of ringbench it belongs to (ringbench --version)
    p.add_argument("--version", action="version", version=f"rb-analysis {__version__}")
    sub = p.add_subparsers(dest="command", required=True)
    _report_parser(sub)
    _compare_parser(sub)
    t = _command(sub, "table")
    t.add_argument("file", metavar="RUN.h5")
    t.add_argument("--sweep", help="sweep name (default: list the sweeps)")
    _tuning_parsers(sub)
    _baseline_parser(sub)
    _nccl_tests_parser(sub)
    _scheme_model_parser(sub)
    _export_parser(sub)
    _trend_parser(sub)
    args = p.parse_args(argv)
    from . import filecheck  # no h5py at import: the check runs in a child process
    bad = filecheck.timeout_problem(os.environ.get(filecheck.TIMEOUT_ENV, "")) or _out_files_problem(args)
    if bad:  # before any input is read: a traceback at the end of a long analysis otherwise
        return _refuse(args.command, bad)
    if args.command in _MODULE_COMMANDS:
        module, function = _MODULE_COMMANDS[args.command]
        return getattr(importlib.import_module(f".{module}", __package__), function)(args)
    from . import reader  # imported here so --help works without h5py
    try:
        return {"report": _report, "compare": _compare, "table": _table, "trend": _trend}[args.command](args, p)
    except reader.RingbenchFileError as e:
        return _refuse(args.command, e)
    except KeyError as e:
        return _refuse(args.command, e.args[0] if e.args else e)


def _refuse(command, why):
    """Exit code 2 (unusable input or settings), with why on stderr."""
    print(f"rb-analysis {command}: {why}", file=sys.stderr)
    return 2


def _nccl_tests_parser(sub):
    n = _command(sub, "nccl-tests")
    n.add_argument("file", metavar="RUN.h5", help="ringbench output file with a collectives sweep")
    n.add_argument("outputs", nargs="+", metavar="[OP=]NCCL_TESTS.txt",
                   help="nccl-tests stdout (e.g. all_reduce_perf ... > all_reduce.txt); the operation "
                        "is read from its header unless given as OP=")
    n.add_argument("--sweep", help="the collectives sweep (default: the first)")
    n.add_argument("--group", default="world", help="group kind of the points (default world)")
    n.add_argument("--dtype", default="float32", help="element type of the points (default float32)")
    n.add_argument("--min-bytes", type=int, default=64 << 20, metavar="B",
                   help="compare sizes from this up (default 64 MiB: below, launch latency dominates)")
    n.add_argument("--tolerance", type=float, default=0.03, help="allowed |ratio - 1| (default 0.03)")
    n.add_argument("--json", metavar="FILE", help="also write the matched points as JSON")


def _export_parser(sub):
    e = _command(sub, "export")
    _inputs(e)
    e.add_argument("--format", required=True, choices=("jsonl", "openmetrics", "csv"))
    e.add_argument("--out", default="-", metavar="PATH", help="file to write (default -: stdout)")


def _scheme_model_parser(sub):
    s = _command(sub, "scheme-model")
    _inputs(s)
    s.add_argument("--sizes", default="8,16,64", metavar="R,R,...",
                   help="group sizes to project the crossovers to, besides the measured ones (default 8,16,64)")
    s.add_argument("--link", action="append", default=[], metavar="CLASS=ALPHA,BETA",
                   help="the ring's hop (sendrecv) link, replacing the measured one, as report --link")
    s.add_argument("--json", metavar="FILE", help="also write every number as JSON")


def _report_parser(sub):
    r = _command(sub, "report")
    _inputs(r)
    _out_dir(r)
    r.add_argument("--predict", default="8,64,512", metavar="R,R,...",
                   help="ring sizes to predict beyond the run (default 8,64,512)")
    r.add_argument("--strict", action="store_true",
                   help="exit 1 when a run, sweep or point did not complete (the report is written anyway)")
    r.add_argument("--peaks", metavar="PEAKS.yaml",
                   help="device peaks for an unknown GPU (model, tflops per dtype, hbm_GBps, "
                        "nvlink_GBps, pcie_GBps); known GPUs need none (docs/analysis.md)")
    r.add_argument("--link", action="append", default=[], metavar="CLASS=ALPHA,BETA",
                   help="a link for the cost model's projections, replacing the measured one: "
                        "intra or inter (node), latency and bandwidth, e.g. inter=5us,25GB/s "
                        "(repeatable; docs/cost-model.md)")
    r.add_argument("--ranks-per-node", type=int, metavar="K",
                   help="ranks per node of the projected rings (default: the files' own)")
    r.add_argument("--html", action="store_true",
                   help="also write report.html: the same sections as one offline page with "
                        "interactive plots (needs python3-plotly and python3-jinja2)")


def _out_files_problem(args):
    """Why an output file the command will write (--json FILE; tune's and tune-cp's --out) cannot
    be written there ("" when it can): a directory at the path, a missing or unwritable folder."""
    from . import outfile
    flags = [("--json", getattr(args, "json", None))]
    if args.command in ("tune", "tune-cp", "export"):
        flags.append(("--out", getattr(args, "out", None)))
    if args.command == "tune":
        flags.append(("--report", getattr(args, "report", None)))
    for flag, path in flags:
        if not isinstance(path, str) or path in ("", "-"):
            continue
        folder = os.path.dirname(os.path.abspath(path))
        if os.path.isdir(path):
            return f"{flag} {path}: is a directory, not a file"
        if outfile.not_regular(path):
            return f"{flag} {path}: {outfile.not_regular(path)}"
        same = _same_as_input(args, path)
        if same:
            return f"{flag} {path}: is the input {same}: refusing to overwrite it"
        if flag == "--report":  # tune makes the report's folder itself
            continue
        if not os.path.isdir(folder):
            return f"{flag} {path}: no folder {folder}"
        if not os.access(folder, os.W_OK):
            return f"{flag} {path}: cannot write in {folder} (Permission denied)"
    return ""


def _input_paths(args):
    """The files the command reads (runs, repeats, history files, reference, peaks, policies)."""
    for name in ("file", "files", "base", "new", "old", "base_repeat", "new_repeat", "history", "reference",
                 "peaks"):
        value = getattr(args, name, None)
        for path in value if isinstance(value, (list, tuple)) else [value]:
            if isinstance(path, str) and path not in ("", "-"):
                yield path


def _same_as_input(args, out):
    """The input that `out` is the same file as (os.path.samefile, or the same absolute path), or ""."""
    for path in _input_paths(args):
        try:
            if os.path.samefile(path, out):
                return path
        except OSError:  # one of them does not exist (yet)
            if os.path.abspath(path) == os.path.abspath(out):
                return path
    return ""


def _out_dir_problem(out):
    """Why --out cannot take the report ("" when it can): a file there, or a directory that
    cannot be made or written (a file is created and removed to know: root passes every
    permission test, a read-only file system or an immutable directory does not)."""
    import tempfile
    if os.path.exists(out) and not os.path.isdir(out):
        return f"--out {out}: is a file, not a directory (the report is a directory of files)"
    try:
        os.makedirs(out, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        return f"--out {out}: cannot write there ({e.strerror or e})"
    return ""


def _report(args, p):
    from . import reader, report
    from .links import LinkError, parse_link
    from .peaks import PeaksError
    try:
        sizes = tuple(int(x) for x in args.predict.split(",") if x.strip())
    except ValueError:
        p.error(f"--predict: '{args.predict}' is not a comma-separated list of ring sizes")
    if args.ranks_per_node is not None and args.ranks_per_node < 1:
        p.error("--ranks-per-node must be at least 1")
    try:
        given = [parse_link(x) for x in args.link]
        # Inputs and --out are checked before report.build: it would otherwise stop inside
        # HDF5 (a crash, filecheck.py), os.makedirs or a plot's savefig with a traceback.
        reader.filecheck.check(reader.run_files(args.files))
        bad_out = _out_dir_problem(args.out) or _html_problem(args.html)
        if bad_out:
            return _refuse("report", bad_out)
        summary = report.build(args.files, args.out, sizes, peaks_file=args.peaks,
                               given_links=given, ranks_per_node=args.ranks_per_node, html=args.html)
    except LinkError as e:
        return _refuse("report", e)
    except PeaksError as e:
        return _refuse("report", f"--peaks {e}")
    except OSError as e:  # a write that failed after the check (a full disk, a removed --out)
        return _refuse("report", f"--out {args.out}: {e.filename or args.out}: {e.strerror or e}")
    print(f"report: {os.path.join(args.out, 'report.md')}"
          + (f" and {os.path.join(args.out, 'report.html')}" if args.html else "")
          + f" ({len(summary['plots'])} plots, {len(summary['points'])} ring attention points)")
    for line in summary["problems"]:
        print(f"warning: {line}", file=sys.stderr)
    for line in sorted({w for pr in summary["predictions"] for w in pr["warnings"]}):
        print(f"warning: cost model: {line}", file=sys.stderr)
    return 1 if (args.strict and summary["problems"]) else 0


def _html_problem(wanted):
    """Why an HTML page cannot be written ("" when it can), before the analysis runs."""
    if not wanted:
        return ""
    from . import html_page
    try:
        html_page.require()
    except html_page.HtmlError as e:
        return f"--html: {e}"
    return ""


def _trend_parser(sub):
    t = _command(sub, "trend")
    t.add_argument("store", metavar="STORE", help="baseline store directory (results/baselines)")
    _out_dir(t)
    t.add_argument("--nights", type=int, default=30, metavar="N",
                   help="the last N entries (baselines and nights) of each kind (default 30; 0: all)")
    t.add_argument("--tolerance", default="5%", help="compare's --tolerance (default 5%%)")
    t.add_argument("--min-bytes", default="1MiB", metavar="SIZE",
                   help="compare's --min-bytes (default 1MiB)")
    t.add_argument("--kind", action="append", metavar="KIND", help="only this machine kind (repeatable)")


def _trend(args, p):
    from . import compare, trend, trend_html
    if args.nights < 0:
        p.error("--nights must be 0 (all) or more")
    problem = _out_dir_problem(args.out) or _html_problem(True)
    if problem:
        return _refuse("trend", problem)
    try:
        data = trend.collect(args.store, args.out, args.nights, compare.parse_tolerance(args.tolerance),
                             compare.parse_bytes(args.min_bytes), args.kind)
    except (trend.TrendError, compare.CompareError) as e:
        return _refuse("trend", e)
    path = trend_html.write(data, args.out)
    regs = sum(1 for k in data["kinds"] for s in k["series"] for n in s["nights"] if n and n["verdict"] == "regression")
    print(f"trend: {path} ({len(data['kinds'])} kind(s), {regs} regression(s) among the nights shown)")
    return 0


def _compare_parser(sub):
    c = _command(sub, "compare")
    c.add_argument("base", metavar="BASE.h5")
    c.add_argument("new", metavar="NEW.h5")
    c.add_argument("--tolerance", default="5%", help="allowed worsening, e.g. 5%% or 0.05 (default 5%%)")
    c.add_argument("--metric", action="append", default=[], metavar="NAME[,NAME]",
                   help="judge these metrics too (repeatable; default: one headline metric per "
                        "point kind)")
    c.add_argument("--min-bytes", default="1MiB", metavar="SIZE",
                   help="leave out collective and ping-pong points below this message size "
                        "(default 1MiB; latency-bound sizes are noisy between allocations; 0 keeps all)")
    c.add_argument("--allow-different", action="store_true",
                   help="compare files whose work differs (config, world size, nodes, GPU model)")
    c.add_argument("--all", action="store_true", dest="show_all",
                   help="print every judged metric, not only the ten worst changes")
    c.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write the result as JSON to FILE, or alone to stdout without FILE")
    c.add_argument("--quantile", type=float, default=0.2, metavar="Q",
                   help="statistic of each point: the Q quantile of times, 1-Q of rates "
                        "(default 0.2: the fast end, which interference does not move; 0.5: medians)")
    c.add_argument("--history", action="append", default=[], metavar="DIR|RUN.h5",
                   help="earlier runs of BASE's work: a baseline store (its entries of BASE's "
                        "machine kind) or files (repeatable); gives each point's night-to-night "
                        "noise, which a regression must also clear")
    c.add_argument("--nights", type=int, default=10, metavar="N",
                   help="use the last N history runs (default 10)")
    c.add_argument("--run-noise", metavar="SIGMA",
                   help="run-to-run noise a regression must clear by 3 sigma, as the standard "
                        "deviation of the log change, e.g. 2%% or 0.02 (default by BASE's backend and "
                        "kind of point on a quiet machine: cuda 1%%, host ring 1%% ... latency 45%%, "
                        "every host point 45%% when a run shared its node; 'default' names it; "
                        "0: the within-run interval alone); --history raises it per point where a point moves more")
    c.add_argument("--base-repeat", action="append", default=[], metavar="FILE",
                   help="another run of BASE's work (repeatable): each point is judged on the "
                        "side's fastest run")
    c.add_argument("--new-repeat", action="append", default=[], metavar="FILE",
                   help="another run of NEW's work (repeatable), likewise")
    c.add_argument("--reference", metavar="REF.yaml",
                   help="absolute reference values per GPU model (value, lower and upper bounds, unit; "
                        "docs/analysis.md#reference-values): a NEW value outside its bounds fails (exit 1)")
    c.add_argument("--trend", metavar="TEXT",
                   help="print the history, BASE and NEW of the judged points whose "
                        "'sweep point metric' contains TEXT")


def _compare(args, _p):
    from . import compare
    metrics = [m for arg in args.metric for m in arg.split(",") if m]
    try:
        tol = compare.parse_tolerance(args.tolerance)
        options = compare.Options(
            tolerance=tol, metrics=tuple(metrics), min_bytes=compare.parse_bytes(args.min_bytes),
            allow_different=args.allow_different, show_all=args.show_all, json_to=args.json,
            quantile=args.quantile, history=tuple(args.history or ()), nights=args.nights, trend=args.trend,
            run_noise=None if args.run_noise in (None, "default")
            else compare.parse_tolerance(args.run_noise, "--run-noise"),
            base_repeats=tuple(args.base_repeat), new_repeats=tuple(args.new_repeat), reference=args.reference)
        return compare.compare(args.base, args.new, options)
    except compare.CompareError as e:
        print(f"rb-analysis compare: {e}", file=sys.stderr)
        return compare.EXIT_ERROR


def _table(args, _p):
    from . import reader
    run = reader.load(args.file)
    if not args.sweep:
        for s in run.sweeps.values():
            print(f"{s.name}\t{s.type}\t{s.status}\t{s.npoints} points x {s.world} ranks")
        return 0
    t = run.table(args.sweep)
    t.to_csv(sys.stdout, columns=reader.csv_columns(t), index=False)
    return 0


def _tuning_parsers(sub):
    u = _command(sub, "tune")
    u.add_argument("file", metavar="RUN.h5", help="ringbench output file with a kernel_tuning sweep")
    u.add_argument("--sweep", metavar="NAME", help="the kernel_tuning sweep (default: the only one)")
    u.add_argument("--safety-margin", type=float, required=True, metavar="X",
                   help="a path must be X times faster than the default to replace it (>= 1.0, "
                        "e.g. 1.2)")
    u.add_argument("--hysteresis", type=int, default=2, metavar="N",
                   help="a switch must hold on N consecutive block-rows points (default 2; "
                        "1: no smoothing)")
    u.add_argument("--out", required=True, metavar="TUNED.yaml", help="policy file to write")
    u.add_argument("--report", metavar="TUNING.md",
                   help="also write this Markdown report, with PNG plots beside it")

    c = _command(sub, "tune-cp")
    c.add_argument("file", metavar="RUN.h5", help="ringbench output file with ring_attention sweeps")
    c.add_argument("--sweep", metavar="NAME", action="append",
                   help="a ring_attention sweep to use (repeatable; default: all of them)")
    c.add_argument("--safety-margin", type=float, required=True, metavar="X",
                   help="a scheme must be X times faster than the ring to replace it (>= 1.0)")
    c.add_argument("--hysteresis", type=int, default=1, metavar="N",
                   help="a switch must hold on N consecutive tokens-per-rank points (default 1: "
                        "scheme grids are short)")
    c.add_argument("--out", required=True, metavar="CP.yaml", help="CP policy file to write")

    ct = _command(sub, "compare-tuning")
    ct.add_argument("old", metavar="OLD.yaml")
    ct.add_argument("new", metavar="NEW.yaml")


def _baseline_parser(sub):
    b = _command(sub, "baseline")
    b.add_argument("action", choices=("promote", "record", "show", "path"))
    b.add_argument("file", nargs="?", metavar="RUN.h5|CONFIG.yaml")
    b.add_argument("--store", default=os.path.join("results", "baselines"), metavar="DIR",
                   help="baseline store directory (default results/baselines)")
    b.add_argument("--gpu", default="host", metavar="NAME",
                   help="path with a CONFIG.yaml: GPU model it will run on (default host)")
    b.add_argument("--nodes", type=int, default=1, metavar="N",
                   help="path with a CONFIG.yaml: node count it will run on (default 1)")


if __name__ == "__main__":
    sys.exit(main())
