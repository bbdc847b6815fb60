"""Checks run files before this process opens them with HDF5 (issue #31, item 12).

A corrupted file can make the HDF5 library crash (a segfault while it decodes an object
header) or loop forever: nothing Python can catch, and the command dies without a word. So
before the first h5py.File of a path, check() looks for the HDF5 signature itself (plain
reads), then a child process opens the file and walks what the analysis reads: every group,
every attribute value, every dataset header, the first element of each dataset, and where each
dataset's data lies (it must end inside the file). The child's death by a signal, its running
past CHECK_TIMEOUT_S and an HDF5 error all become a reader.RingbenchFileError that names the
file. Inside a sweep's group they only leave that sweep out (bad_sweeps(): the reader lists it
as unreadable, as it does the torn sweep a killed run was writing) and the rest is walked
again. No dataset is read whole, so a large file costs about what a small one does: one
interpreter start (~0.2 s) for the whole process (the child stays for the next check), plus
the files' headers. Files that passed are remembered by path, size and mtime.

The child runs this file as __main__ (runpy) and reads requests on its stdin: it imports h5py
only.
"""
import atexit
import json
import math
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time

# HDF5 looks for its signature at 0, 512, 1024, 2048, ... (a user block may come first).
FIRST_SIGNATURE_OFFSET = 512
SIGNATURE = b"\x89HDF\r\n\x1a\n"
# A healthy file's headers are walked in well under a second even at GiBs of data; a child
# still running after this is stuck in a loop of a corrupted file's metadata. The environment
# can give more (a file system that answers slowly).
TIMEOUT_ENV = "RB_ANALYSIS_CHECK_TIMEOUT_S"


def timeout_problem(text):
    """Why the environment's RB_ANALYSIS_CHECK_TIMEOUT_S is unusable ("" when it is or is unset);
    rb-analysis refuses to start with it (exit 2) rather than a ValueError traceback."""
    if not text:
        return ""
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if not (math.isfinite(value) and value > 0):
        return f"{TIMEOUT_ENV}={text!r}: a positive number of seconds expected"
    return ""


_ENV_TIMEOUT = os.environ.get(TIMEOUT_ENV, "")
CHECK_TIMEOUT_S = 60.0 if timeout_problem(_ENV_TIMEOUT) else float(_ENV_TIMEOUT or 60.0)
# Objects a walk visits at most: a corrupted group can name the same objects over and over.
MAX_OBJECTS = 200000

# (realpath, size, mtime_ns, inode) of each file that passed -> {sweep: why HDF5 cannot read it}
_passed = {}


def _error(msg):
    from .reader import RingbenchFileError  # reader imports this module
    return RingbenchFileError(msg)


def unreadable(path, why):
    """The one message of a file HDF5 cannot read."""
    return f"{path}: not a readable ringbench output ({why})"


CRASHED = "HDF5 library crashed reading it: truncated or corrupted?"


def _hung():
    return f"HDF5 did not finish reading its metadata in {CHECK_TIMEOUT_S:g} s: corrupted?"


def has_signature(path, size):
    """Whether the file holds the HDF5 signature where HDF5 looks for it."""
    with open(path, "rb") as f:
        offset = 0
        while offset + len(SIGNATURE) <= size:
            f.seek(offset)
            if f.read(len(SIGNATURE)) == SIGNATURE:
                return True
            offset = FIRST_SIGNATURE_OFFSET if offset == 0 else 2 * offset
    return False


def _key(path):
    st = os.stat(path)
    return (os.path.realpath(path), st.st_size, st.st_mtime_ns, st.st_ino)


