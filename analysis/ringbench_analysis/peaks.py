"""Device peaks: what a known GPU can do at most, so the report can say "% of peak".

Dense (no structured sparsity) tensor-core rates in TFLOP/s per dtype as the compute sweep
names them (bfloat16, float16, tf32, float32, float64), HBM bandwidth, NVLink bandwidth per
direction and PCIe bandwidth per direction (host <-> device), all in GB/s (1e9 B/s).

Vendors print tensor rates "with sparsity"; the figures here are those halved. NVLink is
printed as the sum of both directions; a ring or a copy uses one direction, so half of it.
Unknown GPUs (and host runs) have no peaks: `rb-analysis report --peaks PEAKS.yaml` supplies
them (docs/analysis.md has the format).
"""
import re

# (pattern on /ranks/gpu_name, peaks). The first match wins: specific names before general.
KNOWN = [
    # NVIDIA H100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h100, 2023):
    # H100 SXM5: FP64 tensor 67, TF32 989 (sparse), BF16/FP16 1979 (sparse), FP32 67 TFLOP/s;
    # HBM3 3.35 TB/s; NVLink 900 GB/s; PCIe Gen5 128 GB/s (both directions).
    (r"H100.*(NVL)", {"model": "NVIDIA H100 NVL",
                      # same datasheet, H100 NVL column: BF16 1671 / TF32 835 sparse, FP32 60,
                      # HBM3 3.9 TB/s, NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s
                      "tflops": {"bfloat16": 835.5, "float16": 835.5, "tf32": 417.5,
                                 "float32": 60.0, "float64": 60.0},
                      "hbm_GBps": 3900, "nvlink_GBps": 300, "pcie_GBps": 64}),
    (r"H100.*PCIe", {"model": "NVIDIA H100 PCIe",
                     # same datasheet, H100 PCIe column: BF16 1513 / TF32 756 sparse, FP32 51,
                     # FP64 tensor 51, HBM2e 2.0 TB/s, NVLink bridge 600 GB/s, PCIe Gen5 128 GB/s
                     "tflops": {"bfloat16": 756.5, "float16": 756.5, "tf32": 378.0,
                                "float32": 51.2, "float64": 51.2},
                     "hbm_GBps": 2000, "nvlink_GBps": 300, "pcie_GBps": 64}),
    (r"H100", {"model": "NVIDIA H100 SXM5",
               "tflops": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7,
                          "float32": 66.9, "float64": 66.9},
               "hbm_GBps": 3350, "nvlink_GBps": 450, "pcie_GBps": 64}),
    # NVIDIA GH200 Grace Hopper Superchip datasheet (nvidia.com/en-us/data-center/grace-hopper-
    # superchip, 2024): the H100 SXM's tensor rates (FP8 3958 sparse -> BF16 989 dense); 96 GB
    # HBM3 at 4 TB/s or 144 GB HBM3e at 4.9 TB/s; NVLink 900 GB/s; CPU<->GPU over NVLink-C2C,
    # 900 GB/s (both directions), in place of PCIe. Before H200: "GH200" contains "H200".
    (r"GH200.*(144|HBM3e)", {"model": "NVIDIA GH200 144GB HBM3e",
                             "tflops": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7,
                                        "float32": 66.9, "float64": 66.9},
                             "hbm_GBps": 4900, "nvlink_GBps": 450, "pcie_GBps": 450}),
    (r"GH200", {"model": "NVIDIA GH200 96GB HBM3",
                "tflops": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7,
                           "float32": 66.9, "float64": 66.9},
                "hbm_GBps": 4000, "nvlink_GBps": 450, "pcie_GBps": 450}),
    # NVIDIA H200 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/h200, 2024), H200 SXM:
    # the H100 SXM's tensor rates, HBM3e 4.8 TB/s, NVLink 900 GB/s, PCIe Gen5 128 GB/s.
    (r"H200.*NVL", {"model": "NVIDIA H200 NVL",
                    # same datasheet, H200 NVL column: BF16 1671 / TF32 835 sparse, FP32 60,
                    # HBM3e 4.8 TB/s, NVLink bridge 900 GB/s
                    "tflops": {"bfloat16": 835.5, "float16": 835.5, "tf32": 417.5,
                               "float32": 60.0, "float64": 60.0},
                    "hbm_GBps": 4800, "nvlink_GBps": 450, "pcie_GBps": 64}),
    (r"H200", {"model": "NVIDIA H200 SXM",
               "tflops": {"bfloat16": 989.4, "float16": 989.4, "tf32": 494.7,
                          "float32": 66.9, "float64": 66.9},
               "hbm_GBps": 4800, "nvlink_GBps": 450, "pcie_GBps": 64}),
    # NVIDIA HGX B200 / DGX B200 datasheet (2024), per GPU = the 8-GPU figures / 8: FP16/BF16
    # 36 PFLOPS sparse -> 2250 dense, TF32 18 PFLOPS sparse -> 1125 dense, FP32 600 TFLOPS ->
    # 75, FP64 tensor 296 -> 37; HBM3e 8 TB/s; NVLink 5 1.8 TB/s; PCIe Gen5 128 GB/s.
    (r"B200", {"model": "NVIDIA B200",
               "tflops": {"bfloat16": 2250.0, "float16": 2250.0, "tf32": 1125.0,
                          "float32": 75.0, "float64": 37.0},
               "hbm_GBps": 8000, "nvlink_GBps": 900, "pcie_GBps": 64}),
    # NVIDIA A100 Tensor Core GPU datasheet (nvidia.com/en-us/data-center/a100, 2021):
    # BF16/FP16 312, TF32 156 (dense), FP32 19.5, FP64 tensor 19.5 TFLOP/s; HBM2e 2039 GB/s
    # (80GB SXM), 1935 GB/s (80GB PCIe), HBM2 1555 GB/s (40GB); NVLink 600 GB/s (SXM; PCIe:
    # bridge 600 GB/s); PCIe Gen4 64 GB/s (both directions).
    (r"A100.*SXM.*40", {"model": "NVIDIA A100 SXM4 40GB",
                        "tflops": {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0,
                                   "float32": 19.5, "float64": 19.5},
                        "hbm_GBps": 1555, "nvlink_GBps": 300, "pcie_GBps": 32}),
    (r"A100.*PCI", {"model": "NVIDIA A100 PCIe",
                    "tflops": {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0,
                               "float32": 19.5, "float64": 19.5},
                    "hbm_GBps": 1935, "nvlink_GBps": 300, "pcie_GBps": 32}),
    (r"A100", {"model": "NVIDIA A100 SXM4 80GB",
               "tflops": {"bfloat16": 312.0, "float16": 312.0, "tf32": 156.0,
                          "float32": 19.5, "float64": 19.5},
               "hbm_GBps": 2039, "nvlink_GBps": 300, "pcie_GBps": 32}),
]

