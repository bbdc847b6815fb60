#include "kernel_paths.hpp"

#include <algorithm>

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

const char* dtype_name(DType t) {
  switch (t) {
    case DType::F32: return "float32";
    case DType::F16: return "float16";
    case DType::BF16: return "bfloat16";
  }
  return "?";
}

bool takes_dtype(const KernelSupport& s, DType t) {
  return (t == DType::F32 && s.fp32) || (t == DType::F16 && s.fp16) || (t == DType::BF16 && s.bf16);
}

}  // namespace

const char* to_string(Device d) { return d == Device::Host ? "host" : "cuda"; }

const std::vector<KernelPath>& kernel_paths() {
  // Order matters only for listings. What `auto` picks is decided by the backend (cuda:
  // cudnn where it takes the block, dilated branches on flash, else flash, else naive).
  static const std::vector<KernelPath> table = {
      {"kokkos", Device::Host, true, {true, true, true, 256, 1, true, true},
       "Kokkos tiled kernel on the host (default execution space), fp32 compute", {"default"}},
      {"flash", Device::Cuda, kCudaBuilt, {true, true, true, 0, 1, true, true},
       "ringbench's FlashAttention-2 style tensor-core kernels (fp16/bf16, head dim 64/128; "
       "other blocks on its simple kernel)",
       {"default"}},
      {"cudnn", Device::Cuda, kCudnnBuilt, {true, true, true, 0, 1, true, true},
       "cuDNN fused flash attention (backend API); blocks cuDNN cannot take run on flash",
       {"default"}},
      {"naive", Device::Cuda, kCudaBuilt, {true, true, true, 0, 1, true, true},
       "materialised scores with cuBLAS GEMMs: the GPU reference path", {"default"}},
  };
  return table;
}

const KernelPath* find_kernel_path(const std::string& name, Device device) {
  for (const auto& k : kernel_paths())
    if (name == k.name && k.device == device) return &k;
  return nullptr;
}

std::vector<std::string> kernel_choices(Device device) {
  std::vector<std::string> out{"auto"};
  for (const auto& k : kernel_paths())
    if (k.device == device) out.push_back(k.name);
  return out;
}

std::string kernel_refusal(const KernelChoice& choice, Device device, DType dtype, int head_dim,
                           bool causal, bool dilated) {
  if (choice.path == "auto") return "";
  const KernelPath* k = find_kernel_path(choice.path, device);
  if (!k) {
    std::string known;
    for (const auto& c : kernel_choices(device)) known += (known.empty() ? "" : ", ") + c;
    return "kernel '" + choice.path + "' is not a " + to_string(device) + " kernel path (" +
           to_string(device) + " paths: " + known + ")";
  }
  if (!k->built)
    return std::string("kernel '") + k->name + "' is not in this build (" +
           (std::string(k->name) == "cudnn" ? "CMake found no cuDNN; set CUDNN_ROOT and rebuild"
                                            : "rebuild with -DRINGBENCH_ENABLE_CUDA=ON") + ")";
  if (!choice.tile.empty() && choice.tile != "default" &&
      std::none_of(k->tiles.begin(), k->tiles.end(), [&](const char* t) { return choice.tile == t; })) {
    std::string known;
    for (const char* t : k->tiles) known += (known.empty() ? "" : ", ") + std::string(t);
    return "kernel '" + std::string(k->name) + "' has no tile variant '" + choice.tile + "' (" + known + ")";
  }
  const KernelSupport& s = k->supports;
  if (!takes_dtype(s, dtype))
    return "kernel '" + std::string(k->name) + "' does not take " + dtype_name(dtype);
  if (s.max_head_dim > 0 && head_dim > s.max_head_dim)
    return "head_dim " + std::to_string(head_dim) + " exceeds kernel '" + k->name + "''s maximum " +
           std::to_string(s.max_head_dim);
  if (head_dim % s.head_dim_multiple != 0)
    return "kernel '" + std::string(k->name) + "' needs head_dim a multiple of " +
           std::to_string(s.head_dim_multiple);
  if (causal && !s.causal) return "kernel '" + std::string(k->name) + "' has no causal mask";
  if (dilated && !s.dilated) return "kernel '" + std::string(k->name) + "' has no dilated attention";
  return "";
}

}  // namespace rb::attn
