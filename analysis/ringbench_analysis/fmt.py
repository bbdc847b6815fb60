"""Number formatting and Markdown tables for the report (one place, so report.md, the
headline and the tests agree on how a number is written)."""
import math

import numpy as np


def missing(v):
    return v is None or (isinstance(v, (float, np.floating)) and not math.isfinite(v)) or v is np.nan


def num(v, digits=4, unit=""):
    if missing(v):
        return "-"
    if isinstance(v, (float, np.floating)):
        return f"{v:.{digits}g}{unit}"
    return f"{v}{unit}"


def si(v, unit):
    """1.23 GB/s, 456 MB/s: decimal prefixes (bandwidths, rates)."""
    if missing(v):
        return "-"
    for f, p in ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(v) >= f:
            return f"{v / f:.3g} {p}{unit}"
    return f"{v:.3g} {unit}"


def time(v):
    """Seconds as s / ms / us with 3 significant digits."""
    if missing(v):
        return "-"
    if v >= 1:
        return f"{v:.3g} s"
    if v >= 1e-3:
        return f"{v * 1e3:.3g} ms"
    return f"{v * 1e6:.3g} us"


def ms(v):
    return "-" if missing(v) else f"{v:.3g}"


def pct(v):
    return "-" if missing(v) else f"{v:.1f} %"


def tflops(v):
    return "-" if missing(v) else (f"{v:.1f}" if v >= 10 else f"{v:.3g}")


def pair(fwd, bwd, one):
    """"97.9/95.1": a forward and a backward figure, each written by `one`; the forward alone
    where the backward is missing, "-" where both are (the run's own table writes them so)."""
    if missing(fwd) and missing(bwd):
        return "-"
    first = "-" if missing(fwd) else one(fwd)
    return first if missing(bwd) else f"{first}/{one(bwd)}"


def size(v):
    """Bytes as B / KiB / MiB / GiB (message sizes)."""
    if missing(v):
        return "-"
    v = float(v)
    for unit, f in (("GiB", 2**30), ("MiB", 2**20), ("KiB", 2**10)):
        if v >= f:
            x = v / f
            return f"{x:.0f} {unit}" if x == int(x) else f"{x:.3g} {unit}"
    return f"{v:.0f} B"


def md_table(df, columns):
    """Markdown table of `df`: columns = [(column, header, formatter or None)]. Written here
    rather than with DataFrame.to_markdown, which needs the optional tabulate package."""
    cols = [(c, h, f or str) for c, h, f in columns if c in df.columns]
    out = ["| " + " | ".join(h for _, h, _ in cols) + " |", "|" + "---|" * len(cols)]
    for _, row in df.iterrows():
        out.append("| " + " | ".join(f(row[c]).replace("|", "/") for c, _, f in cols) + " |")
    return out


def records(df):
    """DataFrame -> JSON-ready records (NaN and NA become null, numpy scalars Python ones)."""
    if df is None or len(df) == 0:
        return []
    clean = df.astype(object).where(df.notna(), None)
    return [{k: (v.item() if isinstance(v, np.generic) else v) for k, v in r.items()}
            for r in clean.to_dict("records")]
