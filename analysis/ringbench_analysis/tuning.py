"""tuning: the decision core of `rb-analysis tune` and `rb-analysis compare-tuning`.

Pure functions on a pandas DataFrame of kernel-path timings; no HDF5 reading, no CLI.

Input of choose(): one row per (shape, block_rows, path) measurement with the columns
  dtype, head_dim, causal, rate, segment   the shape group (dilation rate and segment)
  block_rows                                the grid coordinate switch points are found on
  path                                      the kernel path's name
  time_s                                    forward + backward time of one step, in seconds
                                            (the median over iterations); instead of time_s a
                                            frame may carry forward_time_s and backward_time_s,
                                            which are summed: the policy optimises the training
                                            step, not one direction
  parity_ok                                 whether the path matched the reference there
Repeated rows of one (shape, block_rows, path) are merged: median time, parity_ok only if all
repeats passed. A non-finite time counts as "not measured" there.

Decision per grid point (the "raw" choice):
  * candidates are the paths measured there that passed parity;
  * none -> the point is unusable (path None);
  * the default passed -> the fastest other candidate replaces it only when
    time(default) / time(candidate) >= margin (margin 1.2 = 20 % faster), else the default;
  * the default failed parity or was not measured -> the fastest candidate, whatever the margin.

Hysteresis (exact rule), walking block_rows upwards with `current` starting as the default:
  a point whose raw choice differs from `current` switches `current` to it only if that same
  raw choice holds on the next `hysteresis` grid points starting here (hysteresis=2: this
  point and the next one; near the top of the grid fewer points remain, so an isolated flip on
  the last point is smoothed too; a shape group with fewer points than `hysteresis` needs them
  all). Otherwise the point keeps `current`, which is allowed only when `current` passed
  parity there, was measured there, and is not slower than the default there (when the
  default passed); when keeping is not allowed the raw choice is taken (a forced switch).
  An unusable point resets `current` to None, so the next usable point takes its raw choice.
  hysteresis=1 disables smoothing.

Ranges: consecutive points with the same final path form one Range; ranges are contiguous in
the measured grid and cover every measured block_rows of the shape group. A Range's speedup is
the smallest time(default)/time(path) over its points (conservative; NaN when the default was
never measured in the range); its `why` joins the distinct reasons of its points.
"""
import datetime
import json
import math
from collections import namedtuple
from collections.abc import Mapping

SHAPE_KEYS = ("dtype", "head_dim", "causal", "rate", "segment")
MACHINE_KEYS = ("gpu", "driver", "cuda", "cudnn", "ringbench_version", "commit")
POLICY_VERSION = 1

Range = namedtuple("Range", "rows_lo rows_hi path speedup_vs_default why")
PolicyComparison = namedtuple("PolicyComparison", "changes exit_code")


class TuningError(ValueError):
    pass


# ---------------------------------------------------------------------------------- choose

class _Point:
    """One grid point of one shape group: every measured path's time and parity."""

    def __init__(self, rows, times, passed):
        self.rows = rows
        self.times = times      # path -> finite time_s
        self.passed = passed    # paths measured here that passed parity

    def usable(self, path):
        return path in self.passed

    def speedup(self, path, default):
        t_default = self.times.get(default, math.nan)
        t_path = self.times.get(path, math.nan)
        return t_default / t_path if t_path > 0 else math.nan


def _merged_frame(measurements):
    df = measurements.copy()
    if "time_s" not in df.columns and {"forward_time_s", "backward_time_s"} <= set(df.columns):
        df["time_s"] = df["forward_time_s"] + df["backward_time_s"]
    missing = [c for c in SHAPE_KEYS + ("block_rows", "path", "time_s", "parity_ok")
               if c not in df.columns]
    if missing:
        raise TuningError(f"measurements lack column(s) {', '.join(missing)}")
    # NaN parity would read as True after astype(bool): an unknown parity is a failure.
    df["parity_ok"] = df["parity_ok"].map(lambda v: bool(v) if v is not None and v == v else False)
    df["time_s"] = df["time_s"].astype(float)
    return (df.groupby(list(SHAPE_KEYS) + ["block_rows", "path"], sort=True)
              .agg(time_s=("time_s", "median"), parity_ok=("parity_ok", "all"))
              .reset_index())


def _points(group):
    points = []
    for rows, at in group.groupby("block_rows", sort=True):
        times, passed = {}, set()
        for row in at.itertuples(index=False):
            if math.isfinite(row.time_s) and row.time_s > 0:
                times[row.path] = float(row.time_s)
                if row.parity_ok:
                    passed.add(row.path)
        points.append(_Point(_plain(rows), times, passed))
    return points


