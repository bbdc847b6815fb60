#!/usr/bin/env python3
"""PyTorch's own context-parallel attention at ringbench's shapes and FLOP convention.

A yardstick for ringbench's ring attention: the same problem (batch x heads x tokens x head_dim,
bf16, causal or not, forward and backward) run by what a PyTorch user would reach for, timed the
way ringbench times its ring, so the two sets of figures can sit side by side.

Methods (--methods):
  local        one F.scaled_dot_product_attention call (cuDNN backend) over each rank's own
               tokens-per-GPU rows, every rank at once: the shape a ring of size 1 runs, the
               "one local cuDNN call" anchor.
  local_flash  the same with the flash backend; skipped, with the reason, where it cannot run.
  ring         torch.distributed.tensor.experimental.context_parallel over a 1-D DeviceMesh of
               all ranks, S = tokens-per-GPU x world. Pass-KV ring (--cp-rotate-method alltoall,
               the default) or all-gather of K/V (allgather). Causal runs use PyTorch's head-tail
               load balance (each rank holds chunk r and chunk 2R-1-r, ringbench's zigzag).
               cuDNN backend, falling back to flash if cuDNN is refused (backend_used says).
  ulysses      a plain Ulysses: all_to_all_single of Q, K, V from (b, h, S/R, d) to
               (b, h/R, S, d), one local SDPA over the whole sequence, all_to_all_single back;
               backward through autograd. Needs heads % world == 0.

Timing: per iteration a dist.barrier and torch.cuda.synchronize, then CUDA events around the
forward call and the backward call; each iteration's time is the slowest rank's (all_reduce MAX)
and the reported figure is the median of those over --iterations, after --warmup iterations
(the first warmup also probes the backend; --warmup 0 still runs that one).

FLOP convention (ringbench's): forward FLOPs per GPU = 4 * head_dim * attending (query, key) pairs
of the whole problem * batch * heads / world, pairs = S*(S+1)/2 causal and S*S otherwise;
backward = 2.5 x forward. `local` counts S = tokens-per-GPU and world = 1 (it is one GPU's own
call). TFLOP/s per GPU: forward FLOPs / median forward time, 2.5 x that / median backward time,
their sum / median total time.

Run on one node (Open MPI; the lent GPU machines need NCCL_NVLS_ENABLE=0, and run as root):

    OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 NCCL_NVLS_ENABLE=0 \\
      mpirun -np 4 --bind-to none -x NCCL_NVLS_ENABLE python3 launch/torch_cp.py --out OUT

or `NCCL_NVLS_ENABLE=0 torchrun --standalone --nproc-per-node 4 launch/torch_cp.py --out OUT`.
Rank/world come from OMPI_COMM_WORLD_* (else RANK/WORLD_SIZE/LOCAL_RANK, else one process);
MASTER_ADDR defaults to 127.0.0.1 and the port to --port, MASTER_PORT or 29533 (torchrun's own
MASTER_PORT wins under torchrun). Rank 0 prints a table and writes OUT/torch_cp.json, rewritten
after every point (with the point under way as "in_progress", so a run that dies says where).
Every point ends with all ranks agreeing on its status: a method that fails is recorded as error
(or skipped) with the exception text and the run goes on; a rank left waiting in a collective
ends after --timeout-s (NCCL's watchdog) instead of hanging.

Its figures go beside ringbench's in docs/performance.md (same machine, same shapes).
"""
import argparse
import contextlib
import json
import math
import os
import socket
import statistics
import sys
import traceback

METHODS = ("local", "local_flash", "ring", "ulysses")
BACKWARD_FACTOR = 2.5
DEFAULT_PORT = 29533
STATISTIC = "median of iterations of the slowest rank"
FLOP_CONVENTION = ("FlashAttention: forward 4*d per attending (query, key) pair of the whole "
                   "problem (causal S*(S+1)/2, else S*S) x batch x heads / world; backward 2.5x "
                   "forward; local: S = tokens_per_gpu, world = 1")
STATUS_RANK = {"ok": 0, "skipped": 1, "error": 2}
COLUMNS = ("method", "causal", "tokens/GPU", "world", "fwd ms", "bwd ms", "total ms",
           "TFLOP/s/GPU total", "backend", "note")
NOTE_WIDTH = 100


# ---------------------------------------------------------------- pure parts (no torch)

def attending_pairs(seq_len, causal):
    """Query-key pairs a causal (diagonal included) or full S x S attention computes."""
    return seq_len * (seq_len + 1) // 2 if causal else seq_len * seq_len


