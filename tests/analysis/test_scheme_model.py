"""Tests of the per-scheme cost model (ringbench_analysis.scheme_model, scheme_inputs,
scheme_report; docs/analysis.md, "Per-scheme cost model"): hand-computed times on synthetic fits
(alpha 0, known bandwidths and attention rate), a crossover against its closed form, GQA's
bytes, a missing fit named rather than taken as 0, the byte counts of src/ring/cp_attention.cpp,
then `rb-analysis scheme-model` and the report on a synthetic file with known numbers.
Run: PYTHONPATH=analysis python3 -m unittest tests/analysis/test_scheme_model.py
(The real program's host path: e2e_analysis.py schemes, ctest analysis_schemes.)
"""
import json
import math
import os
import sys
import unittest

sys.path.insert(0, os.path.dirname(__file__))
from tempdir_case import TempDirCase, rb_analysis  # noqa: E402  (first: analysis/ on the path, skip without h5py)

import h5py  # noqa: E402
import numpy as np  # noqa: E402

import synthetic  # noqa: E402
from ringbench_analysis import report, scheme_model as sm  # noqa: E402

# A small shape: 4 heads of 8, 2-byte elements, no mask; 1024 tokens per rank on 4 ranks.
SHAPE = sm.Shape(batch=1, heads=4, kv_heads=4, head_dim=8, elem=2, causal=False, layout="contiguous")
N, R = 1024, 4
FWD_RATE, BWD_RATE = 1e12, 0.5e12      # FLOP/s
RATE = sm.Rate.constant(FWD_RATE, BWD_RATE)


def fits(sendrecv=1e8, others=1e9, alpha=0.0, group=4, drop=()):
    """Intra-node fits with the given bus bandwidths (B/s), fitted at `group` ranks."""
    out = {(op, "intra"): {"alpha_s": alpha, "bus_beta_Bps": sendrecv if op == "sendrecv" else others,
                           "group_size": 2 if op == "sendrecv" else group, "source": "test"}
           for op in sm.OPS if op not in drop}
    out.update({(op, "inter"): None for op in sm.OPS})
    return out


