"""tuning: the decision core of `rb-analysis tune` and `rb-analysis compare-tuning`.

Pure functions on a pandas DataFrame of kernel-path timings; no HDF5 reading, no CLI
(tune.py builds the frame from a kernel_tuning sweep).

Input of choose(): one row per (shape, block_rows, path) measurement with the columns
  dtype, head_dim, causal, segment, rate   the shape group (rate/segment: the dilation)
  block_rows                                the grid coordinate switch points are found on
  path                                      the kernel path's name
  time_s                                    forward + backward time of one step, in seconds
                                            (the median over iterations); instead of time_s a
                                            frame may carry forward_time_s and backward_time_s,
                                            which are summed: the policy optimises the training
                                            step, not one direction
  parity_ok                                 whether the path matched the reference there
  default_path (optional)                   the path the built-in rule runs on the shape; used
                                            when choose() is given no default of its own
Repeated rows of one (shape, block_rows, path) are merged: median time, parity_ok only if all
repeats passed. A non-finite time counts as "not measured" there.

The default (the path the built-in `auto` rule runs) is per grid point: the built-in rule
decides by kernel shape, so it may change with block_rows inside one shape group (flash for
small exact blocks, cuDNN for large ones). choose()'s default_path is one path name for every
point, a mapping shape tuple -> path (every point of the shape), or None to take the frame's
default_path column (one value per shape group and block_rows).

Decision per grid point (the "raw" choice):
  * candidates are the paths measured there that passed parity;
  * none -> the point is unusable (path None);
  * the default passed -> the fastest other candidate replaces it only when
    time(default) / time(candidate) >= margin (margin 1.2 = 20 % faster), else the default;
  * the default failed parity or was not measured -> the fastest candidate, whatever the margin.

Hysteresis (exact rule), walking block_rows upwards with `current` starting as the first
point's default:
  a point whose raw choice differs from `current` switches `current` to it only if that same
  raw choice holds on the next `hysteresis` grid points starting here (hysteresis=2: this
  point and the next one; near the top of the grid fewer points remain, so an isolated flip on
  the last point is smoothed too; a shape group with fewer points than `hysteresis` needs them
  all). Otherwise the point keeps `current`, which is allowed only when `current` passed
  parity there, was measured there, and is not slower than the default there (when the
  default passed); when keeping is not allowed the raw choice is taken (a forced switch).
  An unusable point resets `current` to None, so the next usable point takes its raw choice.
  hysteresis=1 disables smoothing.

Ranges: consecutive points with the same final path and the same default form one Range;
ranges are contiguous in the measured grid and cover every measured block_rows of the shape
group. A Range's speedup is
the smallest time(default)/time(path) over its points (conservative; NaN when the default was
never measured in the range); its `why` joins the distinct reasons of its points. decide()
gives the same result per grid point (Decision), with each point's own reason.

The policy file (policy_dict, write_policy_yaml, read_policy_yaml) follows the format of
docs/analysis.md "The tuned policy file", the contract with ringbench's C++ reader. lookup()
is that reader's rule (kernels/kernel_policy.cpp: match by kernel shape) restated, so tests can
predict what a run must do; tests/analysis/tuning_roundtrip.py checks the two agree.
"""
import datetime
import json
import math
from collections import namedtuple
from collections.abc import Mapping

# In the order of the policy file's rule keys.
SHAPE_KEYS = ("dtype", "head_dim", "causal", "segment", "rate")
# gpu_arch: compute capability ("9.0"): ringbench applies a policy to another GPU model of the
# same architecture, with a warning ("ported from MODEL").
MACHINE_KEYS = ("device", "gpu", "gpu_arch", "cuda_driver", "cuda_runtime", "cudnn", "ringbench_version",
                "commit")
# Machine facts that change which path is fastest: compare-tuning warns when they differ.
MACHINE_IDENTITY = ("device", "gpu", "cudnn")
# Version 2 added `grid` (the tuning sweep's batch and num_heads): ringbench matches blocks to
# the kernel shapes the ranges measured, which it cannot compute without them.
POLICY_VERSION = 2
GRID_KEYS = ("batch", "num_heads")
# How far (log2 steps, summed over the kernel-shape axes) a block may be from the nearest
# measured range and still follow it: kPolicyReach in kernels/kernel_policy.hpp.
POLICY_REACH = 2.0
POLICY_KIND = "ringbench-kernel-policy"