def flops(seq_len, causal, batch, heads, head_dim, world=1):
    """Per-GPU FLOPs of one iteration: {"forward", "backward", "total"}."""
    forward = 4.0 * head_dim * attending_pairs(seq_len, causal) * batch * heads / world
    backward = BACKWARD_FACTOR * forward
    return {"forward": forward, "backward": backward, "total": forward + backward}


def problem_of(method, tokens_per_gpu, world):
    """(sequence length, world in the FLOP count): local is each GPU's own call, the
    distributed methods split one sequence of tokens_per_gpu x world."""
    if method.startswith("local"):
        return tokens_per_gpu, 1
    return tokens_per_gpu * world, world


def tflops(flop, ms):
    if flop is None or not ms:
        return None
    return flop / (ms * 1e-3) / 1e12


def new_point(method, causal, tokens_per_gpu, world, shape, warmup, iterations):
    """A point with its problem and FLOPs filled in and no measurement yet.
    shape: (batch, heads, head_dim)."""
    seq_len, flop_world = problem_of(method, tokens_per_gpu, world)
    f = flops(seq_len, causal, *shape, world=flop_world)
    return {"method": method, "causal": causal, "tokens_per_gpu": tokens_per_gpu,
            "world": world, "seq_len": seq_len, "flop_world": flop_world,
            "forward_flop": f["forward"], "backward_flop": f["backward"],
            "forward_ms_median": None, "backward_ms_median": None, "total_ms_median": None,
            "forward_tflops": None, "backward_tflops": None, "total_tflops": None,
            "repeats": iterations, "warmup": warmup, "statistic": STATISTIC,
            "backend_used": None, "status": "ok", "reason": "", "note": ""}


def summarize(point, forward_ms, backward_ms, total_ms):
    """Fill point's medians and rates from per-iteration times already maxed over ranks."""
    point["forward_ms"], point["backward_ms"], point["total_ms"] = forward_ms, backward_ms, total_ms
    fwd, bwd, tot = (statistics.median(x) for x in (forward_ms, backward_ms, total_ms))
    point.update(forward_ms_median=fwd, backward_ms_median=bwd, total_ms_median=tot)
    point["forward_tflops"] = tflops(point["forward_flop"], fwd)
    point["backward_tflops"] = tflops(point["backward_flop"], bwd)
    point["total_tflops"] = tflops(point["forward_flop"] + point["backward_flop"], tot)
    return point


def verdict(reports):
    """One status for every rank from each rank's (status, reason): the worst status, and the
    reasons with the ranks that gave them (identical ones merged), so all ranks agree."""
    worst = max((s for s, _ in reports), key=STATUS_RANK.__getitem__)
    if worst == "ok":
        return "ok", ""
    by_reason = {}
    for rank, (status, reason) in enumerate(reports):
        if status != "ok":
            by_reason.setdefault(reason, []).append(rank)
    if len(by_reason) == 1 and len(next(iter(by_reason.values()))) == len(reports):
        return worst, next(iter(by_reason))
    parts = [f"rank{'s' if len(r) > 1 else ''} {','.join(map(str, r))}: {reason}"
             for reason, r in by_reason.items()]
    return worst, "; ".join(parts)