def _raw_choice(point, default, margin):
    """(path, why) at one point before hysteresis."""
    if not point.passed:
        return None, "unusable: no path passed parity"
    fastest = min(point.passed, key=lambda p: (point.times[p], p))
    if not point.usable(default):
        state = "failed parity" if default in point.times else "was not measured"
        return fastest, f"default {default} {state}; {fastest} is the fastest passing path"
    others = [p for p in point.passed if p != default]
    if not others:
        return default, f"default {default} is the only passing path"
    best = min(others, key=lambda p: (point.times[p], p))
    speedup = point.speedup(best, default)
    if speedup >= margin - 1e-12:
        return best, f"{best} is {speedup:.2f}x faster than default {default} (margin {margin:.2f})"
    if speedup <= 1.0:
        return default, f"default {default} is the fastest path"
    return default, (f"default {default} kept: {best} only {speedup:.2f}x faster "
                     f"(margin {margin:.2f})")


def _may_keep(point, current, default):
    if current is None or not point.usable(current):
        return False
    if current == default or not point.usable(default):
        return True
    return point.times[current] <= point.times[default]


def _smooth(points, raws, default, hysteresis):
    """Apply the hysteresis rule of the module docstring to the raw choices."""
    need = min(hysteresis, len(points))
    current, final = default, []
    for i, (point, (path, why)) in enumerate(zip(points, raws)):
        if path is None or path == current:
            final.append((path, why))
            current = path
            continue
        window = raws[i:i + need]
        holds = len(window) == need and all(p == path for p, _ in window)
        if holds or not _may_keep(point, current, default):
            final.append((path, why))
            current = path
        else:
            final.append((current, f"hysteresis: kept {current} over isolated {path} ({why})"))
    return final


def _ranges(points, final, default):
    ranges, start = [], 0
    for i in range(1, len(points) + 1):
        if i < len(points) and final[i][0] == final[start][0]:
            continue
        run = range(start, i)
        path = final[start][0]
        speedups = [points[j].speedup(path, default) for j in run] if path else []
        speedups = [s for s in speedups if math.isfinite(s)]
        reasons = list(dict.fromkeys(final[j][1] for j in run))
        ranges.append(Range(points[start].rows, points[i - 1].rows, path,
                            min(speedups) if speedups else math.nan, "; ".join(reasons)))
        start = i
    return ranges


def choose(measurements, default_path, margin, hysteresis=2):
    """Per shape group (a tuple in SHAPE_KEYS order) -> ordered list of Range over block_rows.

    See the module docstring for the input columns and the exact decision rules.
    """
    if not (isinstance(margin, (int, float)) and margin >= 1.0):
        raise TuningError(f"safety margin must be a number >= 1.0, got {margin!r}")
    if int(hysteresis) != hysteresis or hysteresis < 1:
        raise TuningError(f"hysteresis must be an integer >= 1, got {hysteresis!r}")
    merged = _merged_frame(measurements)
    choices = {}
    for shape, group in merged.groupby(list(SHAPE_KEYS), sort=True):
        points = _points(group)
        raws = [_raw_choice(p, default_path, margin) for p in points]
        final = _smooth(points, raws, default_path, int(hysteresis))
        choices[tuple(_plain(v) for v in shape)] = _ranges(points, final, default_path)
    return choices


# ---------------------------------------------------------------------------------- policy