# Ring attention and compute name dtypes differently; the peaks are keyed as compute does.
DTYPE_ALIASES = {"bf16": "bfloat16", "fp16": "float16", "fp32": "float32", "fp64": "float64",
                 "half": "float16", "float": "float32", "double": "float64"}


class PeaksError(Exception):
    """A --peaks file that cannot be used."""


def lookup(gpu_name):
    """Peaks of a known GPU (a copy, with 'source': 'built-in table'), or None."""
    for pattern, peaks in KNOWN:
        if gpu_name and re.search(pattern, gpu_name, re.IGNORECASE):
            return dict(peaks, tflops=dict(peaks["tflops"]), source="built-in table (peaks.py)")
    return None


def load_override(path):
    """A --peaks YAML file: model, tflops {dtype: TFLOP/s}, hbm_GBps, nvlink_GBps, pcie_GBps
    (every key optional but one)."""
    import yaml
    try:
        with open(path) as f:
            doc = yaml.safe_load(f) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise PeaksError(f"{path}: cannot read ({exc})") from exc
    except RecursionError:
        raise PeaksError(f"{path}: not a peaks file (YAML nested too deeply)") from None
    known = {"model", "tflops", "hbm_GBps", "nvlink_GBps", "pcie_GBps"}
    if not isinstance(doc, dict) or not doc or set(doc) - known:
        raise PeaksError(f"{path}: expected a mapping with keys among {', '.join(sorted(known))}"
                         + (f"; unknown: {', '.join(sorted(set(doc) - known))}" if isinstance(doc, dict) else ""))
    tflops = doc.get("tflops") or {}
    if not isinstance(tflops, dict):
        raise PeaksError(f"{path}: tflops must map a dtype (bfloat16, float16, tf32, float32) to TFLOP/s")
    out = {"model": str(doc.get("model", "from " + path)), "source": f"--peaks {path}",
           "tflops": {dtype_name(k): _positive(path, f"tflops.{k}", v) for k, v in tflops.items()}}
    for k in ("hbm_GBps", "nvlink_GBps", "pcie_GBps"):
        out[k] = _positive(path, k, doc[k]) if doc.get(k) is not None else None
    return out


def _positive(path, key, value):
    try:
        v = float(value)
    except (TypeError, ValueError):
        v = -1.0
    if not v > 0:
        raise PeaksError(f"{path}: {key} must be a positive number, got {value!r}")
    return v


def dtype_name(dtype):
    d = str(dtype).strip().lower()
    return DTYPE_ALIASES.get(d, d)


def for_runs(runs, override=None):
    """The peaks that apply to these runs: the override, else the first GPU model found in a
    known GPU's row, else None (host runs, unknown GPUs). Also returns the GPU names seen."""
    names = sorted({g for run in runs for g in run.gpu_names()})
    if override is not None:
        return override, names
    for name in names:
        found = lookup(name)
        if found:
            return dict(found, gpu_name=name), names
    return None, names


def tflops(peaks, dtype):
    """Peak TFLOP/s for a dtype (bf16 and bfloat16 alike), or None."""
    if not peaks:
        return None
    return (peaks.get("tflops") or {}).get(dtype_name(dtype))