def launch_env(env, port=None):
    """Rank, world, local rank and rendezvous address from the launcher's environment."""
    if "OMPI_COMM_WORLD_RANK" in env:
        launcher = "mpirun"
        rank, world = int(env["OMPI_COMM_WORLD_RANK"]), int(env["OMPI_COMM_WORLD_SIZE"])
        local_rank = int(env.get("OMPI_COMM_WORLD_LOCAL_RANK", rank))
    elif "RANK" in env:
        launcher = "torchrun"
        rank, world = int(env["RANK"]), int(env["WORLD_SIZE"])
        local_rank = int(env.get("LOCAL_RANK", rank))
    else:
        launcher, rank, world, local_rank = "single", 0, 1, 0
    # torchrun's agent store listens on its own MASTER_PORT: another port would not meet it.
    if launcher == "torchrun" and env.get("MASTER_PORT"):
        master_port = int(env["MASTER_PORT"])
    else:
        master_port = int(port or env.get("MASTER_PORT") or DEFAULT_PORT)
    return {"launcher": launcher, "rank": rank, "world": world, "local_rank": local_rank,
            "master_addr": env.get("MASTER_ADDR", "127.0.0.1"), "master_port": master_port}


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description="PyTorch context-parallel attention (local SDPA, context_parallel ring, "
                    "Ulysses) at ringbench's shapes and FLOP convention.")
    p.add_argument("--tokens-per-gpu", type=int, nargs="+", default=[8192, 32768])
    p.add_argument("--heads", type=int, default=16)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--dtype", choices=("bf16", "fp16"), default="bf16")
    p.add_argument("--causal", nargs="+", choices=("off", "on"), default=["off", "on"])
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--iterations", type=int, default=6)
    p.add_argument("--methods", nargs="+", choices=METHODS, default=list(METHODS))
    p.add_argument("--out", required=True, help="folder for torch_cp.json")
    p.add_argument("--cp-rotate-method", choices=("allgather", "alltoall"), default="alltoall",
                   help="context_parallel's K/V exchange: alltoall = pass-KV ring")
    p.add_argument("--port", type=int, default=None,
                   help=f"rendezvous port under mpirun (default MASTER_PORT or {DEFAULT_PORT})")
    p.add_argument("--timeout-s", type=int, default=600,
                   help="NCCL collective timeout: a rank stuck in a collective ends after it")
    args = p.parse_args(argv)
    for name in ("heads", "head_dim", "batch", "iterations"):
        if getattr(args, name) < 1:
            p.error(f"--{name.replace('_', '-')} must be at least 1")
    if args.warmup < 0 or min(args.tokens_per_gpu) < 1:
        p.error("--warmup must be >= 0 and every --tokens-per-gpu >= 1")
    args.causal = [c == "on" for c in dict.fromkeys(args.causal)]
    args.methods = list(dict.fromkeys(args.methods))
    return args


def settings_of(args, env):
    return {"tokens_per_gpu": args.tokens_per_gpu, "heads": args.heads,
            "head_dim": args.head_dim, "batch": args.batch, "dtype": args.dtype,
            "causal": args.causal, "warmup": args.warmup, "iterations": args.iterations,
            "methods": args.methods, "cp_rotate_method": args.cp_rotate_method,
            "statistic": STATISTIC, "flop_convention": FLOP_CONVENTION,
            "launcher": env["launcher"], "master_addr": env["master_addr"],
            "master_port": env["master_port"], "timeout_s": args.timeout_s}


def format_number(x):
    """Three significant figures, never in exponent form; '-' for no value."""
    if x is None or (isinstance(x, float) and math.isnan(x)):
        return "-"
    if x == 0:
        return "0"
    return f"{x:.{max(0, 2 - math.floor(math.log10(abs(x))))}f}"


def table_row(point):
    note = point["reason"] if point["status"] != "ok" else point.get("note", "")
    note = " ".join(str(note).split())
    if point["status"] != "ok":
        note = f"{point['status']}: {note}"
    if len(note) > NOTE_WIDTH:
        note = note[:NOTE_WIDTH - 3] + "..."
    return (point["method"], "on" if point["causal"] else "off", str(point["tokens_per_gpu"]),
            str(point["world"]), format_number(point["forward_ms_median"]),
            format_number(point["backward_ms_median"]), format_number(point["total_ms_median"]),
            format_number(point["total_tflops"]), point["backend_used"] or "-",
            note.replace("|", "/"))


