"""Files the analysis writes (reports, JSON, CSV, policies, plots): written to a new temp file in
the destination's folder, then os.replace'd over the path. A symbolic link planted at the path is
replaced itself, never its target written through; a FIFO or device there is never opened."""
import contextlib
import os
import tempfile


@contextlib.contextmanager
def replacing(path, mode="w", **kw):
    """open(path, mode) for writing, but through a temp file renamed over `path` on success."""
    folder = os.path.dirname(os.path.abspath(path))
    fd, tmp = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".tmp", dir=folder)
    try:
        umask = os.umask(0)
        os.umask(umask)
        os.fchmod(fd, 0o666 & ~umask)  # the mode open() would give, not mkstemp's 0600
        os.close(fd)
        with open(tmp, mode, **kw) as f:  # f.name: the temp file's path (a plot's savefig spy reads it)
            yield f
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def save_figure(fig, path, **kw):
    """fig.savefig(path, **kw) through replacing(); the format from the name's extension."""
    with replacing(path, "wb") as f:
        fig.savefig(f, format=os.path.splitext(path)[1][1:] or "png", **kw)


def not_regular(path):
    """Why an existing `path` cannot take an output file ("" when it can): a FIFO, device or socket
    (opening one would block or write elsewhere)."""
    import stat
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return ""
    if stat.S_ISREG(mode) or stat.S_ISDIR(mode):
        return ""
    kind = ("a FIFO" if stat.S_ISFIFO(mode) else "a socket" if stat.S_ISSOCK(mode)
            else "a device" if stat.S_ISCHR(mode) or stat.S_ISBLK(mode) else "not a regular file")
    return f"is {kind}, not a regular file"