Range = namedtuple("Range", "rows_lo rows_hi path speedup_vs_default why default_path",
                   defaults=(None,))
Decision = namedtuple("Decision", "block_rows path why speedup_vs_default default_path")
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


def _merged_frame(measurements, keys=SHAPE_KEYS):
    df = measurements.copy()
    if "time_s" not in df.columns and {"forward_time_s", "backward_time_s"} <= set(df.columns):
        df["time_s"] = df["forward_time_s"] + df["backward_time_s"]
    missing = [c for c in tuple(keys) + ("block_rows", "path", "time_s", "parity_ok")
               if c not in df.columns]
    if missing:
        raise TuningError(f"measurements lack column(s) {', '.join(missing)}")
    # NaN parity would read as True after astype(bool): an unknown parity is a failure.
    df["parity_ok"] = df["parity_ok"].map(lambda v: bool(v) if v is not None and v == v else False)
    df["time_s"] = df["time_s"].astype(float)
    return (df.groupby(list(keys) + ["block_rows", "path"], sort=True)
              .agg(time_s=("time_s", "median"), parity_ok=("parity_ok", "all"))
              .reset_index())


def _point_defaults(measurements, default_path, keys=SHAPE_KEYS):
    """shape tuple -> {block_rows: the default path there} (see the module docstring)."""
    groups = {tuple(_plain(v) for v in shape): group
              for shape, group in measurements.groupby(list(keys), sort=True)}

    def every_point(path_of):
        return {shape: {_plain(r): path_of(shape) for r in group["block_rows"]}
                for shape, group in groups.items()}

    if isinstance(default_path, str):
        return every_point(lambda shape: default_path)
    if isinstance(default_path, Mapping):
        missing = [shape_text(s, keys) for s in groups if s not in default_path]
        if missing:
            raise TuningError(f"no default path for shape(s): {'; '.join(missing)}")
        return every_point(lambda shape: default_path[shape])
    if default_path is not None:
        raise TuningError(f"default path must be a path name, a mapping shape -> path or None, "
                          f"got {default_path!r}")
    if "default_path" not in measurements.columns:
        raise TuningError("no default path: pass one, or give the measurements a default_path "
                          "column")
    defaults = {}
    for shape, group in groups.items():
        defaults[shape] = {}
        for rows, at in group.groupby("block_rows", sort=True):
            names = sorted({str(v) for v in at["default_path"] if isinstance(v, str) and v})
            if len(names) != 1:
                raise TuningError(f"shape {shape_text(shape, keys)} block_rows {_plain(rows)}: expected "
                                  f"one default path, found {names or 'none'}")
            defaults[shape][_plain(rows)] = names[0]
    return defaults


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


def _smooth(points, raws, defaults, hysteresis):
    """Apply the hysteresis rule of the module docstring to the raw choices (defaults: the
    default path of each point)."""
    need = min(hysteresis, len(points))
    current, final = (defaults[0] if defaults else None), []
    for i, (point, (path, why)) in enumerate(zip(points, raws)):
        if path is None or path == current:
            final.append((path, why))
            current = path
            continue
        window = raws[i:i + need]
        holds = len(window) == need and all(p == path for p, _ in window)
        if holds or not _may_keep(point, current, defaults[i]):
            final.append((path, why))
            current = path
        else:
            final.append((current, f"hysteresis: kept {current} over isolated {path} ({why})"))
    return final


def ranges_from(decisions):
    """decide()'s Decisions of one shape -> its Ranges (consecutive points with one path)."""
    ranges, start = [], 0
    for i in range(1, len(decisions) + 1):
        if i < len(decisions) and (decisions[i].path, decisions[i].default_path) == (
                decisions[start].path, decisions[start].default_path):
            continue
        run = decisions[start:i]
        speedups = [d.speedup_vs_default for d in run if math.isfinite(d.speedup_vs_default)]
        reasons = list(dict.fromkeys(d.why for d in run))
        ranges.append(Range(run[0].block_rows, run[-1].block_rows, run[0].path,
                            min(speedups) if speedups else math.nan, "; ".join(reasons),
                            run[0].default_path))
        start = i
    return ranges


