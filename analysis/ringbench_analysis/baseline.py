"""Pinned nightly baselines: `rb-analysis baseline promote|show|path` (docs/analysis.md).

A store directory (default results/baselines) holds one baseline per machine kind: GPU model
(rank 0's /ranks/gpu_name, "host" on the host path) x node count x config (sha256 of the
config with run.name and run.output_dir removed, since those only name the output). Every
promoted file is kept as KIND/<UTC date>_<commit>.h5; index.json lists them per kind with a
`current` flag. A promote adds an entry and moves `current`; nothing is overwritten, so a
slow drift stays visible in the history. index.json is replaced atomically (temp + rename),
so a job killed mid-promote leaves the old index, never a torn one. A promote or record holds
an exclusive lock on the store (flock on STORE/.lock) from choosing the file's name to writing
the index: two at once (two nightly jobs ending together) each keep their file and their entry.

`record RUN.h5` keeps a passing night as history only (role "night", never current): compare
--history STORE reads a kind's baselines and nights to learn each point's night-to-night noise.
The last KEEP_NIGHTS nights of a kind are kept; older night files are removed.
"""
import contextlib
import datetime
import fcntl
import hashlib
import json
import os
import re
import shutil
import sys

from . import outfile

DEFAULT_STORE = os.path.join("results", "baselines")
INDEX = "index.json"
LOCK = ".lock"  # promote and record hold it (flock) while they add a file and an entry
EXIT_NONE = 3  # `baseline path`: no baseline for this run's machine kind
KEEP_NIGHTS = 30


class BaselineError(Exception):
    pass


def _text(v):
    return v.decode() if isinstance(v, bytes) else str(v)


# Nodes a config may hold once YAML's aliases are expanded: a real config has hundreds; an alias
# bomb (a1: [*a0 x10], a2: [*a1 x10], ...) is tiny as text and 10^10 nodes to hash.
MAX_EXPANDED_NODES = 1000000


def _expanded_nodes(obj, limit=MAX_EXPANDED_NODES):
    """How many nodes `obj` (yaml.safe_load's result) has with every alias expanded, counted once
    per shared object (memoised), so a bomb is measured in microseconds; limit + 1 once past the
    limit, and for a structure that contains itself (a recursive alias)."""
    sizes, active = {}, set()

    def size(o):
        if not isinstance(o, (dict, list)):
            return 1
        if id(o) in sizes:
            return sizes[id(o)]
        if id(o) in active:
            return limit + 1
        active.add(id(o))
        n = 1
        for child in (list(o.keys()) + list(o.values())) if isinstance(o, dict) else o:
            n += size(child)
            if n > limit:
                break
        active.discard(id(o))
        sizes[id(o)] = n = min(n, limit + 1)
        return n
    return size(obj)


def _load_config(text, what):
    """yaml.safe_load of a config, refusing one nested too deeply or expanding past
    MAX_EXPANDED_NODES through aliases (a bomb) with BaselineError naming `what`."""
    import yaml
    try:
        cfg = yaml.safe_load(text)
    except yaml.YAMLError as e:
        raise BaselineError(f"{what} is not YAML: {' '.join(str(e).split())}") from None
    except RecursionError:
        raise BaselineError(f"{what}: not a ringbench config (nested too deeply)") from None
    if _expanded_nodes(cfg) > MAX_EXPANDED_NODES:
        raise BaselineError(f"{what}: not a ringbench config (more than {MAX_EXPANDED_NODES} values once its "
                            "YAML aliases are expanded, or an alias that contains itself: an alias bomb?)")
    return cfg