class HandComputed(unittest.TestCase):
    """Every number below is worked out by hand from the docstring's formulas."""
    # per rank: 4 heads x 1024 queries x 4096 keys = 16 777 216 pairs, 4 d = 32 FLOPs each
    PAIRS = 4 * 1024 * 4096
    FLOP = 32 * PAIRS                      # 536 870 912
    CF, CB = FLOP / FWD_RATE, 2.5 * FLOP / BWD_RATE

    def test_ring_hops_exposed_beyond_their_step(self):
        p = sm.predict(SHAPE, N, R, "ring", RATE, fits(sendrecv=1e8))
        kv = 2 * 4 * 1024 * 8 * 2           # K|V packet: 131 072 B
        dkdv = 2 * 4 * 1024 * 8 * 4         # fp32: 262 144 B
        step_f, step_b = self.CF / 4, self.CB / 4
        fwd_exposed = 3 * max(0, kv / 1e8 - step_f)
        # backward hops per step: K/V; K/V + dK/dV; dK/dV; dK/dV (own block last)
        bwd_exposed = sum(max(0, b / 1e8 - step_b) for b in (kv, kv + dkdv, dkdv, dkdv))
        self.assertAlmostEqual(p["compute_fwd"], self.CF, delta=1e-15)
        self.assertAlmostEqual(p["fwd"], self.CF + fwd_exposed, delta=1e-12)
        self.assertAlmostEqual(p["bwd"], self.CB + bwd_exposed, delta=1e-12)
        self.assertAlmostEqual(p["total"], p["fwd"] + p["bwd"], delta=1e-15)
        self.assertGreater(fwd_exposed, 0)

    def test_ring_hidden_when_the_link_is_fast(self):
        p = sm.predict(SHAPE, N, R, "ring", RATE, fits(sendrecv=1e12))
        self.assertEqual((p["exposed_fwd"], p["exposed_bwd"]), (0.0, 0.0))
        self.assertAlmostEqual(p["total"], self.CF + self.CB, delta=1e-15)

    def test_allgather_gathers_and_reduce_scatters_unhidden(self):
        p = sm.predict(SHAPE, N, R, "allgather", RATE, fits(others=1e9))
        gather = 4 * 131072 * 0.75 / 1e9     # 4 K/V blocks, busbw factor 3/4
        scatter = 4 * 262144 * 0.75 / 1e9    # 4 fp32 dK/dV blocks
        self.assertAlmostEqual(p["fwd"], self.CF + gather, delta=1e-15)
        self.assertAlmostEqual(p["bwd"], self.CB + scatter, delta=1e-15)

    def test_ulysses_all_to_alls_and_one_local_call(self):
        p = sm.predict(SHAPE, N, R, "ulysses", RATE, fits(others=1e9))
        # per rank shards: Q 32 768 elements, K, V 32 768 each, 4 096 rows of LSE
        fwd_in, fwd_out = (32768 + 2 * 32768) * 2, (32768 + 4096) * 4
        bwd_in, bwd_out = 32768 * 2, (32768 + 2 * 32768) * 4
        self.assertEqual((fwd_in, fwd_out, bwd_in, bwd_out), (196608, 147456, 65536, 393216))
        # one call: 1 head x 4096 x 4096 pairs = the ring's pairs per rank; constant rate
        self.assertEqual(p["pairs_per_call"], self.PAIRS)
        self.assertAlmostEqual(p["fwd"], self.CF + (fwd_in + fwd_out) * 0.75 / 1e9, delta=1e-15)
        self.assertAlmostEqual(p["bwd"], self.CB + (bwd_in + bwd_out) * 0.75 / 1e9, delta=1e-15)

    def test_hybrid_is_the_exchange_inside_u_and_the_ring_across(self):
        p = sm.predict(SHAPE, N, R, "hybrid", RATE, fits(sendrecv=1e12, others=1e9), U=2)
        exchange = (196608 + 147456 + 65536 + 393216) * 0.5 / 1e9   # the same shards, factor 1/2
        # inner ring: 2 ranks of 2048 rows, 2 heads: pairs per rank 2 x 2048 x 4096 = the same
        self.assertAlmostEqual(p["total"], self.CF + self.CB + exchange, delta=1e-15)

    def test_causal_pairs_zigzag_even_contiguous_last_rank(self):
        z = sm.Shape(1, 1, 1, 8, 2, True, "zigzag")
        c = sm.Shape(1, 1, 1, 8, 2, True, "contiguous")
        self.assertEqual(sm.rank_pairs(z, 4, 2), 8 * 9 / 2 / 2)         # S(S+1)/2 shared by 2
        self.assertEqual(sm.rank_pairs(c, 4, 2), 4 * 4 + 4 * 5 / 2)     # one full block + its own

    def test_a_fit_at_one_group_size_moves_by_the_busbw_factor(self):
        f = fits(others=1e9, alpha=1e-5, group=4)
        t8, _ = sm.collective_time(f, "all_to_all", "intra", 8e6, 8)
        t2, _ = sm.collective_time(f, "all_to_all", "intra", 8e6, 2)
        self.assertAlmostEqual(t8, 1e-5 + 8e6 * 7 / 8 / 1e9, delta=1e-15)
        self.assertAlmostEqual(t2, 1e-5 + 8e6 * 1 / 2 / 1e9, delta=1e-15)
        self.assertEqual(sm.collective_time(f, "all_to_all", "intra", 8e6, 1), (0.0, None))