def _check_settings(margin, hysteresis):
    if isinstance(margin, bool) or not (isinstance(margin, (int, float)) and margin >= 1.0):
        raise TuningError(f"safety margin must be a number >= 1.0, got {margin!r}")
    if isinstance(hysteresis, bool) or int(hysteresis) != hysteresis or hysteresis < 1:
        raise TuningError(f"hysteresis must be an integer >= 1, got {hysteresis!r}")


def decide(measurements, default_path, margin, hysteresis=2, keys=SHAPE_KEYS):
    """Per shape group (a tuple in `keys` order, SHAPE_KEYS for kernel paths; tune_cp.py passes
    its own) -> list of Decision, one per measured
    block_rows in ascending order: the final path there (after hysteresis), why, and its
    speedup time(default)/time(path) (NaN when either was not measured) and the default there.

    default_path: a path name, a mapping shape tuple -> path, or None (the frame's
    default_path column). See the module docstring for the columns and the rules.
    """
    _check_settings(margin, hysteresis)
    defaults = _point_defaults(measurements, default_path, keys)
    merged = _merged_frame(measurements, keys)
    out = {}
    for shape, group in merged.groupby(list(keys), sort=True):
        shape = tuple(_plain(v) for v in shape)
        points = _points(group)
        default = [defaults[shape][p.rows] for p in points]
        raws = [_raw_choice(p, d, margin) for p, d in zip(points, default)]
        final = _smooth(points, raws, default, int(hysteresis))
        out[shape] = [Decision(p.rows, path, why,
                               p.speedup(path, d) if path else math.nan, d)
                      for p, d, (path, why) in zip(points, default, final)]
    return out


def builtin_quality(measurements, tolerance=1.05, keys=SHAPE_KEYS):
    """How good the built-in rule (each point's default_path column) was on the grid: a dict
    with points (grid points where some path passed parity), within (of those, where the
    default passed and time(default) <= tolerance x the fastest passing path), missed (the
    default failed parity or was not measured) and worst (ratio, shape, block_rows) of the
    largest time(default) / fastest, or None."""
    merged = _merged_frame(measurements, keys)
    defaults = _point_defaults(measurements, None, keys)
    points = within = missed = 0
    worst = None
    for shape, group in merged.groupby(list(keys), sort=True):
        shape = tuple(_plain(v) for v in shape)
        for p in _points(group):
            if not p.passed:
                continue
            points += 1
            default = defaults[shape][p.rows]
            if not p.usable(default):
                missed += 1
                continue
            ratio = p.times[default] / min(p.times[q] for q in p.passed)
            within += ratio <= tolerance + 1e-12
            if worst is None or ratio > worst[0]:
                worst = (ratio, shape, p.rows)
    return {"points": points, "within": within, "missed": missed, "worst": worst,
            "tolerance": tolerance, "keys": tuple(keys)}


def builtin_quality_text(q, what="path", rows_name="block_rows"):
    """builtin_quality() in one sentence."""
    text = (f"built-in rule: within {round((q['tolerance'] - 1) * 100)} % of the fastest passing "
            f"{what} on {q['within']} of {q['points']} grid point(s)")
    if q["worst"] is not None and q["worst"][0] > q["tolerance"]:
        ratio, shape, rows = q["worst"]
        text += f"; worst {ratio:.2f}x slower ({shape_text(shape, q.get('keys', SHAPE_KEYS))} {rows_name} {rows})"
    if q["missed"]:
        text += f"; its path failed parity or was not measured on {q['missed']}"
    return text


def choose(measurements, default_path, margin, hysteresis=2):
    """Per shape group (a tuple in SHAPE_KEYS order) -> ordered list of Range over block_rows.

    default_path: a path name, a mapping shape tuple -> path, or None (the frame's
    default_path column). See the module docstring for the columns and the exact rules.
    """
    return {shape: ranges_from(decisions)
            for shape, decisions in decide(measurements, default_path, margin,
                                           hysteresis).items()}