def _plain_checks(path):
    """Raises for what needs no HDF5: missing, a directory, empty, no signature."""
    if not os.path.exists(path):
        raise _error(f"{path}: no such file")
    if os.path.isdir(path):
        raise _error(f"{path}: is a directory, not a ringbench HDF5 file")
    size = os.path.getsize(path)
    if size == 0:
        raise _error(f"{path}: empty file (0 bytes), not a ringbench output (a run that died "
                     "before writing it, or a failed copy?)")
    try:
        signed = has_signature(path, size)
    except OSError as exc:
        raise _error(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not signed:
        raise _error(f"{path}: not an HDF5 file (is it a ringbench output file? ringbench "
                     "writes .h5 files named <run>_<UTC time>.h5)")


def check(paths):
    """Raises reader.RingbenchFileError for the first of `paths` that is missing, not HDF5, or
    that HDF5 cannot walk outside its sweeps (an error, a crash, a hang). A sweep HDF5 cannot
    walk is only left out: bad_sweeps() names it for the reader (the sweep a killed run was
    writing may be torn). Each file is walked once per process."""
    todo = {}
    for p in map(str, paths):
        _plain_checks(p)
        key = _key(p)
        if key not in _passed and key not in todo.values():
            todo[p] = key
    if todo:
        bad = _walk_in_child(list(todo))
        _passed.update({key: bad[p] for p, key in todo.items()})


def bad_sweeps(path):
    """{sweep name: why} of a checked file: the sweeps HDF5 cannot read, to be left unread."""
    try:
        return dict(_passed.get(_key(path), {}))
    except OSError:
        return {}


def _walk_in_child(paths):
    """{path: {sweep: why}}; raises for the first file whose walk fails outside its sweeps.
    A walk that dies inside a sweep is asked again from that file, the sweep left out."""
    bad = {p: {} for p in paths}
    i = 0
    while i < len(paths):
        events, end = _CHECKER.walk([(os.path.abspath(p), sorted(bad[p])) for p in paths[i:]])
        i += _take(paths[i:], events, end, bad)
    return bad


def _take(paths, events, end, bad):
    """Reads one answer: returns how many files it walked to the end (all of them, or up to
    the one whose walk died in a sweep, which is marked in `bad` to be walked again)."""
    for i, p in enumerate(paths):
        ev = events.get(i, [])
        bad[p].update({e[2]: f"HDF5: {e[3]}" for e in ev if e[0] == "sweep_error"})
        last = ev[-1][0] if ev else None
        if last == "ok":
            continue
        if last == "error":
            raise _error(unreadable(p, ev[-1][2]))
        if last == "sweep" and end and end[0] in ("hung", "crashed"):
            bad[p][ev[-1][2]] = _hung() if end[0] == "hung" else CRASHED
            return i
        raise _error(_died(p, bool(ev), end))
    return len(paths)


def _died(path, started, end):
    """The message of a file whose walk ended neither with ok nor with an error."""
    how, detail = end or ("exited", "no answer")
    if started and how == "hung":
        return unreadable(path, _hung())
    if started and how == "crashed":
        return unreadable(path, CRASHED)
    return f"{path}: could not be checked: the checking process {detail}"


# run_path, not `python3 filecheck.py`: a script's folder leads sys.path, and this one's
# modules (report, model, ...) must not stand in for others' imports.
_CHILD = "import runpy, sys; runpy.run_path(sys.argv[1], run_name='__main__')"


def _spawn():
    """The child, its stderr in a file (read when it dies; a pipe nobody reads could fill)."""
    env = dict(os.environ, HDF5_USE_FILE_LOCKING="FALSE")  # as reader.py: a writer may hold it
    err = tempfile.TemporaryFile()
    proc = subprocess.Popen([sys.executable, "-c", _CHILD, os.path.abspath(__file__)], env=env,
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
    proc.errfile = err
    return proc


class _Checker:
    """The checking process, started at the first check and kept for the next ones (its
    import of h5py is most of a check's cost): a request is one JSON line on its stdin, the
    answer JSON lines on its stdout, ending with ["done"]. One that dies or hangs is replaced
    at the next request; one that outlives this process ends at the end of its stdin."""

    def __init__(self):
        self.proc, self.owner, self.buf = None, None, b""
        self.lock = threading.Lock()

    def walk(self, files):
        """({file index: [events]}, end): end None when the child answered the whole request,
        else ("hung" | "crashed" | "exited", what happened)."""
        with self.lock:
            if self.proc is None or self.owner != os.getpid():  # a fork starts its own
                self.proc, self.owner, self.buf = _spawn(), os.getpid(), b""
            try:
                self.proc.stdin.write((json.dumps(files) + "\n").encode())
                self.proc.stdin.flush()
            except OSError:
                pass  # it died before: the read below finds the end of its output
            return self._answer(time.monotonic() + CHECK_TIMEOUT_S + len(files))

    def _answer(self, deadline):
        events = {}
        while True:
            kind, line = self._line(deadline)
            if kind != "line":
                return events, self._end(kind)
            try:
                e = json.loads(line)
            except ValueError:
                continue  # not ours (a library writing to stdout)
            if e == ["done"]:
                return events, None
            if isinstance(e, list) and len(e) >= 2 and isinstance(e[1], int):
                events.setdefault(e[1], []).append(e)

    def _line(self, deadline):
        """("line", bytes), ("eof", None) or ("timeout", None)."""
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return "timeout", None
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                return "eof", None
            self.buf += chunk
        line, _, self.buf = self.buf.partition(b"\n")
        return "line", line

    def _end(self, kind):
        """Stops the child after a timeout or the end of its output: what happened to it."""
        if kind == "timeout":
            self.stop()
            return ("hung", None)
        try:
            code = self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            code = None
        err = self._stderr_tail()
        self.stop()
        if code is not None and code < 0:
            return ("crashed", _how(code))
        return ("exited", f"ended with {_how(code) if code is not None else 'its output'}"
                + (f" ({err})" if err else ""))

    def _stderr_tail(self):
        try:
            self.proc.errfile.seek(0)
            lines = self.proc.errfile.read().decode("utf-8", "replace").strip().splitlines()
            return lines[-1] if lines else ""
        except (OSError, ValueError):
            return ""

    def stop(self):
        """Ends the child (at exit, and before a test changes how it is started)."""
        proc, self.proc, self.buf = self.proc, None, b""
        if proc is None or self.owner != os.getpid():
            return
        for pipe in (proc.stdin, proc.stdout):
            try:
                pipe.close()
            except OSError:
                pass
        try:
            proc.wait(timeout=2)  # the end of its stdin ends it
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.errfile.close()


def _how(code):
    if code < 0:
        try:
            return signal.Signals(-code).name
        except ValueError:
            return f"signal {-code}"
    return f"exit code {code}"


_CHECKER = _Checker()
atexit.register(_CHECKER.stop)


def stop():
    """Ends the checking process now (the next check starts another)."""
    with _CHECKER.lock:
        _CHECKER.stop()


# ---- the child: runs with h5py only (no pandas, no package import) ---------------------------

def _say(*event):
    print(json.dumps(event), flush=True)  # flushed: what was said survives a crash


def _why(exc):
    return " ".join(str(exc).split()) or type(exc).__name__


def _walk(path, skip, i):
    """Opens the file and touches what the reader will: the tree outside /sweeps/<name>, then
    each sweep on its own (an event before and after it); raises on what HDF5 reports outside
    the sweeps, says sweep_error for a sweep."""
    import h5py
    size = os.path.getsize(path)
    with h5py.File(path, "r") as f:
        seen = set()
        _tree(f, "/", size, seen, lambda name: name != "/sweeps")
        sweeps = f.get("sweeps")
        for name in (list(sweeps) if isinstance(sweeps, h5py.Group) else []):
            if name in skip:
                continue
            _say("sweep", i, name)
            try:
                _tree(_member(sweeps, f"/sweeps/{name}", name)[1], f"/sweeps/{name}", size, seen)
            except Exception as exc:  # noqa: BLE001 - HDF5's complaint is the answer
                _say("sweep_error", i, name, _why(exc))
                continue
            _say("sweep_ok", i, name)


def _tree(top, top_name, size, seen, descend=lambda name: True):
    """Every object under `top` once: its attributes, and a dataset's place and first element."""
    import h5py
    stack = [(top_name, top)]
    while stack:
        name, obj = stack.pop()
        addr = h5py.h5o.get_info(obj.id).addr
        if addr in seen:
            continue  # linked twice (or a cycle): walked once
        seen.add(addr)
        if len(seen) > MAX_OBJECTS:
            raise ValueError(f"more than {MAX_OBJECTS} objects: a corrupted group?")
        for key in obj.attrs:
            _ = obj.attrs[key]  # read for its error: HDF5 raises on an attribute it cannot read
        if isinstance(obj, h5py.Dataset):
            _dataset(name, obj, size)
        elif isinstance(obj, h5py.Group):
            if descend(name):
                stack += [_member(obj, f"{name.rstrip('/')}/{k}", k) for k in obj]
        else:
            raise ValueError(f"{name}: an object of unknown type")


def _member(group, name, key):
    """(name, object) of a group's member; h5py gives None for a link it cannot resolve."""
    obj = group.get(key)
    if obj is None:
        raise ValueError(f"{name}: a link to nothing")
    return name, obj


def _dataset(name, ds, size):
    """The dataset's data must lie inside the file; its first element must read."""
    offset = ds.id.get_offset()
    stored = ds.id.get_storage_size()
    if offset is not None and offset + stored > size:
        raise ValueError(f"dataset {name}: its data ends at byte {offset + stored}, the file at "
                         f"{size}: truncated?")
    if ds.shape and all(ds.shape):
        _ = ds[(0,) * len(ds.shape)]  # read for its error, as the docstring says
    elif ds.shape == ():
        _ = ds[()]


def _walk_files(files):
    """Walks [[path, [sweeps to leave out]], ...]: events start, sweep / sweep_ok /
    sweep_error, then ok or error (HDF5's reason), one JSON line each; stops at an error."""
    for i, (path, skip) in enumerate(files):
        _say("start", i)
        try:
            _walk(path, set(skip), i)
        except Exception as exc:  # noqa: BLE001 - any HDF5 complaint is the answer
            _say("error", i, f"HDF5: {_why(exc)}: truncated or corrupted?")
            return
        _say("ok", i)


def _serve(lines):
    """Answers each request line, then says done; ends with its input."""
    for line in lines:
        _walk_files(json.loads(line))
        _say("done")


if __name__ == "__main__":
    _serve(iter(sys.stdin.readline, ""))