def format_table(points):
    """A Markdown table (pastes into docs/performance.md), one row per point."""
    rows = [COLUMNS] + [table_row(p) for p in points]
    widths = [max(len(r[i]) for r in rows) for i in range(len(COLUMNS))]

    def line(r):
        return "| " + " | ".join(c.ljust(w) for c, w in zip(r, widths)) + " |"

    out = [line(COLUMNS), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [line(r) for r in rows[1:]]
    return "\n".join(out)


def document(machine, settings, points, in_progress=None):
    doc = {"machine": machine, "settings": settings, "points": points}
    if in_progress is not None:
        doc["in_progress"] = in_progress
    return doc


def write_json(path, doc):
    # Written whole then renamed: a run killed mid-write leaves the previous file.
    tmp = path + ".tmp"
    with open(tmp, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")
    os.replace(tmp, path)


def error_text(exc, limit=2000):
    text = f"{type(exc).__name__}: {exc}"
    return text if len(text) <= limit else text[:limit - 3] + "..."


class Skip(Exception):
    """A method that does not apply to this shape or this PyTorch (recorded as skipped)."""


# ---------------------------------------------------------------- torch parts (lazy)

def init_distributed(env, timeout_s):
    import datetime
    import torch
    import torch.distributed as dist
    n = torch.cuda.device_count()
    if env["local_rank"] >= n:
        sys.exit(f"rank {env['rank']}: local rank {env['local_rank']} but {n} GPUs visible")
    for key, value in (("RANK", env["rank"]), ("WORLD_SIZE", env["world"]),
                       ("LOCAL_RANK", env["local_rank"]), ("MASTER_ADDR", env["master_addr"]),
                       ("MASTER_PORT", env["master_port"])):
        os.environ[key] = str(value)
    torch.cuda.set_device(env["local_rank"])
    dist.init_process_group("nccl", device_id=torch.device("cuda", env["local_rank"]),
                            timeout=datetime.timedelta(seconds=timeout_s))


def machine_info(world):
    import torch
    nccl = torch.cuda.nccl.version()
    return {"gpu": torch.cuda.get_device_name(), "gpus_visible": torch.cuda.device_count(),
            "host": socket.gethostname(), "torch": torch.__version__,
            "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else str(nccl),
            "world": world}


def agree(status, reason):
    """Every rank's (status, reason) to every rank, and the common verdict."""
    import torch.distributed as dist
    reports = [None] * dist.get_world_size()
    dist.all_gather_object(reports, (status, reason))
    return verdict(reports)


def guarded(fn):
    """(status, reason, result) of fn(); the traceback goes to this rank's stderr."""
    try:
        return "ok", "", fn()
    except Skip as e:
        return "skipped", str(e), None
    except Exception as e:  # noqa: BLE001 - any failure is a recorded point, not a crash
        import torch.distributed as dist
        print(f"[rank {dist.get_rank()}] {traceback.format_exc()}", file=sys.stderr, flush=True)
        return "error", error_text(e), None


def torch_dtype(name):
    import torch
    return {"bf16": torch.bfloat16, "fp16": torch.float16}[name]


def backend_of(name):
    from torch.nn.attention import SDPBackend
    return {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[name]


class LocalRunner:
    """One SDPA call over this rank's own rows."""
    context = contextlib.nullcontext
    failure_status = "error"

    def __init__(self, args, tokens, causal, backends=("cudnn",)):
        import torch
        self.causal, self.backends = causal, list(backends)
        shape = (args.batch, args.heads, tokens, args.head_dim)
        opts = {"dtype": torch_dtype(args.dtype), "device": "cuda"}
        self.q, self.k, self.v = (torch.randn(shape, **opts, requires_grad=True) for _ in range(3))
        self.dout = torch.randn(shape, **opts)
        self.note = "one SDPA call on each rank's own rows, all ranks at once"

    def reset(self):
        for t in (self.q, self.k, self.v):
            t.grad = None

    def forward(self):
        import torch.nn.functional as F
        return F.scaled_dot_product_attention(self.q, self.k, self.v, is_causal=self.causal)

    def backward(self, out):
        out.backward(self.dout)


class LocalFlashRunner(LocalRunner):
    failure_status = "skipped"

    def __init__(self, args, tokens, causal):
        import torch
        available = getattr(torch.backends.cuda, "is_flash_attention_available", lambda: True)
        if not available():
            raise Skip("this PyTorch build has no flash attention")
        super().__init__(args, tokens, causal, backends=("flash",))


_ULYSSES = None


def _ulysses_ops():
    """The two all-to-alls as autograd Functions, each the other's backward (built on first
    use: torch is imported lazily)."""
    global _ULYSSES
    if _ULYSSES is not None:
        return _ULYSSES
    import torch
    import torch.distributed as dist

    def exchange(send):
        recv = torch.empty_like(send)
        dist.all_to_all_single(recv, send)
        return recv

    def seq_to_heads(x, w):
        # (b, h, s, d): chunk j of heads to rank j; rank i's reply is sequence chunk i.
        b, h, s, d = x.shape
        recv = exchange(x.view(b, w, h // w, s, d).transpose(0, 1).contiguous())
        return recv.permute(1, 2, 0, 3, 4).reshape(b, h // w, w * s, d)

    def heads_to_seq(y, w):
        # (b, h/w, S, d): sequence chunk j to rank j; rank i's reply is head group i.
        b, hw, big_s, d = y.shape
        send = y.view(b, hw, w, big_s // w, d).permute(2, 0, 1, 3, 4).contiguous()
        return exchange(send).transpose(0, 1).reshape(b, w * hw, big_s // w, d)

    def all_to_all(there, back):
        # The gradient of a re-sharding is the opposite re-sharding of the gradient.
        class AllToAll(torch.autograd.Function):
            @staticmethod
            def forward(ctx, x, w):
                ctx.w = w
                return there(x, w)

            @staticmethod
            def backward(ctx, grad):
                return back(grad.contiguous(), ctx.w), None
        return AllToAll

    _ULYSSES = (all_to_all(seq_to_heads, heads_to_seq), all_to_all(heads_to_seq, seq_to_heads))
    return _ULYSSES


class UlyssesRunner(LocalRunner):
    """Sequence-sharded Q, K, V re-sharded by heads, one SDPA over all S, and back."""

    def __init__(self, args, tokens, causal):
        import torch.distributed as dist
        self.world = dist.get_world_size()
        if args.heads % self.world:
            raise Skip(f"heads {args.heads} not divisible by world {self.world}")
        super().__init__(args, tokens, causal, backends=("cudnn", "flash"))
        self.note = "all_to_all_single x3 + SDPA(S) + all_to_all_single; contiguous chunks"

    def forward(self):
        import torch.nn.functional as F
        to_heads, to_seq = _ulysses_ops()
        q, k, v = (to_heads.apply(t, self.world) for t in (self.q, self.k, self.v))
        return to_seq.apply(F.scaled_dot_product_attention(q, k, v, is_causal=self.causal),
                            self.world)


_MESH = None


class RingRunner(LocalRunner):
    """torch's context_parallel ring: full Q, K, V on every rank, sharded in place on entry."""

    def __init__(self, args, tokens, causal):
        import torch
        import torch.distributed as dist
        try:
            # The real function and its options live here in 2.x (a re-export since the
            # _context_parallel package appeared): _cp_options has to be the same object.
            from torch.distributed.tensor.experimental._attention import (
                _cp_options, context_parallel, set_rotate_method)
        except ImportError as e:
            raise Skip(f"no context_parallel in torch {torch.__version__}: {e}") from e
        if causal and tokens % 2:
            raise Skip("causal head-tail load balance needs an even number of tokens per GPU")
        world = dist.get_world_size()
        set_rotate_method(args.cp_rotate_method)
        # Non-causal SDPA is refused with load balancing on; causal without it would leave
        # the last rank all the work.
        _cp_options.enable_load_balance = causal
        self.mesh, self._context_parallel = _device_mesh(world), context_parallel
        self.causal, self.backends = causal, ["cudnn", "flash"]
        opts = {"dtype": torch_dtype(args.dtype), "device": "cuda"}
        # The same global tensors on every rank: each rank's shard is a piece of one problem.
        generator = torch.Generator(device="cuda").manual_seed(2024)
        full = (args.batch, args.heads, tokens * world, args.head_dim)
        self.q, self.k, self.v = (torch.randn(full, **opts, generator=generator) for _ in range(3))
        self.dout = torch.randn((args.batch, args.heads, tokens, args.head_dim), **opts)
        layout = "head-tail load balance" if causal else "contiguous chunks"
        self.note = f"context_parallel, rotate {args.cp_rotate_method}, {layout}"

    @contextlib.contextmanager
    def context(self):
        """context_parallel entered for all iterations of the point, left even on an error:
        an exception through its generator would skip its exit and leave SDPA patched."""
        buffers = [self.q, self.k, self.v]
        cm = self._context_parallel(self.mesh, buffers=buffers, buffer_seq_dims=[2, 2, 2],
                                    no_restore_buffers=set(buffers))
        cm.__enter__()
        try:
            # Only now: sharding resizes the buffers, which autograd refuses on a leaf
            # that requires grad.
            for t in buffers:
                t.requires_grad_(True)
            yield
        finally:
            for t in buffers:
                t.grad = None
                t.requires_grad_(False)
            cm.__exit__(None, None, None)


def _device_mesh(world):
    global _MESH
    if _MESH is None:
        from torch.distributed.device_mesh import init_device_mesh
        _MESH = init_device_mesh("cuda", (world,))
    return _MESH


RUNNERS = {"local": LocalRunner, "local_flash": LocalFlashRunner, "ring": RingRunner,
           "ulysses": UlyssesRunner}


def one_iteration(runner, backend):
    """[forward, backward, total] ms of this rank for one iteration."""
    import torch
    import torch.distributed as dist
    from torch.nn.attention import sdpa_kernel
    runner.reset()
    dist.barrier()
    torch.cuda.synchronize()
    start, mid, end = (torch.cuda.Event(enable_timing=True) for _ in range(3))
    with sdpa_kernel(backend_of(backend)):
        start.record()
        out = runner.forward()
        mid.record()
        runner.backward(out)
        end.record()
    torch.cuda.synchronize()
    return [start.elapsed_time(mid), mid.elapsed_time(end), start.elapsed_time(end)]


def slowest(times):
    """Per-iteration times maxed over ranks, as (forward, backward, total) lists."""
    import torch
    import torch.distributed as dist
    t = torch.tensor(times, dtype=torch.float64, device="cuda")
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return tuple(list(col) for col in zip(*t.cpu().tolist()))


def measure(runner, warmup, iterations):
    """Probe the runner's backends in order with the first warmup iteration (all ranks agree
    on each try), then the rest of the warmup and the timed iterations on the first that ran.
    Returns {"status", "reason", "backend", "times", "refused"}."""
    refused = []
    for backend in runner.backends:
        status, reason, _ = guarded(lambda: one_iteration(runner, backend))
        status, reason = agree(status, reason)
        if status == "ok":
            break
        refused.append(f"{backend}: {reason}")
    else:
        return {"status": runner.failure_status, "reason": "; ".join(refused),
                "backend": None, "times": None, "refused": refused}

    def timed():
        for _ in range(warmup - 1):
            one_iteration(runner, backend)
        return [one_iteration(runner, backend) for _ in range(iterations)]

    status, reason, times = guarded(timed)
    status, reason = agree(status, reason)
    if status == "ok":
        times = slowest(times)
    return {"status": status, "reason": reason, "backend": backend,
            "times": times if status == "ok" else None, "refused": refused}


def run_point(args, method, causal, tokens, world):
    """One (method, causal, tokens) point; every rank returns the same status."""
    import torch
    shape = (args.batch, args.heads, args.head_dim)
    point = new_point(method, causal, tokens, world, shape, max(args.warmup, 1), args.iterations)
    status, reason, runner = guarded(lambda: RUNNERS[method](args, tokens, causal))
    status, reason = agree(status, reason)
    if status == "ok":
        with contextlib.ExitStack() as stack:
            status, reason, _ = guarded(lambda: stack.enter_context(runner.context()))
            status, reason = agree(status, reason)
            if status == "ok":
                m = measure(runner, max(args.warmup, 1), args.iterations)
                status, reason, point["backend_used"] = m["status"], m["reason"], m["backend"]
                if m["times"]:
                    summarize(point, *m["times"])
                point["note"] = "; ".join([runner.note] + [f"refused {r}" for r in m["refused"]])
    point["status"], point["reason"] = status, reason
    runner = None
    torch.cuda.empty_cache()
    return point


def main(argv=None):
    args = parse_args(argv)
    env = launch_env(os.environ, args.port)
    init_distributed(env, args.timeout_s)
    import torch.distributed as dist
    rank0 = env["rank"] == 0
    machine, settings = machine_info(env["world"]), settings_of(args, env)
    path = os.path.join(args.out, "torch_cp.json")
    if rank0:
        os.makedirs(args.out, exist_ok=True)
    points = []
    for tokens in args.tokens_per_gpu:
        for causal in args.causal:
            for method in args.methods:
                here = {"method": method, "causal": causal, "tokens_per_gpu": tokens}
                if rank0:
                    write_json(path, document(machine, settings, points, here))
                    print(f"[torch_cp] {method}, causal {'on' if causal else 'off'}, "
                          f"{tokens} tokens/GPU, world {env['world']}", flush=True)
                points.append(run_point(args, method, causal, tokens, env["world"]))
    if rank0:
        write_json(path, document(machine, settings, points))
        print(f"\n{machine['gpu']} x {env['world']}, torch {machine['torch']}, "
              f"cuDNN {machine['cudnn']}, NCCL {machine['nccl']}; {args.dtype}, "
              f"b{args.batch} h{args.heads} d{args.head_dim}; ms: {STATISTIC} "
              f"({args.iterations} after {max(args.warmup, 1)} warmup)\n")
        print(format_table(points))
        print(f"\nwrote {path}", flush=True)
    dist.barrier()
    dist.destroy_process_group()
    return 1 if any(p["status"] == "error" for p in points) else 0


if __name__ == "__main__":
    sys.exit(main())