def shape_text(shape, keys=SHAPE_KEYS):
    """A shape tuple (`keys` order) in words: `dtype=bf16 head_dim=128 causal=True ...`."""
    return " ".join(f"{k}={v}" for k, v in zip(keys, shape))


# ---------------------------------------------------------------------------------- policy

def _plain(value):
    """numpy scalars -> Python scalars, so YAML/JSON writers see plain types."""
    if hasattr(value, "item") and not isinstance(value, (str, bytes)):
        value = value.item()
    if isinstance(value, float) and not math.isfinite(value):
        return None
    return value


def _speedup_value(speedup):
    if speedup is None or not math.isfinite(speedup):
        return None
    return round(float(speedup), 4)


def _rule(shape, ranges):
    rule = {k: _plain(v) for k, v in zip(SHAPE_KEYS, shape)}
    rule["causal"] = bool(rule["causal"])  # the file's 0/1 as the YAML bool of the contract
    rule["ranges"] = [{"block_rows_min": _plain(r.rows_lo), "block_rows_max": _plain(r.rows_hi),
                       "path": r.path, "default_path": r.default_path,
                       "speedup": _speedup_value(r.speedup_vs_default)}
                      for r in ranges]
    return rule


def policy_dict(choices, machine_info, margin, *, grid, date=None, hysteresis=2, source=None,
                sweep=None):
    """choose()'s result -> the plain dict of the tuned-policy file (version 2, the format of
    docs/analysis.md).

    machine_info: mapping with any of MACHINE_KEYS (absent ones are written as null, others are
    dropped). grid: mapping with the sweep's batch and num_heads (what each measured block
    computed). date: ISO date string, default today (UTC). source, sweep: the HDF5 file and
    kernel_tuning sweep the timings came from. Each range carries its default_path (the
    built-in rule's path there). A range's path null means no path passed parity there;
    speedup null means the default was never measured in the range.
    """
    machine = {k: _plain(machine_info.get(k)) for k in MACHINE_KEYS}
    rules = [_rule(shape, choices[shape])
             for shape in sorted(choices, key=lambda s: tuple(str(v) for v in s))]
    return {
        "version": POLICY_VERSION,
        "kind": POLICY_KIND,
        "machine": machine,
        "source": None if source is None else str(source),
        "sweep": None if sweep is None else str(sweep),
        "date": date or datetime.datetime.now(datetime.timezone.utc).date().isoformat(),
        "margin": float(margin),
        "hysteresis": int(hysteresis),
        "grid": {k: int(grid[k]) for k in GRID_KEYS},
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
    from . import outfile
    with outfile.replacing(path) as f:
        f.write(text)


def read_policy_yaml(path):
    """The policy dict of a file, checked against the format (validate_policy); TuningError
    naming the file and what is wrong otherwise."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as exc:
        raise TuningError(f"{path}: cannot read ({exc.strerror or exc})") from None
    except UnicodeDecodeError:
        raise TuningError(f"{path}: not a text file (a tuned kernel policy is YAML; an HDF5 run file "
                          "goes to `rb-analysis tune`)") from None
    try:
        import yaml
    except ImportError:
        try:
            d = json.loads(text)
        except json.JSONDecodeError as exc:
            raise TuningError(f"{path}: not readable without PyYAML ({exc})") from None
    else:
        try:
            d = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise TuningError(f"{path}: not valid YAML ({' '.join(str(exc).split())})") from None
        except RecursionError:  # 100000 '[': PyYAML's composer recurses per level
            raise TuningError(f"{path}: not a tuned kernel policy (YAML nested too deeply)") from None
    problems = validate_policy(d)
    if problems:
        more = f" (and {len(problems) - 3} more)" if len(problems) > 3 else ""
        raise TuningError(f"{path}: not a valid tuned kernel policy: "
                          + "; ".join(problems[:3]) + more)
    return d


# ------------------------------------------------------------------------------- validate

def _is_int(v):
    return isinstance(v, int) and not isinstance(v, bool)


def _is_number(v):
    return isinstance(v, (int, float)) and not isinstance(v, bool)


def _range_problems(where, ranges):
    if not isinstance(ranges, list) or not ranges:
        return [f"{where}: ranges must be a non-empty list"]
    problems, previous_max = [], None
    for j, r in enumerate(ranges):
        at = f"{where} range {j}"
        if not isinstance(r, Mapping):
            problems.append(f"{at}: not a mapping")
            continue
        lo, hi = r.get("block_rows_min"), r.get("block_rows_max")
        if not (_is_int(lo) and _is_int(hi) and 0 < lo <= hi):
            problems.append(f"{at}: block_rows_min/max must be integers with 0 < min <= max, "
                            f"got {lo!r}, {hi!r}")
            continue
        if previous_max is not None and lo <= previous_max:
            problems.append(f"{at}: block_rows_min {lo} is not above the previous range's max "
                            f"{previous_max} (ranges must ascend without overlap)")
        previous_max = hi
        if "path" not in r or not (r["path"] is None or isinstance(r["path"], str)):
            problems.append(f"{at}: path must be a kernel path name or null")
        if not (isinstance(r.get("default_path"), str) and r["default_path"]):
            problems.append(f"{at}: default_path must be a kernel path name")
        if not (r.get("speedup") is None or _is_number(r.get("speedup"))):
            problems.append(f"{at}: speedup must be a number or null, got {r.get('speedup')!r}")
    return problems


def _rule_problems(i, rule):
    if not isinstance(rule, Mapping):
        return [f"rule {i}: not a mapping"]
    where = f"rule {i} ({' '.join(f'{k}={rule.get(k)}' for k in SHAPE_KEYS)})"
    problems = []
    if not isinstance(rule.get("dtype"), str):
        problems.append(f"{where}: dtype must be text")
    for key in ("head_dim", "segment", "rate"):
        if not _is_int(rule.get(key)):
            problems.append(f"{where}: {key} must be an integer")
    if not isinstance(rule.get("causal"), bool):
        problems.append(f"{where}: causal must be true or false")
    return problems + _range_problems(where, rule.get("ranges"))


def validate_policy(d):
    """What is wrong with a policy dict against the version-2 format (empty list: nothing)."""
    if not isinstance(d, Mapping):
        return [f"top level is {type(d).__name__}, expected a mapping"]
    problems = []
    if d.get("version") != POLICY_VERSION:
        problems.append(f"version is {d.get('version')!r}, expected {POLICY_VERSION}")
    if d.get("kind") != POLICY_KIND:
        problems.append(f"kind is {d.get('kind')!r}, expected {POLICY_KIND!r}")
    if not isinstance(d.get("machine"), Mapping):
        problems.append("machine must be a mapping")
    if not (_is_number(d.get("margin")) and d["margin"] >= 1.0):
        problems.append(f"margin must be a number >= 1.0, got {d.get('margin')!r}")
    if not (_is_int(d.get("hysteresis")) and d["hysteresis"] >= 1):
        problems.append(f"hysteresis must be an integer >= 1, got {d.get('hysteresis')!r}")
    grid = d.get("grid")
    if not (isinstance(grid, Mapping) and set(grid) == set(GRID_KEYS)
            and all(_is_int(grid[k]) and grid[k] >= 1 for k in GRID_KEYS)):
        problems.append(f"grid must be {{batch, num_heads}} with positive integers, got {grid!r}")
    rules = d.get("rules")
    if not isinstance(rules, list):
        return problems + ["rules must be a list"]
    seen = set()
    for i, rule in enumerate(rules):
        found = _rule_problems(i, rule)
        problems += found
        if not found:
            if _rule_key(rule) in seen:
                problems.append(f"rule {i}: a second rule for shape {shape_text(_rule_key(rule))}")
            seen.add(_rule_key(rule))
    return problems


# --------------------------------------------------------------------------------- lookup

def _rule_key(rule):
    return tuple(rule.get(k) for k in SHAPE_KEYS)


def find_range(rule, rows):
    """The range of a rule that governs `rows` block rows, by the lookup rule of the format:
    the range with min <= rows <= max; rows between two ranges take the range whose bound is
    nearer in log2 (a tie takes the lower range); None outside the first/last range."""
    ranges = rule.get("ranges", [])
    for k, r in enumerate(ranges):
        if r["block_rows_min"] <= rows <= r["block_rows_max"]:
            return r
        if k and ranges[k - 1]["block_rows_max"] < rows < r["block_rows_min"]:
            below = math.log2(rows / ranges[k - 1]["block_rows_max"])
            above = math.log2(r["block_rows_min"] / rows)
            return ranges[k - 1] if below <= above else r
    return None


def kernel_shape(rows, heads, batch, segment, rate, keys=None):
    """(sub_rows, sub_keys, heads_per_call, calls) of a block of `rows` query rows (and `keys`
    key rows, default rows): kernel_shape_of() in kernels/kernel_shape.cpp."""
    keys = rows if keys is None else keys
    if segment <= 0:
        return rows, keys, batch * heads, 1
    rate = max(1, rate)
    return (-(-min(segment, rows) // rate), -(-min(segment, keys) // rate),
            batch * -(-heads // rate), -(-rows // segment) * min(rate, max(1, heads)))


def _distance(at, lo, hi):
    total = 0.0
    for x, a, b in zip(at, lo, hi):
        x, a, b = (math.log2(max(v, 1)) for v in (x, a, b))
        a, b = min(a, b), max(a, b)
        total += a - x if x < a else (x - b if x > b else 0.0)
    return total


def lookup(policy, shape, rows, heads=None, batch=None):
    """The path ringbench runs a block on under `policy`, or None for the built-in rule: the
    block (shape in SHAPE_KEYS order, `rows` query and key rows, `heads` and `batch` default to
    the policy's grid) matched by kernel shape to the nearest range of the rules of its dtype,
    head dim, causality and dilated-or-not, if the block lies within POLICY_REACH of that
    range's rule (between its ranges, always); equal distances take the range first in the
    file; a null path is the built-in rule."""
    dtype, head_dim, causal, segment, rate = shape
    grid = policy["grid"]
    heads = grid["num_heads"] if heads is None else heads
    batch = grid["batch"] if batch is None else batch
    at = kernel_shape(rows, heads, batch, segment, rate)
    def measured(rule, n):
        return kernel_shape(n, grid["num_heads"], grid["batch"], rule["segment"], rule["rate"])

    best, best_rule, best_d = None, None, math.inf
    for rule in policy.get("rules", []):
        if ((rule["dtype"], rule["head_dim"], bool(rule["causal"])) != (dtype, head_dim, bool(causal))
                or (rule["segment"] > 0) != (segment > 0)):
            continue
        for r in rule["ranges"]:
            d = _distance(at, measured(rule, r["block_rows_min"]), measured(rule, r["block_rows_max"]))
            if d < best_d:
                best, best_rule, best_d = r, rule, d
    if best is None:
        return None
    # Between a rule's ranges the nearest decides; beyond them only within reach.
    span = (measured(best_rule, best_rule["ranges"][0]["block_rows_min"]),
            measured(best_rule, best_rule["ranges"][-1]["block_rows_max"]))
    return best["path"] if _distance(at, *span) <= POLICY_REACH else None


# --------------------------------------------------------------------------------- compare

def _chosen_at(rule, rows):
    """What a policy chose at rows, for comparing: the governing range's path (None where no
    path passed parity), or "built-in" outside its ranges."""
    r = find_range(rule, rows)
    return r["path"] if r else "built-in"


def _steps_to(old_paths, index, path):
    """Grid steps from `index` to the nearest point where the old policy chose `path`."""
    hits = [abs(i - index) for i, p in enumerate(old_paths) if p == path]
    return min(hits) if hits else None


def _shape_changes(shape, old_rule, new_rule, grid):
    old_paths = [_chosen_at(old_rule, g) for g in grid]
    new_paths = [_chosen_at(new_rule, g) for g in grid]
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
        text = (f"{shape_text(shape)} block_rows {grid[i]}..{grid[j]}: "
                f"{old_paths[i]} -> {new_paths[i]}"
                + (f" ({kind}, {moved} grid step{'s' if moved != 1 else ''})"
                   if moved is not None else f" ({kind})"))
        changes.append({"kind": kind, "shape": dict(zip(SHAPE_KEYS, shape)),
                        "block_rows_min": grid[i], "block_rows_max": grid[j],
                        "old_path": old_paths[i], "new_path": new_paths[i],
                        "steps": moved, "text": text})
        i = j + 1
    return changes


def bounds_grid(*rules):
    """The block_rows grid of a shape from its rules' range bounds. Ranges are contiguous in
    the measured grid, so every changed run of grid points starts and ends on a bound: step
    counts on this grid are at most those on the measured grid and are >= 2 exactly when
    those are, which is all compare_policies' verdict needs."""
    return sorted({r[k] for rule in rules for r in rule.get("ranges", [])
                   for k in ("block_rows_min", "block_rows_max")})


def defaults_text(ranges):
    """The defaults over a shape's Ranges: `flash` when one, else `flash 512-1024, cudnn
    2048-65536`."""
    runs = []
    for r in ranges:
        if runs and runs[-1][0] == r.default_path:
            runs[-1][2] = r.rows_hi
        else:
            runs.append([r.default_path, r.rows_lo, r.rows_hi])
    if len(runs) == 1:
        return str(runs[0][0])
    return ", ".join(f"{d} {lo}-{hi}" if lo != hi else f"{d} {lo}" for d, lo, hi in runs)


def _defaults_text(rule):
    return defaults_text([Range(r["block_rows_min"], r["block_rows_max"], r.get("path"), None, "",
                                r.get("default_path")) for r in rule.get("ranges", [])])


def _default_change(shape, old_rule, new_rule):
    old, new = _defaults_text(old_rule), _defaults_text(new_rule)
    if old == new:
        return []
    return [{"kind": "changed default", "shape": dict(zip(SHAPE_KEYS, shape)), "steps": None,
             "old_path": old, "new_path": new,
             "text": f"{shape_text(shape)}: default (built-in rule) {old} -> {new}"}]


def compare_policies(old, new, grid=None):
    """Two policy dicts -> PolicyComparison(changes, exit_code).

    grid: the block_rows grid (a sequence, or a mapping shape tuple -> sequence); None derives
    it per shape from the range bounds of both policies (bounds_grid). At every grid point of
    every shape in both policies the chosen paths are compared; a run of neighbouring points
    with the same (old, new) pair is one change. Its `steps` is the largest distance, in grid
    steps, from a changed point to the nearest point where OLD already chose the new path
    ("moved switch point"); a new path OLD never chose for that shape is a "changed choice"
    (steps None). exit_code is 1 when any change moved more than one grid step or is a changed
    choice, else 0: a switch point moving to a neighbouring size is measurement noise. Shapes
    present in only one policy ("added shape"/"removed shape") and a changed built-in default
    ("changed default") are listed without failing.
    """
    old_rules = {_rule_key(r): r for r in old.get("rules", [])}
    new_rules = {_rule_key(r): r for r in new.get("rules", [])}
    changes = []
    for shape in sorted(set(old_rules) | set(new_rules), key=lambda s: tuple(map(str, s))):
        if shape not in old_rules or shape not in new_rules:
            kind = "added shape" if shape not in old_rules else "removed shape"
            changes.append({"kind": kind, "shape": dict(zip(SHAPE_KEYS, shape)),
                            "steps": None, "text": f"{shape_text(shape)}: {kind}"})
            continue
        if grid is None:
            shape_grid = bounds_grid(old_rules[shape], new_rules[shape])
        else:
            shape_grid = grid.get(shape, []) if isinstance(grid, Mapping) else grid
        changes += _default_change(shape, old_rules[shape], new_rules[shape])
        changes += _shape_changes(shape, old_rules[shape], new_rules[shape],
                                  sorted(shape_grid))
    failing = any(c["kind"] == "changed choice" or
                  (c["kind"] == "moved switch point" and c["steps"] > 1) for c in changes)
    return PolicyComparison(changes, 1 if failing else 0)


def machine_differences(old, new):
    """["gpu: A -> B", ...] for the machine facts (MACHINE_IDENTITY) two policies differ in."""
    om, nm = old.get("machine") or {}, new.get("machine") or {}
    return [f"{k}: {om.get(k)} -> {nm.get(k)}" for k in MACHINE_IDENTITY if om.get(k) != nm.get(k)]
