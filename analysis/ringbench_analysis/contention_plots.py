"""What the contention figures draw, from a read sweep: the per-phase box data, the monitor
panels (or why a panel has no data) and the phase spans; and drawing both figures for the
report (plots.py holds the matplotlib code).
"""
import os

import numpy as np

from .contention_read import KEYS, MEASURE, MONITOR, MONITOR_GROUP
from .contention_verdict import shape_label

# What each panel draws: (title, y label, [(series column, label, scale, style, rate)],
# families: the heads of the Monitor::unavailable lines that explain it). rate: plot
# d(counter)/dt. A line "<family>: why" explains every panel of the family, "<family> <dataset>:
# why" (e.g. "gpu power_w: ...") the panels drawing that dataset, "monitor: why" every panel.
PANELS = [
    ("GPU clocks", "clock (MHz)",
     [(MONITOR["sm_clock"], "SM", 1e-6, "-", False), (MONITOR["mem_clock"], "memory", 1e-6, "--", False)],
     ("gpu",)),
    ("GPU power", "power (W)", [(MONITOR["power"], "power", 1, "-", False)],
     ("gpu",)),
    ("GPU temperature", "temperature (°C)", [(MONITOR["temperature"], "temperature", 1, "-", False)],
     ("gpu",)),
    ("PCIe throughput", "throughput (GB/s)",
     [(MONITOR["pcie_tx"], "TX", 1e-9, "-", False), (MONITOR["pcie_rx"], "RX", 1e-9, "--", False)],
     ("gpu",)),
    ("CPU utilisation (node)", "busy (% of a CPU)",
     [(MONITOR["cpu_busy"] + "_mean", "mean over CPUs", 100, "-", False),
      (MONITOR["cpu_busy"] + "_max", "max over CPUs", 100, "--", False)],
     ("cpu_busy",)),
    ("Context switches per rank", "switches per second",
     [(MONITOR["involuntary"], "involuntary", 1, "-", True),
      (MONITOR["voluntary"], "voluntary", 1, ":", True)],
     ("context switches",)),
    ("CPU migrations per rank", "migrations per second",
     [(MONITOR["migrations"], "migrations", 1, "-", True)],
     ("migrations",)),
]
PANEL_YLIM = {"CPU utilisation (node)": (0, 105)}  # a full scale: 100 % must look full
MAX_RANK_LINES = 8  # more ranks than this: the per-rank counters are summed into one line


def _rate(t, v):
    ok = np.isfinite(t) & np.isfinite(v)
    t, v = t[ok], v[ok]
    if len(t) < 2:
        return np.array([]), np.array([])
    dt = np.diff(t)
    good = dt > 0
    return t[1:][good], (np.diff(v)[good] / dt[good])


def _panel_lines(c, series, roles):
    """[(label, t, y, style, rank)] of one panel: every rank whose series has a finite value
    (rank -1: a sum over ranks). The plot gives each rank one colour, each series a style."""
    lines = []
    many = len(c.monitor["rank"].unique()) > MAX_RANK_LINES
    for name, what, scale, style, rate in series:
        if name not in c.monitor:
            continue
        per = []
        for r, g in c.monitor.groupby("rank"):
            t, v = g["t_s"].to_numpy(float), g[name].to_numpy(float)
            t, v = _rate(t, v) if rate else (t, v)
            if np.isfinite(v).any():
                per.append((r, t, v * scale))
        if many and rate and per:  # a sum over ranks on a common time grid
            grid = per[0][1]
            total = sum(np.interp(grid, t, v) for _, t, v in per)
            lines.append((f"{what}, sum of {len(per)} ranks", grid, total, style, -1))
            continue
        for r, t, v in per:
            tag = _whose(name, r, roles)
            lines.append((f"{what}, {tag}" if len(series) > 1 else tag, t, v, style, r))
    return lines


def _whose(name, rank, roles):
    """Legend words for a rank's series: the GPU it watches, its node, or the rank itself."""
    if name.startswith(MONITOR["cpu_busy"]):
        return f"node of rank {rank}"
    if name in _GPU_SERIES:
        return f"GPU of rank {rank}"
    return f"rank {rank}" + (f" ({roles[rank]})" if roles.get(rank, MEASURE) != MEASURE else "")


