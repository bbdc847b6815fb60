#include "kernel_paths.hpp"

#include <algorithm>

#include "names.hpp"

namespace rb::attn {
namespace {

#ifdef RINGBENCH_HAVE_CUDA
constexpr bool kCudaBuilt = true;
#else
constexpr bool kCudaBuilt = false;
#endif
#ifdef RINGBENCH_HAVE_CUDNN
constexpr bool kCudnnBuilt = true;
#else
constexpr bool kCudnnBuilt = false;
#endif

constexpr const char* kNeedCuda = "rebuild with -DRINGBENCH_ENABLE_CUDA=ON";
constexpr const char* kNeedCudnn = "CMake found no cuDNN; set CUDNN_ROOT and rebuild";
// Head dims the fused CUDA-core kernels (simple.cu, kMaxHeadDim) and the host kernels take.
constexpr int kFusedMaxHeadDim = 256;

KernelSupport any_block() {
  return {};
}
// A full-speed range for a path that is nowhere the fast choice: `auto` runs it only on blocks
// no other row takes (the last candidate).
KernelSupport no_block() {
  KernelSupport s;
  s.fp32 = s.fp16 = s.bf16 = false;
  return s;
}

KernelSupport up_to(int max_head_dim) {
  KernelSupport s;
  s.max_head_dim = max_head_dim;
  return s;
}

// fp16/bf16 blocks of these head dims (empty: any).
KernelSupport sixteen_bit(std::vector<int> head_dims) {
  KernelSupport s;
  s.fp32 = false;
  s.head_dims = std::move(head_dims);
  return s;
}

KernelSupport bf16_head_dims(std::vector<int> head_dims) {
  KernelSupport s = sixteen_bit(std::move(head_dims));
  s.fp16 = false;
  return s;
}

// cuDNN's fused attention: 16-bit data, head dim a multiple of 8 up to 128, exact and dilated
// (a dilated branch is one strided call per head offset and segment). Each call has a fixed
// cost, so small calls run faster on the flash kernels. Measured on H100 and H200 (bf16, batch
// 1, 8 heads, fwd+bwd; docs/gpu-kernels.md "The built-in rule"): exact blocks cross over at
// 2^30 query-key pairs x head dim per call (d128 1024 rows: cuDNN 0.97-1.14x, d64 1024 rows:
// flash 1.14-1.18x faster); dilated sub-blocks at 2^24 pairs per call whatever the head dim
// (2048-row sub-blocks, 4 per call: cuDNN 0.96-2.0x; 2 per call: flash 1.2-1.7x faster).
KernelSupport cudnn_native() {
  KernelSupport s = sixteen_bit({});
  s.max_head_dim = 128;
  s.head_dim_multiple = 8;
  s.min_exact_pair_dims = double(std::int64_t(1) << 30);
  s.min_dilated_pairs = double(1 << 24);
  return s;
}

TileVariant default_tile() {
  return {"default", "the measured-best shape", any_block()};
}

// Every host path is built, takes every block the fused host kernels take at full speed, and
// has one tile shape.
KernelPath host_path(const char* name, const char* summary) {
  return {
      name,    Device::Host,    true, "", up_to(kFusedMaxHeadDim), up_to(kFusedMaxHeadDim), true,
      summary, {default_tile()}};
}

// Shapes named warps x m-tiles (16 query rows each) per warp, keys per tile, and where Q
// lives, each with the kernel shape (flash_tile.hpp) flash_fwd.cu / flash_bwd.cu instantiate.
std::vector<TileVariant> flash_tiles() {
  using F = FlashTile::Fwd;
  return {
      default_tile(),
      {"fwd-4w1m-k64-qreg",
       "forward: 4 warps x 1 m-tile, 64 keys, Q in registers",
       bf16_head_dims({64, 128}),
       {F::W4M1K64QReg}},
      {"fwd-4w2m-k32",
       "forward: 4 warps x 2 m-tiles, 32 keys, Q in shared memory",
       bf16_head_dims({128}),
       {F::W4M2K32}},
      {"fwd-8w1m-k64-qreg",
       "forward: 8 warps x 1 m-tile, 64 keys, Q in registers",
       bf16_head_dims({128}),
       {F::W8M1K64QReg}},
      {"fwd-8w2m-k32",
       "forward: 8 warps x 2 m-tiles, 32 keys, Q in shared memory",
       bf16_head_dims({128}),
       {F::W8M2K32}},
      {"bwd-4w-k64",
       "backward: 4 warps, 64 keys per CTA (twice the dQ atomics of the default)",
       bf16_head_dims({128}),
       {F::Default, FlashTile::Bwd::W4K64}},
  };
}

bool takes_dtype(const KernelSupport& s, DType t) {
  return (t == DType::F32 && s.fp32) || (t == DType::F16 && s.fp16) || (t == DType::BF16 && s.bf16);
}

bool takes_head_dim(const KernelSupport& s, int d) {
  return d >= 1 && (s.max_head_dim <= 0 || d <= s.max_head_dim) && d % s.head_dim_multiple == 0 &&
         (s.head_dims.empty() ||
          std::find(s.head_dims.begin(), s.head_dims.end(), d) != s.head_dims.end());
}

std::string head_dim_refusal(const KernelSupport& s, const std::string& what, int head_dim) {
  if (s.max_head_dim > 0 && head_dim > s.max_head_dim)
    return "head_dim " + std::to_string(head_dim) + " exceeds " + what + "'s maximum " +
           std::to_string(s.max_head_dim);
  if (!s.head_dims.empty()) {
    std::vector<std::string> dims;
    for (int d : s.head_dims) dims.push_back(std::to_string(d));
    return what + " takes head_dim " + joined(dims) + " only";
  }
  return what + " needs head_dim a positive multiple of " + std::to_string(s.head_dim_multiple);
}

std::string support_refusal(const KernelSupport& s, const std::string& what, DType dtype,
                            int head_dim, bool causal, bool dilated) {
  if (!takes_dtype(s, dtype)) return what + " does not take " + name_of(kDTypeNames, dtype);
  if (!takes_head_dim(s, head_dim)) return head_dim_refusal(s, what, head_dim);
  if (causal && !s.causal) return what + " has no causal mask";
  if (dilated && !s.dilated) return what + " has no dilated attention";
  return "";
}

std::string tile_refusal(const KernelPath& k, const KernelChoice& choice, DType dtype, int head_dim,
                         bool causal, bool dilated) {
  const TileVariant* t = find_tile(k, choice.tile);
  if (!t) {
    std::vector<std::string> known;
    for (const auto& v : k.tiles) known.push_back(v.name);
    return "kernel '" + std::string(k.name) + "' has no tile variant '" + choice.tile + "' (" +
           joined(known) + ")";
  }
  // A variant that would not change the block is refused: the point would record a shape
  // that did not run.
  return support_refusal(t->applies,
                         "tile variant '" + std::string(t->name) + "' of kernel '" + k.name + "'",
                         dtype, head_dim, causal, dilated);
}

}  // namespace

const char* to_string(Device d) {
  return d == Device::Host ? "host" : "cuda";
}

bool KernelSupport::worth_a_call(const KernelShape& shape, int head_dim) const {
  return shape.dilated ? shape.pairs_per_call() >= min_dilated_pairs
                       : shape.pairs_per_call() * head_dim >= min_exact_pair_dims;
}

bool KernelSupport::takes(DType dtype, int head_dim, bool is_causal, bool is_dilated) const {
  // Called per block by `auto`: no strings.
  return takes_dtype(*this, dtype) && takes_head_dim(*this, head_dim) && (!is_causal || causal) &&
         (!is_dilated || dilated);
}

const std::vector<KernelPath>& kernel_paths() {
  static const std::vector<KernelPath> table = {
      host_path("kokkos",
                "Kokkos tiled kernel on the host (default execution space), fp32 compute"),
      host_path("materialized",
                "materialised scores on the host: S = QK^T for 64 query rows at a time, softmax, "
                "P V (Kokkos, fp32 compute)"),
      {"cudnn",
       Device::Cuda,
       kCudnnBuilt,
       kNeedCudnn,
       up_to(kFusedMaxHeadDim),
       cudnn_native(),
       true,
       "cuDNN fused flash attention (backend API); blocks cuDNN cannot take run on flash",
       {default_tile()}},
      {"flash", Device::Cuda, kCudaBuilt, kNeedCuda, up_to(kFusedMaxHeadDim),
       sixteen_bit({64, 128}), true,
       "ringbench's FlashAttention-2 style tensor-core kernels (fp16/bf16, head dim 64/128; "
       "other blocks on its fused CUDA-core kernel)",
       flash_tiles()},
      {"naive",
       Device::Cuda,
       kCudaBuilt,
       kNeedCuda,
       any_block(),
       no_block(),
       true,
       "materialised scores with cuBLAS GEMMs: the GPU reference path",
       {default_tile()}},
  };
  return table;
}

const KernelPath* find_kernel_path(const std::string& name, Device device) {
  for (const auto& k : kernel_paths())
    if (name == k.name && k.device == device) return &k;
  return nullptr;
}

const TileVariant* find_tile(const KernelPath& path, const std::string& tile) {
  const std::string want = tile.empty() ? "default" : tile;
  for (const auto& t : path.tiles)
    if (want == t.name) return &t;
  return nullptr;
}

std::vector<std::string> kernel_choices(Device device) {
  std::vector<std::string> out{"auto"};
  for (const auto& k : kernel_paths())
    if (k.device == device) out.push_back(k.name);
  return out;
}

const KernelPath* auto_kernel_path(Device device, DType dtype, int head_dim, bool causal,
                                   const KernelShape& shape) {
  const KernelPath* below_floor = nullptr;  // takes the block natively, at a cost per call
  const KernelPath* last = nullptr;
  for (const auto& k : kernel_paths()) {
    if (k.device != device || !k.built || !k.auto_candidate) continue;
    if (k.full_speed.takes(dtype, head_dim, causal, shape.dilated)) {
      if (k.full_speed.worth_a_call(shape, head_dim)) return &k;
      if (below_floor == nullptr) below_floor = &k;
    }
    last = &k;
  }
  return below_floor != nullptr ? below_floor : last;
}

const KernelPath* auto_headline_path(Device device) {
  for (const auto& k : kernel_paths())
    if (k.device == device && k.built && k.auto_candidate) return &k;
  return nullptr;
}

std::string kernel_refusal(const KernelChoice& choice, Device device, DType dtype, int head_dim,
                           bool causal, bool dilated) {
  if (choice.path == "auto") {
    if (!choice.tile.empty() && choice.tile != "default")
      return "kernel 'auto' has no tile variants ('" + choice.tile + "' needs a named path)";
    // auto runs a block on the row auto_kernel_path picks, which depends on the block's size:
    // the rows it picks for the smallest and the largest blocks must both take it.
    KernelShape small, large;
    small.dilated = large.dilated = dilated;
    large.sub_rows = large.sub_keys = large.heads_per_call = std::int64_t(1) << 30;
    for (const KernelShape* shape : {&large, &small}) {
      const KernelPath* k = auto_kernel_path(device, dtype, head_dim, causal, *shape);
      if (!k) return std::string("this build has no ") + to_string(device) + " kernel path";
      const std::string why =
          support_refusal(k->supports, "kernel 'auto' (" + std::string(k->name) + ")", dtype,
                          head_dim, causal, dilated);
      if (!why.empty()) return why;
    }
    return "";
  }
  const KernelPath* k = find_kernel_path(choice.path, device);
  if (!k)
    return "kernel '" + choice.path + "' is not a " + to_string(device) + " kernel path (" +
           to_string(device) + " paths: " + joined(kernel_choices(device)) + ")";
  if (!k->built)
    return "kernel '" + std::string(k->name) + "' is not in this build (" + k->missing + ")";
  const std::string why = tile_refusal(*k, choice, dtype, head_dim, causal, dilated);
  if (!why.empty()) return why;
  return support_refusal(k->supports, "kernel '" + std::string(k->name) + "'", dtype, head_dim,
                         causal, dilated);
}

}  // namespace rb::attn