class Bytes(unittest.TestCase):
    def test_gqa_halves_the_kv_bytes(self):
        gqa = sm.Shape(1, 4, 2, 8, 2, False)
        self.assertEqual(sm.kv_bytes(gqa, N) * 2, sm.kv_bytes(SHAPE, N))
        self.assertEqual(sm.dkdv_bytes(gqa, N) * 2, sm.dkdv_bytes(SHAPE, N))
        self.assertEqual(sm.bytes_sent(gqa, N, R, "allgather") * 2, sm.bytes_sent(SHAPE, N, R, "allgather"))
        self.assertEqual(sm.bytes_sent(gqa, N, R, "ring") * 2, sm.bytes_sent(SHAPE, N, R, "ring"))
        f = fits(sendrecv=1e6)   # hops far slower than the steps: the exposed time is the hops'
        full = sm.predict(SHAPE, N, 2, "ring", RATE, f)["exposed_fwd"]
        half = sm.predict(gqa, N, 2, "ring", RATE, f)["exposed_fwd"]
        step = sm.predict(SHAPE, N, 2, "ring", RATE, f)["compute_fwd"] / 2
        self.assertAlmostEqual(half + step, (full + step) / 2, delta=1e-12)

    def test_counts_as_cp_attention_cpp(self):
        # bytes_sent_per_iteration by hand, R = 4, w = 2, kv = 32 768 elements per K or V
        kv, w, f32 = 32768, 2, 4
        self.assertEqual(sm.bytes_sent(SHAPE, N, 4, "ring"), 2 * kv * w * 3 + 2 * kv * (w * 2 + f32 * 3))
        self.assertEqual(sm.bytes_sent(SHAPE, N, 4, "allgather"), 2 * kv * w * 3 + 2 * kv * f32 * 3)
        self.assertEqual(sm.bytes_sent(SHAPE, N, 2, "ring"), 2 * kv * w + 2 * kv * f32)
        head = (32768 + 2 * kv) * w + (32768 + 4096) * 4 + 32768 * w + (32768 + 2 * kv) * 4
        self.assertEqual(sm.bytes_sent(SHAPE, N, 4, "ulysses"), head * 3 // 4)
        inner = sm.Shape(1, 2, 2, 8, 2, False, "contiguous")   # 2 heads, 2048 rows, ring of 2
        self.assertEqual(sm.bytes_sent(SHAPE, N, 4, "hybrid", 2), head // 2 + sm.bytes_sent(inner, 2048, 2, "ring"))
        self.assertEqual(sm.bytes_sent(SHAPE, N, 1, "ulysses"), 0)


class Missing(unittest.TestCase):
    def test_a_missing_fit_is_named_not_zero(self):
        p = sm.predict(SHAPE, N, R, "ulysses", RATE, fits(drop=("all_to_all",)))
        self.assertIsNone(p["total"])
        self.assertEqual(p["missing"], ["no all_to_all fit (intra-node)"])
        p = sm.predict(SHAPE, N, R, "allgather", RATE, fits(drop=("reduce_scatter",)))
        self.assertIsNone(p["bwd"])
        self.assertIn("no reduce_scatter fit (intra-node)", p["missing"])
        p = sm.predict(SHAPE, N, R, "ring", RATE, fits(), cls="inter")
        self.assertEqual((p["total"], p["missing"]), (None, ["no sendrecv fit (inter-node)"]))
        c = sm.crossover(SHAPE, R, "ulysses", RATE, fits(drop=("all_to_all",)))
        self.assertEqual((c["crossings"], c["missing"]), ([], ["no all_to_all fit (intra-node)"]))

    def test_a_ring_of_one_needs_no_fit_and_an_impossible_split_says_why(self):
        p = sm.predict(SHAPE, N, 1, "ring", RATE, {})
        flop = 32 * 4 * 1024 * 1024          # 4 heads x 1024 x 1024 pairs, 4 d FLOPs each
        self.assertAlmostEqual(p["total"], flop / FWD_RATE + 2.5 * flop / BWD_RATE, delta=1e-15)
        p = sm.predict(SHAPE, N, 8, "ulysses", RATE, fits())
        self.assertIsNone(p["total"])
        self.assertIn("divisible by R=8", p["missing"][0])


class Crossover(unittest.TestCase):
    def test_where_ulysses_and_the_ring_meet_matches_the_closed_form(self):
        # R = 2, no mask, 2 heads of 16. Hops: latency a only; all-to-alls: bandwidth B only.
        # A backward so fast its hop is always exposed; the forward step c(n) = 64 n^2 x 2 / F.
        # Where c(n) > a the ring exposes a (the backward hop) and ulysses K n, with K = 776 B per
        # token of its four all-to-alls (192 + 136 + 64 + 384) x 1/2 / B, so n* = a / K.
        shape = sm.Shape(1, 2, 2, 16, 2, False)
        a, B, F = 1e-3, 1e8, 5e9
        f = {("sendrecv", "intra"): {"alpha_s": a, "bus_beta_Bps": math.inf, "group_size": 2},
             ("all_to_all", "intra"): {"alpha_s": 0.0, "bus_beta_Bps": B, "group_size": 2}}
        rate = sm.Rate.constant(F, 1e30)
        n_star = a / (776 * 0.5 / B)
        self.assertGreater(4 * 16 * 2 * n_star ** 2 / F, a)      # the hop is hidden there: c > a
        c = sm.crossover(shape, 2, "ulysses", rate, f, lo=16, hi=1e5)
        self.assertEqual(len(c["crossings"]), 1)
        n, way = c["crossings"][0]
        self.assertAlmostEqual(n / n_star, 1.0, delta=1e-9)
        self.assertEqual((way, c["faster_at_lo"], c["faster_at_hi"]), ("below", "ulysses", "ring"))

    def test_bisection_finds_each_sign_change(self):
        (n, way), = sm.sign_changes(lambda x: x - 1000.0, 1, 1e6)
        self.assertAlmostEqual(n, 1000.0, delta=1e-6)
        self.assertEqual(way, "below")
        got = sm.sign_changes(lambda x: (x - 100.0) * (x - 10000.0), 1, 1e6)
        self.assertEqual([w for _, w in got], ["above", "below"])
        self.assertEqual([round(x) for x, _ in got], [100, 10000])


class RateTest(unittest.TestCase):
    def test_log_log_interpolation_clamped_beyond_the_samples(self):
        r = sm.Rate([(1e6, 100.0, 50.0), (1e8, 400.0, None)])
        self.assertAlmostEqual(r.fwd(1e7), 200.0, delta=1e-9)     # geometric means
        self.assertAlmostEqual(r.bwd(1e7), math.sqrt(50.0 * 400.0), delta=1e-9)
        self.assertAlmostEqual(r.fwd(1.0), 100.0, delta=1e-9)
        self.assertAlmostEqual(r.fwd(1e12), 400.0, delta=1e-9)


# ---- a synthetic file: a scheme sweep and a collectives sweep with known numbers -------------

S_LEN, RING = 2048, 2
FILE_SHAPE = sm.Shape(1, 2, 2, 16, 4, False, "contiguous")   # fp32, the synthetic files' sizes
FILE_RATE = (2e9, 1e9)                                      # forward, backward FLOP/s
BUS = {"sendrecv": 1e8, "all_gather": 4e8, "reduce_scatter": 2e8, "all_to_all": 3e8}
MEASURED = 1.1                                              # the file's times: predicted x 1.1


def _file_fits():
    return {(op, "intra"): {"alpha_s": 0.0, "bus_beta_Bps": b, "group_size": 2} for op, b in BUS.items()}


def _coll_sweep(sweeps, world, with_fits, stored=True):
    """with_fits: every operation the schemes use (else all_reduce alone); stored: with the
    model/ sub-table ringbench writes (else only the raw points, exactly t = m f(G) / bus)."""
    g = synthetic._sweep(sweeps, "coll", "collectives")
    ops = list(BUS) if with_fits else ["all_reduce"]
    bus = {op: BUS.get(op, 1e9) for op in ops}
    rows = [(op, m) for op in ops for m in (1 << 16, 1 << 20, 1 << 24)]
    sizes = np.array([m for _, m in rows], dtype=np.int64)
    t = np.tile([m * sm.BUS_FACTOR.get(op, lambda g: 1.0)(world) / bus[op] for op, m in rows], (world, 1))
    synthetic.points_table(g, {"operation": ([op for op, _ in rows], "1"), "group": (["world"] * len(rows), "1"),
                               "dtype": (["float32"] * len(rows), "1"),
                               "in_place": (np.zeros(len(rows), dtype=np.int64), "1"),
                               "message_size_bytes": (sizes, "B")},
                           {"time_s": (t, "s"), "group_size": (np.full((world, len(rows)), world), "1")})
    if not stored:
        return
    # stored models as ringbench writes them: beta_Bps is the algorithm bandwidth = bus / factor
    beta = [bus[op] / sm.BUS_FACTOR.get(op, lambda g: 1.0)(world) for op in ops]
    synthetic.points_table(g.create_group("model"),
                           {"operation": (ops, "1"), "group": (["world"] * len(ops), "1"),
                            "dtype": (["float32"] * len(ops), "1"), "group_size": ([world] * len(ops), "1")},
                           {"alpha_s": (np.zeros((world, len(ops))), "s"),
                            "beta_Bps": (np.tile(beta, (world, 1)), "B/s")})


def _ring_point_metrics(pred, scheme, world, n, it=3):
    """One point's metrics, every rank alike: step kernels at FILE_RATE, times MEASURED x pred,
    the ring's calibrated hop at the sendrecv bandwidth."""
    steps = RING if scheme in ("ring", "allgather") else 1
    pairs = pred["pairs_per_call"]
    flop = 4 * FILE_SHAPE.head_dim * pairs
    m = {"step_pairs": np.zeros((world, RING)), "step_compute_s": np.zeros((world, RING)),
         "backward_step_compute_s": np.zeros((world, RING))}
    m["step_pairs"][:, :steps] = pairs
    m["step_compute_s"][:, :steps] = flop / FILE_RATE[0]
    m["backward_step_compute_s"][:, :steps] = 2.5 * flop / FILE_RATE[1]
    m["step_wait_s"] = np.zeros((world, RING))
    m["step_wait_s"][:, 0] = pred["exposed_fwd"] * MEASURED
    m["backward_step_wait_s"] = np.zeros((world, RING))
    m["backward_step_wait_s"][:, 0] = pred["exposed_bwd"] * MEASURED
    for k in ("fwd", "bwd", "total"):
        name = {"fwd": "forward_time_s", "bwd": "backward_time_s", "total": "total_time_s"}[k]
        m[name] = np.full((world, it), pred[k] * MEASURED)
    m["bytes_sent_bytes"] = np.full(world, float(sm.bytes_sent(FILE_SHAPE, n, RING, scheme)))
    hop = sm.kv_bytes(FILE_SHAPE, n) / BUS["sendrecv"] if scheme == "ring" else math.nan
    m["hop_transfer_alone_s"] = np.full(world, hop)
    return m


def make_scheme_file(path, with_fits=True, stored=True, seq_lens=(S_LEN,)):
    """A file of one scheme sweep 'cp' (ring, allgather, ulysses at R = 2 for each of seq_lens)
    and a collectives sweep; returns (path, {(scheme, S): the prediction its times are 1.1 x})."""
    world = RING
    synthetic.make_run(path, world, pingpong=False, collectives=False, p2p=False, drop_ring=True)
    pts = [(sc, S) for S in seq_lens for sc in ("ring", "allgather", "ulysses")]
    rate = sm.Rate.constant(*FILE_RATE)
    preds = {(sc, S): sm.predict(FILE_SHAPE, S // RING, RING, sc, rate, _file_fits()) for sc, S in pts}
    per = [_ring_point_metrics(preds[(sc, S)], sc, world, S // RING) for sc, S in pts]
    with h5py.File(path, "r+") as f:
        g = synthetic._sweep(f["sweeps"], "cp", "ring_attention")
        for k, v in (("batch", 1), ("num_heads", 2), ("num_kv_heads", 2), ("head_dim", 16), ("causal", 0),
                     ("backward", 1)):
            g.attrs[k] = np.int64(v)
        npts = len(pts)
        metrics = {name: (np.stack([m[name] for m in per], axis=1), "B" if name == "bytes_sent_bytes" else
                          "1" if name == "step_pairs" else "s") for name in per[0]}
        metrics["status"] = (np.full((world, npts), "ok", dtype=object), "1")
        synthetic.points_table(g, {"seq_len": ([S for _, S in pts], "1"), "ring_size": ([RING] * npts, "1"),
                                   "scheme": ([sc for sc, _ in pts], "1"),
                                   "ulysses_degree": ([RING if sc == "ulysses" else 1 for sc, _ in pts], "1"),
                                   "layout": (["contiguous"] * npts, "1"), "dtype": (["fp32"] * npts, "1")},
                               metrics)
        _coll_sweep(f["sweeps"], world, with_fits, stored)
    return path, preds


def read_json(path):
    with open(path) as f:
        return json.load(f)


def run_cli(*args):
    return rb_analysis("scheme-model", *args)


class FromAFile(TempDirCase):
    def test_predictions_equal_the_formulas_and_the_errors_the_files_factor(self):
        path, preds = make_scheme_file(self.path("cp.h5"))
        rc, out, err = run_cli(path, "--sizes", "4", "--json", self.path("sm.json"))
        self.assertEqual(rc, 0, err)
        d = read_json(self.path("sm.json"))
        rows = {r["scheme"]: r for r in d["validation"]}
        self.assertEqual(set(rows), {"ring", "allgather", "ulysses"})
        for s, r in rows.items():
            self.assertAlmostEqual(r["predicted_total"] / preds[(s, S_LEN)]["total"], 1.0, delta=1e-9, msg=s)
            self.assertAlmostEqual(r["error_total"], 1 / MEASURED - 1, delta=1e-9, msg=s)
            self.assertTrue(r["bytes_match"], s)
        fits = {(f["operation"], f["link"]): f for f in d["fits"]}
        self.assertAlmostEqual(fits[("all_to_all", "intra")]["bus_beta_Bps"], BUS["all_to_all"], delta=1e-3)
        self.assertFalse(fits[("all_to_all", "inter")]["fitted"])
        self.assertIn("# Per-scheme cost model", out)
        self.assertIn("Not projected across nodes", out)
        # the crossover rows: the run's R and --sizes, ulysses and allgather, intra only
        proj = [(p["ring_size"], p["link"]) for p in d["projections"]]
        self.assertEqual(proj, [(2, "intra"), (4, "intra")])
        self.assertIn("x", d["projections"][0]["crossovers"]["ulysses"]["text"])

    def test_without_stored_models_the_times_are_fitted(self):
        path, preds = make_scheme_file(self.path("cp.h5"), stored=False)
        rc, _, err = run_cli(path, "--json", self.path("sm.json"))
        self.assertEqual(rc, 0, err)
        d = read_json(self.path("sm.json"))
        fits = {(f["operation"], f["link"]): f for f in d["fits"]}
        for op, bus in BUS.items():
            self.assertAlmostEqual(fits[(op, "intra")]["bus_beta_Bps"] / bus, 1.0, delta=1e-6, msg=op)
            self.assertIn("fit", fits[(op, "intra")]["source"])
        for r in d["validation"]:
            self.assertAlmostEqual(r["predicted_total"] / preds[(r["scheme"], S_LEN)]["total"], 1.0, delta=1e-6)

    def test_without_collectives_fits_each_scheme_says_what_is_missing(self):
        path, _ = make_scheme_file(self.path("cp.h5"), with_fits=False)
        rc, out, err = run_cli(path, "--json", self.path("sm.json"))
        self.assertEqual(rc, 0, err)
        rows = {r["scheme"]: r for r in read_json(self.path("sm.json"))["validation"]}
        for s, why in (("ring", "no sendrecv fit (intra-node)"), ("ulysses", "no all_to_all fit (intra-node)"),
                       ("allgather", "no all_gather fit (intra-node)")):
            self.assertIsNone(rows[s]["predicted_total"], s)
            self.assertIn(why, rows[s]["missing"])
        self.assertIn("**no fit**", out)

    def test_without_a_collectives_sendrecv_the_ring_takes_its_own_calibrated_hops(self):
        path, preds = make_scheme_file(self.path("cp.h5"), with_fits=False, seq_lens=(S_LEN, 2 * S_LEN))
        rc, _, err = run_cli(path, "--json", self.path("sm.json"))
        self.assertEqual(rc, 0, err)
        d = read_json(self.path("sm.json"))
        sr = next(f for f in d["fits"] if (f["operation"], f["link"]) == ("sendrecv", "intra"))
        self.assertIn("hop_transfer_alone_s", sr["source"])
        self.assertAlmostEqual(sr["bus_beta_Bps"] / BUS["sendrecv"], 1.0, delta=1e-6)
        for r in d["validation"]:
            if r["scheme"] == "ring":
                self.assertAlmostEqual(r["predicted_total"] / preds[("ring", r["seq_len"])]["total"], 1.0, delta=1e-6)
            else:
                self.assertIsNone(r["predicted_total"])

    def test_a_dilated_sweep_is_named_as_not_modelled(self):
        path, _ = make_scheme_file(self.path("cp.h5"))
        with h5py.File(path, "r+") as f:
            f["sweeps/cp"].attrs["segment_lengths"] = np.array([1024], dtype=np.int64)
            f["sweeps/cp"].attrs["dilation_rates"] = np.array([2], dtype=np.int64)
        rc, out, err = run_cli(path)
        self.assertEqual(rc, 0, err)
        self.assertIn("Not modelled: the points of cp: dilated branches", out)

    def test_a_file_without_a_scheme_sweep_is_exit_2(self):
        path = synthetic.make_run(self.path("ring.h5"), 2)
        rc, _, err = run_cli(path)
        self.assertEqual(rc, 2)
        self.assertIn("two or more schemes", err)

    def test_the_report_ends_its_cost_model_section_with_it(self):
        path, _ = make_scheme_file(self.path("cp.h5"))
        summary = report.build([path], self.path("rep"), (4,))
        with open(self.path("rep/report.md")) as f:
            md = f.read()
        self.assertLess(md.index("## Cost-model prediction"), md.index("### Per-scheme cost model"))
        self.assertLess(md.index("### Per-scheme cost model"), md.index("## Plots"))
        js = read_json(self.path("rep/report.json"))["scheme_model"]
        self.assertEqual(len(js["validation"]), 3)
        self.assertEqual(len(summary["scheme_model"]["projections"]), 2)


if __name__ == "__main__":
    unittest.main()
