"""Link classes for projecting ring attention beyond the measured rings (docs/cost-model.md).

A ring step passes one key/value block between every pair of ring neighbours at once; the
step's transfer ends when its slowest pair's does. Inside one node the pairs share NVLink (or
shared memory on the host path); a ring spanning several nodes has node-crossing pairs, and
those set the pace. So a projected ring of R ranks, K ranks per node, placed node by node
(ringbench's node-aware ring order) spans ceil(R/K) nodes, crosses a node boundary at that
many of its R hops when it spans more than one, and its transfer takes the inter-node link's
time; a ring inside one node takes the intra-node link's.

Where each link's t(m) = alpha + m/beta comes from, first found:
  intra   a sendrecv model or fit of groups inside one node (intra_node, or world in a one-node
          run), else host_pingpong's one-way times;
  inter   a sendrecv model or fit of inter_node groups of two or more ranks in a multi-node run;
  --link CLASS=ALPHA,BETA replaces either (e.g. inter=5us,25GB/s) to project past what was
measured. Without an inter-node link, multi-node projections fall back to the intra-node link
and are marked as such (a one-node file says nothing about the network).
"""
import math
import re

from . import model, reader
# ring_link is re-exported (links.ring_link, as the tests call it)
from .placement import CLASSES, ring_link  # noqa: F401  # pylint: disable=unused-import

_UNITS_S = {"": 1.0, "s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
_UNITS_BPS = {"": 1.0, "B/s": 1.0, "KB/s": 1e3, "MB/s": 1e6, "GB/s": 1e9, "TB/s": 1e12,
              "KiB/s": 2.0 ** 10, "MiB/s": 2.0 ** 20, "GiB/s": 2.0 ** 30}


class LinkError(ValueError):
    pass


def _number(text, units, what):
    m = re.fullmatch(r"\s*([0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)\s*([A-Za-z/]*)\s*", text)
    if not m or m.group(2) not in units:
        raise LinkError(f"{what} '{text}': expected a number with one of the units "
                        f"{', '.join(u or '(none)' for u in units)}")
    return float(m.group(1)) * units[m.group(2)]


def parse_link(text):
    """'inter=5us,25GB/s' -> ('inter', {alpha_s, beta_Bps, source})."""
    cls, sep, rest = text.partition("=")
    parts = rest.split(",")
    if not sep or cls not in CLASSES or len(parts) != 2:
        raise LinkError(f"--link '{text}': expected CLASS=ALPHA,BETA with CLASS one of "
                        f"{'/'.join(CLASSES)}, e.g. inter=5us,25GB/s")
    alpha = _number(parts[0], _UNITS_S, "--link latency")
    beta = _number(parts[1], _UNITS_BPS, "--link bandwidth")
    if beta <= 0:
        raise LinkError(f"--link '{text}': the bandwidth must be above 0")
    return cls, {"alpha_s": alpha, "beta_Bps": beta, "source": f"--link {text}"}


def _sendrecv(run, groups, min_nodes):
    """The first sendrecv model (stored, else fitted) of `groups` (in that order) in a run of
    at least `min_nodes` nodes, or None."""
    if run.node_count < min_nodes:
        return None
    for s in run.sweeps_of_type(reader.COLLECTIVE_TYPES):
        stored = [m for m in model._stored_models(s) if m["op"] == "sendrecv" and m["group"] in groups
                  and math.isfinite(m["alpha_s"]) and not math.isnan(m["beta_Bps"])
                  and not model.one_rank_groups([m["group_size"] or 2])]
        stored.sort(key=lambda m: groups.index(m["group"]))
        if stored:
            return dict(stored[0], source=f"fitted sendrecv model ({stored[0]['group']}) in "
                                          f"{s.name} of {run.path}")
        for g in groups:
            pts = [p for p in model._linked_points(s, "sendrecv")
                   if "group" in s.points and s.points["group"].iloc[p] == g]
            fit = model._fit_slowest(s, model.COLLECTIVE_TIME, pts)
            if fit:
                return dict(fit, source=f"alpha-beta fit to sendrecv ({g}) times of {s.name} in {run.path}")
    return None


def _pingpong(run):
    for s in run.sweeps_of_type(reader.PINGPONG_TYPES):
        fit = model._fit_slowest(s, model.PINGPONG_TIME, range(s.npoints))
        if fit:
            return dict(fit, source=f"alpha-beta fit to host_pingpong one-way times of {s.name} in {run.path}")
    return None


def measured_links(runs):
    """{intra: model or None, inter: model or None} from the files (runs with more ranks first)."""
    runs = sorted(runs, key=lambda r: -r.world_size)
    intra = next((m for r in runs for m in [_sendrecv(r, ["intra_node"], 1) or
                  (_sendrecv(r, ["world"], 1) if r.node_count <= 1 else None)] if m), None)
    intra = intra or next((m for r in runs for m in [_pingpong(r)] if m), None)
    inter = next((m for r in runs for m in [_sendrecv(r, ["inter_node"], 2)] if m), None)
    return {"intra": intra, "inter": inter}


def links(runs, given=()):
    """measured_links with --link values (parsed pairs) put over them."""
    out = measured_links(runs)
    for cls, m in given:
        out[cls] = m
    return out


def ranks_per_node(runs):
    """The measured ranks per node (most ranks on one node among the files), at least 1."""
    best = 1
    for r in runs:
        if r.node_count > 0 and r.world_size > 0:
            best = max(best, r.world_size // r.node_count)
    return best
