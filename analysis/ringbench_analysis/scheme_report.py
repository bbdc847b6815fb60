"""The per-scheme cost model against the files (docs/analysis.md, "Per-scheme cost model"):
predicted vs measured time of every point of a sweep that ran several schemes, and the
projected crossovers (tokens per GPU below which ulysses, allgather or hybrid beats the ring)
at the measured group sizes and larger ones, within a node and across nodes. The report's
"Cost-model prediction" section ends with it; `rb-analysis scheme-model` prints it.

    from ringbench_analysis import reader, scheme_report
    result = scheme_report.evaluate(reader.load_many(["cp.h5", "coll.h5"]), sizes=(8, 16, 64))
    print("\\n".join(scheme_report.section_lines(result)))
"""
import json
import math
import sys

from . import fmt, links, outfile, reader
from . import scheme_inputs as inputs
from . import scheme_model as sm

DEFAULT_SIZES = (8, 16, 64)
TOKENS_RANGE = (2.0 ** 7, 2.0 ** 21)   # tokens per GPU searched for a crossover
CLASSES = ("intra", "inter")


def _predict_point(pt, rate, fits, per_node):
    """A measured point's prediction on the link class its group ran on; hybrid's subgroups of U
    stay inside a node when U ranks fit on one (node-aware ring order), its ring takes the group's."""
    U, link = pt["ulysses_degree"], pt["link"]
    cls = "intra" if pt["scheme"] == "hybrid" and U <= per_node else link
    return sm.predict(pt["shape"], pt["tokens_per_rank"], pt["ring_size"], pt["scheme"], rate, fits,
                      cls, U, link)


def _error(pred, meas):
    return (pred - meas) / meas if pred is not None and meas and math.isfinite(meas) else None


def validation(points, rates, fits, per_node):
    """One row per scheme point: measured and predicted fwd, bwd, total (errors relative to
    the measurement), exposed communication, and whether the bytes per iteration the model
    counts are the file's."""
    rows = []
    for pt in points:
        rate = rates.get((pt["sweep"], pt["shape"], pt["dtype"]))
        pred = _predict_point(pt, rate, fits, per_node) if rate else {"missing": ["no attention rate"]}
        row = {k: pt[k] for k in ("file", "sweep", "point", "seq_len", "tokens_per_rank", "ring_size",
                                  "scheme", "ulysses_degree", "head_groups", "link", "status", "fwd", "bwd",
                                  "total",
                                  "exposed", "bytes_sent")}
        row["missing"] = "; ".join(pred["missing"])
        for k in ("fwd", "bwd", "total"):
            row[f"predicted_{k}"] = pred.get(k)
            row[f"error_{k}"] = _error(pred.get(k), pt[k]) if pt["status"] == "ok" else None
        row["predicted_exposed"] = (pred["exposed_fwd"] + pred["exposed_bwd"]) if pred.get("total") else None
        counted = sm.bytes_sent(pt["shape"], pt["tokens_per_rank"], pt["ring_size"], pt["scheme"], pt["ulysses_degree"])
        row["bytes_counted"] = counted
        row["bytes_match"] = counted == int(pt["bytes_sent"]) if math.isfinite(pt["bytes_sent"]) else None
        rows.append(row)
    return rows


def picks(rows):
    """Per problem (file, sweep, S, R): the measured fastest scheme that passed and the
    predicted fastest, where both are known."""
    out = {}
    for r in rows:
        out.setdefault((r["file"], r["sweep"], r["seq_len"], r["ring_size"]), []).append(r)
    res = []
    for key, g in out.items():
        ok = [r for r in g if r["status"] == "ok" and math.isfinite(r["total"])]
        pred = [r for r in g if r["predicted_total"] is not None]
        if len(ok) >= 2 and len(pred) == len(g):
            res.append(dict(zip(("file", "sweep", "seq_len", "ring_size"), key),
                            measured=_label(min(ok, key=lambda r: r["total"])),
                            predicted=_label(min(pred, key=lambda r: r["predicted_total"]))))
    return res


def _label(r):
    if r["scheme"] == "hybrid":
        return f"hybrid(U={r['ulysses_degree']})"
    return f"{r['scheme']}(G={r['head_groups']})" if r.get("head_groups", 1) > 1 else r["scheme"]


def problems(points):
    """The distinct problems of the scheme sweeps: {(sweep, shape, dtype): {sizes, degrees}}."""
    out = {}
    for pt in points:
        d = out.setdefault((pt["sweep"], pt["shape"], pt["dtype"]), {"sizes": set(), "degrees": set(), "n": set()})
        d["sizes"].add(pt["ring_size"])
        d["n"].add(pt["tokens_per_rank"])
        if pt["scheme"] == "hybrid":
            d["degrees"].add(pt["ulysses_degree"])
    return out