def _plain(value):
    """numpy scalars -> Python scalars, so YAML/JSON writers see plain types."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def policy_dict(choices, machine_info, margin, date=None):
    """choose()'s result -> the plain dict of the tuned-policy file (schema version 1).

    machine_info: mapping with any of MACHINE_KEYS (absent ones are written as null, others are
    dropped). date: ISO date string, default today (UTC). A range's path null means no path
    passed parity there; speedup null means the default was never measured in the range.
    """
    machine = {k: _plain(machine_info.get(k)) for k in MACHINE_KEYS}
    rules = []
    for shape in sorted(choices, key=lambda s: tuple(str(v) for v in s)):
        rule = {k: _plain(v) for k, v in zip(SHAPE_KEYS, shape)}
        rule["ranges"] = [{
            "block_rows_min": _plain(r.rows_lo),
            "block_rows_max": _plain(r.rows_hi),
            "path": r.path,
            "speedup": None if r.speedup_vs_default is None or not math.isfinite(
                r.speedup_vs_default) else round(float(r.speedup_vs_default), 4),
        } for r in choices[shape]]
        rules.append(rule)
    return {
        "version": POLICY_VERSION,
        "machine": machine,
        "date": date or datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "margin": float(margin),
        "rules": rules,
    }


def write_policy_yaml(d, path):
    """Write the policy dict as YAML. Without PyYAML the file is indented JSON, which is valid
    YAML too, so every reader of the policy (read_policy_yaml, PyYAML, yq) still loads it."""
    try:
        import yaml
    except ImportError:
        text = json.dumps(d, indent=2, allow_nan=False) + "\n"
    else:
        text = yaml.safe_dump(d, sort_keys=False, default_flow_style=False)
    with open(path, "w") as f:
        f.write(text)


def read_policy_yaml(path):
    with open(path) as f:
        text = f.read()
    try:
        import yaml
    except ImportError:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TuningError(f"{path}: not readable without PyYAML ({exc})") from None
    else:
        d = yaml.safe_load(text)
    if not isinstance(d, Mapping) or d.get("version") != POLICY_VERSION:
        raise TuningError(f"{path}: not a tuned policy of version {POLICY_VERSION}")
    return d


# --------------------------------------------------------------------------------- compare

def _rule_key(rule):
    return tuple(rule.get(k) for k in SHAPE_KEYS)


def _path_at(rule, rows):
    for r in rule.get("ranges", []):
        if r["block_rows_min"] <= rows <= r["block_rows_max"]:
            return r["path"]
    return None


def _steps_to(old_paths, index, path):
    """Grid steps from `index` to the nearest point where the old policy chose `path`."""
    hits = [abs(i - index) for i, p in enumerate(old_paths) if p == path]
    return min(hits) if hits else None


def _shape_changes(shape, old_rule, new_rule, grid):
    old_paths = [_path_at(old_rule, g) for g in grid]
    new_paths = [_path_at(new_rule, g) for g in grid]
    changes, i = [], 0
    while i < len(grid):
        if old_paths[i] == new_paths[i]:
            i += 1
            continue
        j = i
        while (j + 1 < len(grid) and (old_paths[j + 1], new_paths[j + 1])
               == (old_paths[i], new_paths[i])):
            j += 1
        steps = [_steps_to(old_paths, k, new_paths[i]) for k in range(i, j + 1)]
        moved = None if None in steps else max(steps)
        kind = "changed choice" if moved is None else "moved switch point"
        text = (f"{_shape_text(shape)} block_rows {grid[i]}..{grid[j]}: "
                f"{old_paths[i]} -> {new_paths[i]}"
                + (f" ({kind}, {moved} grid step{'s' if moved != 1 else ''})"
                   if moved is not None else f" ({kind})"))
        changes.append({"kind": kind, "shape": dict(zip(SHAPE_KEYS, shape)),
                        "block_rows_min": grid[i], "block_rows_max": grid[j],
                        "old_path": old_paths[i], "new_path": new_paths[i],
                        "steps": moved, "text": text})
        i = j + 1
    return changes


def _shape_text(shape):
    return " ".join(f"{k}={v}" for k, v in zip(SHAPE_KEYS, shape))


def compare_policies(old, new, grid):
    """Two policy dicts -> PolicyComparison(changes, exit_code).

    grid: the block_rows grid (a sequence, or a mapping shape tuple -> sequence). At every grid
    point of every shape in both policies the chosen paths are compared; a run of neighbouring
    points with the same (old, new) pair is one change. Its `steps` is the largest distance, in
    grid steps, from a changed point to the nearest point where OLD already chose the new path
    ("moved switch point"); a new path OLD never chose for that shape is a "changed choice"
    (steps None). exit_code is 1 when any change moved more than one grid step or is a changed
    choice, else 0: a switch point moving to a neighbouring size is measurement noise. Shapes
    present in only one policy are listed ("added shape"/"removed shape") without failing.
    """
    old_rules = {_rule_key(r): r for r in old.get("rules", [])}
    new_rules = {_rule_key(r): r for r in new.get("rules", [])}
    changes = []
    for shape in sorted(set(old_rules) | set(new_rules), key=lambda s: tuple(map(str, s))):
        if shape not in old_rules or shape not in new_rules:
            kind = "added shape" if shape not in old_rules else "removed shape"
            changes.append({"kind": kind, "shape": dict(zip(SHAPE_KEYS, shape)),
                            "steps": None, "text": f"{_shape_text(shape)}: {kind}"})
            continue
        shape_grid = grid.get(shape, []) if isinstance(grid, Mapping) else grid
        changes += _shape_changes(shape, old_rules[shape], new_rules[shape],
                                  sorted(shape_grid))
    failing = any(c["kind"] == "changed choice" or
                  (c["kind"] == "moved switch point" and c["steps"] > 1) for c in changes)
    return PolicyComparison(changes, 1 if failing else 0)