_GPU_SERIES = {MONITOR[k] for k in ("sm_clock", "mem_clock", "power", "energy", "temperature",
                                    "gpu_util", "mem_util", "throttle", "pcie_tx", "pcie_rx",
                                    "memory_used")}


def _explains(head, families, names):
    if head in families or head == "monitor":
        return True
    family, _, what = head.partition(" ")
    return family in families and any(n in what.split("/") for n in names)


def _why_unavailable(c, names, tags, backend):
    """The Monitor::unavailable lines that name this panel's metrics, else a plain reason."""
    if c.monitor_missing:
        return c.monitor_missing
    found = []
    for lines in c.unavailable.values():
        for line in lines:
            if _explains(line.split(":", 1)[0].strip().lower(), tags, names) and line not in found:
                found.append(line)
    if found:
        return "; ".join(found)
    if not any(n in c.monitor_group for n in names):
        return f"{', '.join(names)} not in {MONITOR_GROUP}/"
    if "gpu" in tags and (MONITOR["gpu_bus"] in c.monitor_group and not c.gpu_watchers()):
        return ("no rank watched a GPU (" + (f"backend {backend}" if backend else "no GPU") + ")")
    return "every sample is NaN and the file gives no reason"


def monitor_panels(c, backend=""):
    """[{title, ylabel, lines: [(label, t_s, y, style, rank)], unavailable: reason or None}] in
    PANELS order; a panel whose series are all NaN (or absent) gets its reason, no lines."""
    roles = {}
    if len(c.placement):
        for r, g in c.placement.groupby("rank"):
            roles[int(r)] = MEASURE if (g["role"] == MEASURE).any() else str(g["role"].iloc[0])
    out = []
    for title, ylabel, series, tags in PANELS:
        lines = _panel_lines(c, series, roles) if len(c.monitor) else []
        why = None if lines else _why_unavailable(c, [s[0].replace("_mean", "").replace("_max", "")
                                                      for s in series], tags, backend)
        out.append({"title": title, "ylabel": ylabel, "lines": lines, "unavailable": why,
                    "ylim": PANEL_YLIM.get(title)})
    return out


def phase_spans(c):
    """[(phase, start_s, end_s)] in run order, on the monitors' clock: from the earliest start
    to the latest end over the phase's points and ranks (feeders included)."""
    out = []
    for ph in c.phases:
        rows = c.placement[c.placement[KEYS["phase"]] == ph]
        t0 = np.nanmin(rows["phase_start_s"], initial=np.inf)
        t1 = np.nanmax(rows["phase_end_s"], initial=-np.inf)
        if np.isfinite(t0) and np.isfinite(t1) and t1 > t0:
            out.append((ph, float(t0), float(t1)))
    return out


def box_data(c, table):
    """[(shape label, [(phase, per-iteration times of measuring ranks, slowdown, cv)])]."""
    shape = c.shape_keys
    out = {}
    for _, row in table.iterrows():
        label = shape_label(row, shape)
        t = c.samples.loc[c.samples["point"] == row["point"], "time_s"].to_numpy(float)
        out.setdefault(label, []).append((row[KEYS["phase"]], t, float(row["slowdown"]),
                                          float(row["cv"])))
    return list(out.items())


def draw(c, table, out_dir, tag, backend):
    """({name: file} drawn, {name: why not}, the monitor panels) of the boxes and
    monitor figures, written to out_dir as contention_<tag>_<name>.png."""
    from . import plots  # matplotlib only when a report is drawn
    drawn, why = {}, {}
    panels = monitor_panels(c, backend)
    jobs = (("boxes", lambda: plots.contention_boxes(
                box_data(c, table), c.phases, out_dir, f"contention_{tag}_boxes.png",
                f"Contention sweep '{c.name}': per-iteration times per phase")),
            ("monitor", lambda: plots.contention_monitor(
                panels, phase_spans(c), c.phases, out_dir, f"contention_{tag}_monitor.png",
                f"Contention sweep '{c.name}': monitors (phases shaded; rank clocks "
                "start together)")))
    for name, job in jobs:
        try:
            drawn[name] = os.path.basename(job())
        except plots.NoData as e:
            why[name] = str(e)
    return drawn, why, panels