def faster_ranges(c, lo, hi):
    """The tokens-per-GPU ranges [(a, b)] over lo..hi where the scheme beats the ring: each
    crossing toggles who is faster, starting from who is at lo."""
    edges = [lo] + [n for n, _ in c["crossings"]] + [hi]
    faster = c["faster_at_lo"] != "ring"
    out = []
    for a, b in zip(edges[:-1], edges[1:]):
        if faster:
            out.append((a, b))
        faster = not faster
    return out


def _tokens(n):
    """Tokens per GPU as a plain count: exact where whole (8192), else to 3 significant digits."""
    if float(n).is_integer():
        return str(int(n))
    return f"{round(n, 2 - int(math.floor(math.log10(abs(n))))):.0f}"


def _crossover_text(c, lo, hi):
    """'< 5610, 12100..25200 (x0.97 at 8192)': where the scheme is faster, then its time over the
    ring's at the sweep's own tokens per GPU."""
    if c["missing"]:
        return "n/a: " + "; ".join(dict.fromkeys(c["missing"]))
    parts = ["always" if (a, b) == (lo, hi) else f"< {_tokens(b)}" if a == lo else f"> {_tokens(a)}"
             if b == hi else f"{_tokens(a)}..{_tokens(b)}" for a, b in faster_ranges(c, lo, hi)]
    at = ", ".join(f"x{r:.2f} at {_tokens(n)}" for n, r in c["at"])
    return (", ".join(parts) or "never") + (f" ({at})" if at else "")


def projections(points, rates, fits, sizes, per_node):
    """Per problem, group size (the measured ones >= 2 and `sizes`) and link class: where each
    other scheme's predicted forward + backward time crosses the ring's."""
    lo, hi = TOKENS_RANGE
    rows = []
    classes = [c for c in CLASSES if any(fits.get((op, c)) for op in sm.OPS)]
    for (sweep, shape, dtype), d in problems(points).items():
        rate = rates.get((sweep, shape, dtype))
        if rate is None:
            continue
        for R in sorted({r for r in d["sizes"] if r >= 2} | set(sizes)):
            for cls in classes:
                row = {"sweep": sweep, "problem": problem_label(shape, dtype), "ring_size": R, "link": cls,
                       "measured_size": R in d["sizes"], "crossovers": {}}
                for scheme, U in [("ulysses", R), ("allgather", 1)] + [("hybrid", u) for u in sorted(d["degrees"])]:
                    # hybrid's subgroups stay in a node; across nodes its ring takes the network
                    sub = "intra" if scheme == "hybrid" and U <= per_node else cls
                    c = sm.crossover(shape, R, scheme, rate, fits, sub, U, cls, lo, hi, sorted(d["n"]))
                    label = f"hybrid(U={U})" if scheme == "hybrid" else scheme
                    row["crossovers"][label] = dict(c, text=_crossover_text(c, lo, hi))
                rows.append(row)
    return rows


def problem_label(shape, dtype):
    kv = f" kvh={shape.kv_heads}" if shape.kv_heads != shape.heads else ""
    return (f"b={shape.batch} h={shape.heads}{kv} d={shape.head_dim} {dtype} "
            f"{'causal' if shape.causal else 'full'} {shape.layout}")


def evaluate(runs, sizes=DEFAULT_SIZES, given_links=()):
    """Everything the section shows, as JSON-ready data (None: no sweep ran several schemes)."""
    if not inputs.scheme_sweeps(runs):
        return None
    points = inputs.scheme_points(runs)
    fits = inputs.collective_fits(runs, given_links)
    rates = {}
    for pt in points:
        key = (pt["sweep"], pt["shape"], pt["dtype"])
        if key not in rates:
            rates[key] = inputs.rate_for(runs, pt["sweep"], pt["shape"], pt["dtype"])
    per_node = links.ranks_per_node(runs)
    rows = validation(points, rates, fits, per_node)
    return {"fits": fits, "rates": rates, "ranks_per_node": per_node, "validation": rows,
            "unmodelled": inputs.unmodelled(runs),
            "picks": picks(rows), "projections": projections(points, rates, fits, sizes, per_node)}


# ---- Markdown, JSON, command line -----------------------------------------------------------