def config_hash(config_text, what="the run's config_text"):
    """sha256 of the config's content, without the keys that only name the output."""
    cfg = _load_config(config_text, what) or {}
    if isinstance(cfg, dict) and isinstance(cfg.get("run"), dict):
        run = {k: v for k, v in cfg["run"].items() if k not in ("name", "output_dir")}
        cfg = dict(cfg, run=run)
        if not run:
            del cfg["run"]
    canon = json.dumps(cfg, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(canon.encode()).hexdigest()


def run_identity(path):
    """RUN.h5 -> dict(kind, gpu, nodes, config, commit, unfinished) of the file's machine kind;
    unfinished: why the run is not a whole one ("" when /run and every sweep completed)."""
    import h5py
    from . import filecheck, reader
    try:
        filecheck.check([path])  # a corrupted file must not crash this process inside HDF5
        with h5py.File(path, "r") as f:
            run = f["run"].attrs
            names = f["ranks/gpu_name"].asstr()[()] if "ranks/gpu_name" in f else []
            gpu = names[0].strip() if len(names) and names[0].strip() else "host"
            nodes = int(run["node_count"])
            cfg = config_hash(_text(run["config_text"]))
            commit = _text(run.get("git_commit", "unknown")) or "unknown"
            unfinished = _unfinished(f)
    except reader.RingbenchFileError as e:
        raise BaselineError(str(e))
    except (OSError, KeyError, RuntimeError, ValueError) as e:
        raise BaselineError(f"{path}: not a readable ringbench file ({e})")
    return dict(_identity(gpu, nodes, cfg, commit), unfinished=unfinished)


def _unfinished(f):
    """Why the file's run is not whole: its /run status, else a sweep still 'running' (a
    sweep that 'failed' ended, and the run's status says so)."""
    status = _text(f["run"].attrs.get("status", "unknown"))
    if status != "complete":
        failure = _text(f["run"].attrs.get("failure", ""))
        return f"run status '{status}'" + (f": {failure}" if failure else
                                           " (killed, timed out or crashed?)" if status == "running" else "")
    for name, g in (f["sweeps"].items() if "sweeps" in f else []):
        st = _text(g.attrs.get("status", "unknown"))
        if st not in ("complete", "failed"):
            return f"sweep '{name}' status '{st}'"
    return ""


def config_identity(config_path, gpu="host", nodes=1):
    """A config file not yet run -> the identity its run will have on GPU x NODES (the nightly
    asks before running anything). A host-backend config runs on the host whatever the node
    has, as the file's empty gpu_name will say."""
    try:
        with open(config_path) as f:
            text = f.read()
    except (OSError, UnicodeDecodeError) as e:
        raise BaselineError(f"{config_path}: not a readable config ({e})")
    cfg = _load_config(text, config_path)
    if cfg is not None and not isinstance(cfg, dict):
        raise BaselineError(f"{config_path}: not a readable config (a {type(cfg).__name__}, not a mapping)")
    backend = (cfg or {}).get("backend", "")
    if backend == "host" or not gpu.strip():
        gpu = "host"
    return _identity(gpu.strip(), int(nodes), config_hash(text, config_path), "unknown")


def _identity(gpu, nodes, cfg, commit):
    safe_gpu = re.sub(r"[^A-Za-z0-9.-]+", "_", gpu).strip("_") or "gpu"
    kind = f"{safe_gpu}_{nodes}n_{cfg[:12]}"
    return {"kind": kind, "gpu": gpu, "nodes": nodes, "config": cfg, "commit": commit}


def identity(path, gpu="host", nodes=1):
    """RUN.h5 (its own machine kind) or a config YAML (with GPU and NODES of where it will run).
    A .h5 name is a run even when it is empty or damaged: it gets the run's error, not a
    config's kind."""
    from . import filecheck
    if path.endswith(".h5") or (os.path.isfile(path) and os.path.getsize(path)
                                and filecheck.has_signature(path, os.path.getsize(path))):
        return run_identity(path)
    return config_identity(path, gpu, nodes)


def read_index(store):
    p = os.path.join(store, INDEX)
    if not os.path.exists(p):
        return {}
    try:
        with open(p) as f:
            idx = json.load(f)
    except (OSError, ValueError) as e:
        raise BaselineError(f"{p}: unreadable index ({e})")
    if not isinstance(idx, dict):
        raise BaselineError(f"{p}: not an index (expected an object of kinds)")
    return idx


def write_index(store, idx):
    """Write index.json atomically: a temp file in the same directory, then os.replace
    (outfile.replacing); synced first, so a crash after the rename finds the new index whole."""
    os.makedirs(store, exist_ok=True)
    with outfile.replacing(os.path.join(store, INDEX)) as f:
        json.dump(idx, f, indent=2, sort_keys=True)
        f.write("\n")
        f.flush()
        os.fsync(f.fileno())


def current(store, kind):
    """The current entry of KIND (a dict), or None."""
    for e in read_index(store).get(kind, []):
        if e.get("current"):
            return e
    return None


@contextlib.contextmanager
def _locked(store):
    """Holds the store's lock (an exclusive flock on STORE/.lock; waits for another holder): the
    free name a copy takes and the index's read-modify-write are only right for one writer."""
    os.makedirs(store, exist_ok=True)
    fd = os.open(os.path.join(store, LOCK), os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _store_copy(run_path, store, now, role):
    """Copy RUN.h5 into KIND/<date>_<commit>[_n].h5 (never over a kept file); returns
    (identity, store-relative path, entry date). A run that did not finish is refused: as the
    baseline it would pass every night that measures less, and as a night it teaches a noise.
    Called under _locked(store); the copy goes through a temp file of its own (outfile), so a
    promote killed mid-copy leaves no half file under the kept name."""
    ident = run_identity(run_path)
    if ident["unfinished"]:
        what = "the baseline" if role == "baseline" else "a history night"
        raise BaselineError(f"{run_path}: {ident['unfinished']}: only a complete run can be {what}")
    date = now.strftime("%Y-%m-%dT%H%M%SZ")
    kind_dir = os.path.join(store, ident["kind"])
    os.makedirs(kind_dir, exist_ok=True)
    base = f"{date}_{ident['commit'][:12]}"
    name, n = base + ".h5", 1
    while os.path.exists(os.path.join(kind_dir, name)):
        n += 1
        name = f"{base}_{n}.h5"
    rel = os.path.join(ident["kind"], name)
    with open(run_path, "rb") as src, outfile.replacing(os.path.join(store, rel), "wb") as dst:
        shutil.copyfileobj(src, dst, 1 << 20)
    return ident, rel, now.strftime("%Y-%m-%dT%H:%M:%SZ")


def _entry(ident, rel, date, run_path, role):
    return {"date": date, "commit": ident["commit"], "file": rel, "current": role == "baseline",
            "role": role, "gpu": ident["gpu"], "nodes": ident["nodes"],
            "config_sha256": ident["config"], "source": os.path.abspath(run_path)}


def promote(run_path, store, now=None):
    """Copy RUN.h5 into the store as KIND's new current baseline; returns the new entry."""
    with _locked(store):
        ident, rel, date = _store_copy(run_path, store,
                                       now or datetime.datetime.now(datetime.timezone.utc), "baseline")
        idx = read_index(store)
        entries = idx.setdefault(ident["kind"], [])
        for e in entries:
            e["current"] = False
        entry = _entry(ident, rel, date, run_path, "baseline")
        entries.append(entry)
        write_index(store, idx)
    return entry


def record(run_path, store, now=None, keep=KEEP_NIGHTS):
    """Keep RUN.h5 as a night of KIND's history (not a baseline); the oldest nights beyond
    `keep` leave the index first, then their files go. Returns the new entry."""
    with _locked(store):
        ident, rel, date = _store_copy(run_path, store,
                                       now or datetime.datetime.now(datetime.timezone.utc), "night")
        idx = read_index(store)
        entries = idx.setdefault(ident["kind"], [])
        entry = _entry(ident, rel, date, run_path, "night")
        entries.append(entry)
        nights = [e for e in entries if e.get("role") == "night"]
        old = nights[:-keep] if keep and len(nights) > keep else []
        idx[ident["kind"]] = [e for e in entries if e not in old]
        write_index(store, idx)
        for e in old:
            try:
                os.unlink(os.path.join(store, e["file"]))
            except OSError:
                pass  # already gone: the index no longer names it
    return entry


def show(store, out=None):
    out = out or sys.stdout  # looked up at call time, so redirect_stdout applies
    idx = read_index(store)
    if not idx:
        print(f"no baselines in {store}", file=out)
        return 0
    for kind in sorted(idx):
        entries = idx[kind]
        first = entries[0] if entries else {}
        print(f"{kind}  (gpu {first.get('gpu', '?')}, {first.get('nodes', '?')} node(s), "
              f"{len(entries)} entr{'y' if len(entries) == 1 else 'ies'})", file=out)
        for e in entries:
            mark = "*" if e.get("current") else ("n" if e.get("role") == "night" else " ")
            print(f"  {mark} {e['date']}  {e['commit'][:12]}  {e['file']}", file=out)
    return 0


def check_store(store):
    """A store is a directory, or a path where one can be made: a file there is refused
    before show says "no baselines" of it or promote fails inside os.makedirs."""
    if os.path.exists(store) and not os.path.isdir(store):
        raise BaselineError(f"--store {store}: is a file, not a baseline store directory")


def command(args):
    """`rb-analysis baseline ACTION`: exit 0 done, 2 unusable input, 3 (path) no baseline."""
    try:
        return _command(args)
    except BaselineError as e:
        print(f"rb-analysis baseline: {e}", file=sys.stderr)
        return 2
    except OSError as e:  # the store cannot be written (read-only, full, a file in the path)
        where = e.filename or args.store
        print(f"rb-analysis baseline {args.action}: cannot write to the store {args.store}: "
              f"{where}: {e.strerror or e}", file=sys.stderr)
        return 2


def _command(args):
    store = args.store
    if args.action != "show" and not args.file:
        print(f"rb-analysis baseline {args.action}: needs a file", file=sys.stderr)
        return 2
    check_store(store)
    if args.action == "show":
        return show(store)
    if args.action == "promote":
        e = promote(args.file, store)
        print(f"baseline: promoted {args.file} -> {os.path.join(store, e['file'])} (current)")
        return 0
    if args.action == "record":
        e = record(args.file, store)
        print(f"baseline: recorded {args.file} -> {os.path.join(store, e['file'])} (history night)")
        return 0
    kind = identity(args.file, args.gpu, args.nodes)["kind"]
    e = current(store, kind)
    if e is None:
        print(f"rb-analysis baseline: no baseline for kind {kind} in {store}", file=sys.stderr)
        return EXIT_NONE
    path = os.path.join(store, e["file"])
    if not os.path.isfile(path):
        print(f"rb-analysis baseline: index names {path}, which is missing", file=sys.stderr)
        return EXIT_NONE
    print(path)
    return 0