def _table(headers, rows):
    return (["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
            + ["| " + " | ".join(str(c).replace("|", "/") for c in r) + " |" for r in rows])


def _pct(v):
    return "-" if v is None else f"{100 * v:+.1f}%"


def _fit_lines(fits):
    out = []
    for (op, cls), f in sorted(fits.items(), key=lambda kv: (sm.OPS.index(kv[0][0]), kv[0][1])):
        if f is None:
            out.append(f"- {op}, {cls}-node: **no fit** (no {op} series of {cls}-node groups in the files): "
                       "the schemes that need it are not predicted there")
        else:
            err = f", fit error {100 * f['rel_rms_error']:.0f}%" if f.get("rel_rms_error") is not None else ""
            out.append(f"- {op}, {cls}-node: alpha = {fmt.time(f['alpha_s'])}, bus bandwidth "
                       f"{fmt.si(f['bus_beta_Bps'], 'B/s')} ({f['source']}{err})")
    return out


def _rate_lines(rates):
    out = []
    for (sweep, shape, dtype), r in rates.items():
        if r is None:
            out.append(f"- {sweep} ({problem_label(shape, dtype)}): **no attention rate** (no ring step "
                       "kernels or compute sweep of this dtype, head dim and mask): not predicted")
            continue
        f = [math.exp(x) / 1e12 for x in r._fwd]
        b = [math.exp(x) / 1e12 for x in r._bwd]
        bwd = f", backward {min(b):.3g}..{max(b):.3g}" if r.has_backward else ", backward taken as forward"
        out.append(f"- {sweep} ({problem_label(shape, dtype)}): forward {min(f):.3g}..{max(f):.3g} TFLOP/s "
                   f"per GPU{bwd}, over calls of {fmt.si(math.exp(r.pairs[0]), '').strip()}.."
                   f"{fmt.si(math.exp(r.pairs[-1]), '').strip()} pairs, from {r.source}")
    return out


def _crossover_table(result):
    labels = list(dict.fromkeys(k for r in result["projections"] for k in r["crossovers"]))
    rows = [[f"{r['sweep']}: {r['problem']}", f"{r['ring_size']}" + (" (run)" if r["measured_size"] else ""),
             r["link"]] + [r["crossovers"].get(k, {}).get("text", "-") for k in labels]
            for r in result["projections"]]
    return _table(["problem", "R", "link"] + labels, rows)


def _validation_table(rows):
    def bytes_txt(r):
        if r["bytes_match"] is None:
            return "-"
        return "= file" if r["bytes_match"] else f"file x{r['bytes_sent'] / r['bytes_counted']:.3g}" \
            if r["bytes_counted"] else "file > 0"
    out = []
    for r in rows:
        out.append([r["sweep"], r["seq_len"], r["ring_size"], _label(r), r["link"], r["status"],
                    fmt.time(r["fwd"]), fmt.time(r["predicted_fwd"]), _pct(r["error_fwd"]),
                    fmt.time(r["bwd"]), fmt.time(r["predicted_bwd"]), _pct(r["error_bwd"]),
                    fmt.time(r["total"]), fmt.time(r["predicted_total"]), _pct(r["error_total"]),
                    fmt.time(r["exposed"]), fmt.time(r["predicted_exposed"]), bytes_txt(r),
                    r["missing"] or "-"])
    return _table(["sweep", "S", "R", "scheme", "link", "status", "fwd", "predicted", "error", "bwd",
                   "predicted", "error", "total", "predicted", "error", "exposed comm", "predicted",
                   "bytes", "not predicted"], out)


def _pick_line(picks_):
    if not picks_:
        return []
    hits = [p for p in picks_ if p["measured"] == p["predicted"]]
    misses = [f"{p['sweep']} S={p['seq_len']} R={p['ring_size']}: measured {p['measured']}, predicted "
              f"{p['predicted']}" for p in picks_ if p not in hits]
    more = f" and {len(misses) - 4} more" if len(misses) > 4 else ""
    return [f"The model picks the measured fastest scheme on {len(hits)} of {len(picks_)} problem(s)"
            + (f"; not on {'; '.join(misses[:4])}{more}." if misses else "."), ""]


# What a link class without any fit would need (the line that says it is not projected).
NEEDS = {"intra": ("within a node", "a collectives sweep of groups inside one node"),
         "inter": ("across nodes", "a multi-node run with a collectives sweep of inter_node groups")}


def _unprojected_lines(fits):
    """A link class without any fit is left out of the crossover table, and said so here."""
    return [f"Not projected {NEEDS[c][0]}: the files have no {c}-node fit of any collective ({NEEDS[c][1]}; "
            "sendrecv alone can be given with --link)." for c in CLASSES
            if not any(fits.get((op, c)) for op in sm.OPS)]



def section_lines(result, heading="###"):
    """The Markdown section: the crossovers first, then the inputs, then prediction against
    measurement; [] when no sweep ran several schemes."""
    if result is None:
        return []
    lo, hi = TOKENS_RANGE
    md = [f"{heading} Per-scheme cost model", "",
          "Predicted crossover per problem, group size R and link: the tokens per GPU (S/R) where the "
          "scheme's forward + backward beats the ring's (\"< n\": below n; \"a..b\": between; \"always\" "
          f"/ \"never\" over {_tokens(lo)}..{_tokens(hi)} tokens per GPU; \"x0.97 at 8192\": the "
          "scheme's predicted time / the ring's at the tokens per GPU the sweep ran); \"n/a\" says "
          "which fit or split is missing. intra: every collective on the intra-node fit (NVLink); inter: "
          "on the cross-node fit (hybrid: its subgroups inside a node, its ring across). (run): a size "
          "the file measured.", ""]
    md += (_crossover_table(result) if result["projections"] else ["No crossover projected."]) + [""]
    unprojected = _unprojected_lines(result["fits"]) + [
        f"Not modelled: the points of {name}: {why}." for name, why in result["unmodelled"]]
    md += unprojected + ([""] if unprojected else [])
    md += _pick_line(result["picks"])
    md += ["Inputs: per collective and link class t(m) = alpha + m f(G) / bus bandwidth (m as nccl-tests "
           "counts it, f the busbw factor of a group of G):", ""] + _fit_lines(result["fits"]) + [""]
    md += ["Attention rate per problem (FLOP/s per GPU against the pairs of one kernel call, "
           "interpolated, the end values beyond):", ""] + _rate_lines(result["rates"]) + [""]
    md += ["Predicted against measured, per point (slowest rank's median; error = predicted / "
           "measured - 1; exposed comm: the slowest rank's step waits, forward + backward; bytes: the "
           "file's bytes_sent against the model's count):", ""]
    md += _validation_table(result["validation"]) + [""]
    return md


def to_json(result):
    """report.json's `scheme_model` (None without a scheme sweep)."""
    if result is None:
        return None
    rates = [{"sweep": s, "problem": problem_label(sh, d), "source": r.source if r else None,
              "pairs": [math.exp(x) for x in r.pairs] if r else [],
              "fwd_flops": [math.exp(x) for x in r._fwd] if r else [],
              "bwd_flops": [math.exp(x) for x in r._bwd] if r else []}
             for (s, sh, d), r in result["rates"].items()]
    return {"fits": [dict(f or {}, operation=op, link=cls, fitted=f is not None)
                     for (op, cls), f in result["fits"].items()],
            "rates": rates, "ranks_per_node": result["ranks_per_node"],
            "validation": result["validation"], "picks": result["picks"], "unmodelled": result["unmodelled"],
            "projections": result["projections"]}


def command(args):
    """rb-analysis scheme-model RUN.h5 [MORE.h5 ...] [--sizes 8,16,64] [--link ...] [--json FILE]."""
    try:
        sizes = tuple(int(x) for x in args.sizes.split(",") if x.strip())
        given = [links.parse_link(x) for x in args.link]
        result = evaluate(reader.load_many(args.files), sizes, given)
    except ValueError as e:  # LinkError is a ValueError; so is a bad --sizes
        print(f"rb-analysis scheme-model: {e}", file=sys.stderr)
        return 2
    except reader.RingbenchFileError as e:
        print(f"rb-analysis scheme-model: {e}", file=sys.stderr)
        return 2
    if result is None:
        print("rb-analysis scheme-model: no ring_attention sweep in the files ran two or more schemes "
              "(give one a list, e.g. scheme: [ring, allgather, ulysses])", file=sys.stderr)
        return 2
    print("\n".join(section_lines(result, heading="#")))
    if args.json:
        with outfile.replacing(args.json) as f:
            json.dump(_finite(to_json(result)), f, indent=1, default=_json_default, allow_nan=False)
    return 0


def _finite(o):
    """NaN and infinities as null, so the file stays valid JSON (as report.json)."""
    if isinstance(o, dict):
        return {k: _finite(v) for k, v in o.items()}
    if isinstance(o, (list, tuple)):
        return [_finite(v) for v in o]
    if isinstance(o, float):
        return o if math.isfinite(o) else None
    return o


def _json_default(o):
    if isinstance(o, sm.Shape):
        return o.__dict__
    if hasattr(o, "item"):
        return o.item()
    return str(o)
