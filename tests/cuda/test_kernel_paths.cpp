// Host checks (no GPU) of the kernel path table and its binding to the CUDA library: every
// built CUDA row has entry points, every flash tile names a shape the kernels instantiate,
// `auto` picks as measured (cudnn for calls with enough work, flash below and on what cuDNN
// cannot take, else naive),
// and refusals name what is wrong.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "attention_cuda.hpp"
#include "cuda_backend.hpp"
#include "kernel_paths.hpp"

using namespace rb::attn;

namespace {

bool built(const char* name) {
  const KernelPath* row = find_kernel_path(name, Device::Cuda);
  return row && row->built;
}

// A block of `rows` rows (queries and keys) of `heads` heads, batch 1; segment 0: exact.
std::string auto_name(DType t, int head_dim, std::int64_t rows, int heads = 8,
                      std::int64_t segment = 0, std::int64_t rate = 1) {
  Dims dims;
  dims.heads = heads;
  dims.head_dim = head_dim;
  dims.q_rows = dims.kv_rows = rows;
  Pattern pattern;
  pattern.segment = segment;
  pattern.rate = rate;
  const KernelPath* row =
      auto_kernel_path(Device::Cuda, t, head_dim, false, kernel_shape_of(dims, pattern));
  return row ? row->name : "";
}

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

}  // namespace

TEST_CASE("every built CUDA row has entry points; flash tiles map to kernel shapes") {
  for (const KernelPath& row : kernel_paths()) {
    CAPTURE(row.name);
    REQUIRE(!row.tiles.empty());
    CHECK(std::string(row.tiles.front().name) == "default");
    if (row.device == Device::Cuda && row.built) CHECK(gpu::has_entry_points(row));
  }
  const KernelPath& flash = *find_kernel_path("flash", Device::Cuda);
  using F = rb::attn::FlashTile;
  // Each non-default tile changes a shape (it would otherwise record a shape that never ran),
  // and no two name the same shape.
  CHECK((flash.tiles.front().flash.fwd == F::Fwd::Default &&
         flash.tiles.front().flash.bwd == F::Bwd::Default));
  for (std::size_t i = 1; i < flash.tiles.size(); ++i) {
    CAPTURE(flash.tiles[i].name);
    const F t = flash.tiles[i].flash;
    CHECK((t.fwd != F::Fwd::Default || t.bwd != F::Bwd::Default));
    for (std::size_t j = 1; j < i; ++j)
      CHECK_FALSE((flash.tiles[j].flash.fwd == t.fwd && flash.tiles[j].flash.bwd == t.bwd));
  }
  // Every other row's variants leave the flash shape alone.
  for (const KernelPath& row : kernel_paths())
    if (std::string(row.name) != "flash")
      for (const TileVariant& v : row.tiles)
        CHECK((v.flash.fwd == F::Fwd::Default && v.flash.bwd == F::Bwd::Default));
}

TEST_CASE("auto picks from the table's full-speed ranges") {
  const std::string fast16 = built("cudnn") ? "cudnn" : "flash";
  CHECK(auto_name(DType::BF16, 128, 4096) == fast16);
  CHECK(auto_name(DType::F16, 64, 4096) == fast16);
  CHECK(auto_name(DType::BF16, 128, 4096, 8, 4096, 1) == fast16);  // dilated, large calls
  CHECK(auto_name(DType::F32, 128, 4096) == "naive");
  CHECK(auto_name(DType::BF16, 96, 4096) == (built("cudnn") ? "cudnn" : "naive"));
  CHECK(auto_name(DType::BF16, 96, 4096, 8, 4096, 2) == (built("cudnn") ? "cudnn" : "naive"));
  // Small calls, but flash has no d96 path: cuDNN's slow call beats materialised scores.
  CHECK(auto_name(DType::BF16, 96, 512) == (built("cudnn") ? "cudnn" : "naive"));
  CHECK(auto_name(DType::BF16, 256, 4096) == "naive");
  CHECK(std::string(auto_headline_path(Device::Cuda)->name) == fast16);
  CHECK(gpu::flash_tensor_core_supported(DType::BF16, 64));
  CHECK(!gpu::flash_tensor_core_supported(DType::F32, 64));
  CHECK(!gpu::flash_tensor_core_supported(DType::F16, 96));
}

// The measured crossover (docs/gpu-kernels.md "The built-in rule"): cuDNN's calls carry a fixed
// cost, so it wins when one call carries enough work: 2^30 query-key pairs x head dim for exact
// blocks, 2^24 query-key pairs for dilated sub-blocks.
TEST_CASE("auto's built-in rule follows the work per call, not the segment and rate names") {
  const std::string big = built("cudnn") ? "cudnn" : "flash";
  // Exact, 8 heads, d128: 512 rows (2^28 pair-dims) flash, 1024 (2^30) cuDNN.
  CHECK(auto_name(DType::BF16, 128, 512) == "flash");
  CHECK(auto_name(DType::BF16, 128, 1024) == big);
  // d64 halves the work: 1024 rows flash, 2048 cuDNN.
  CHECK(auto_name(DType::BF16, 64, 1024) == "flash");
  CHECK(auto_name(DType::BF16, 64, 2048) == big);
  // More heads per call make a small block worth a cuDNN call: 512 rows x 32 heads, d128.
  CHECK(auto_name(DType::BF16, 128, 512, 32) == big);
  // LongNet sub-blocks of 2048 rows, 8 / rate heads per call, whatever the head dim.
  for (int d : {64, 128}) {
    CAPTURE(d);
    CHECK(auto_name(DType::BF16, d, 8192, 8, 2048, 1) == big);      // 8 x 2048^2 = 2^25 pairs
    CHECK(auto_name(DType::BF16, d, 8192, 8, 4096, 2) == big);      // 4 x 2048^2 = 2^24
    CHECK(auto_name(DType::BF16, d, 8192, 8, 8192, 4) == "flash");  // 2 x 2048^2 = 2^23
  }
  // The shapes of issue #28 (16 heads): w 8192 r 2 cuDNN; w 8192 r 8 and w 2048 r 4 flash.
  CHECK(auto_name(DType::BF16, 128, 32768, 16, 8192, 2) == big);
  CHECK(auto_name(DType::BF16, 128, 32768, 16, 8192, 8) == "flash");
  CHECK(auto_name(DType::BF16, 128, 32768, 16, 2048, 4) == "flash");
}

TEST_CASE("kernel_refusal names the path, the tile and what does not fit") {
  const auto refuse = [](const KernelChoice& c, DType t, int d, bool dilated = false) {
    return kernel_refusal(c, Device::Cuda, t, d, false, dilated);
  };
  CHECK(refuse({"auto", "default"}, DType::BF16, 128).empty());
  CHECK(refuse({"flash", ""}, DType::F32, 96).empty());
  CHECK(refuse({"flash", "fwd-4w2m-k32"}, DType::BF16, 128).empty());
  CHECK(contains(refuse({"flash", "fwd-4w2m-k32"}, DType::BF16, 64), "head_dim 128 only"));
  CHECK(contains(refuse({"flash", "fwd-4w2m-k32"}, DType::F16, 128), "does not take fp16"));
  CHECK(contains(refuse({"flash", "wide"}, DType::BF16, 128), "no tile variant 'wide'"));
  CHECK(contains(refuse({"auto", "bwd-4w-k64"}, DType::BF16, 128), "no tile variants"));
  CHECK(contains(refuse({"flash", ""}, DType::BF16, 512), "maximum 256"));
  CHECK(contains(refuse({"kokkos", ""}, DType::BF16, 64), "not a cuda kernel path"));
  CHECK(contains(refuse({"fast", ""}, DType::BF16, 64), "auto, cudnn, flash, naive"));
  if (!built("cudnn")) CHECK(contains(refuse({"cudnn", ""}, DType::BF16, 64), "not in this build"));
  CHECK(kernel_refusal({"kokkos", ""}, Device::Host, DType::F32, 64, true, true).empty());
}

TEST_CASE("library versions are reported without a GPU") {
  const auto versions = gpu::library_versions();
  REQUIRE(versions.size() == 4);
  CHECK(versions[0].first == "CUDA runtime");
  CHECK(contains(versions[0].second, "."));
  CHECK(versions[1].first == "CUDA driver");
  CHECK(!versions[1].second.empty());
  CHECK(versions[2].first == "cuBLAS");
  CHECK(contains(versions[2].second, "."));
  CHECK(versions[3].first == "cuDNN");
  if (built("cudnn"))
    CHECK(contains(versions[3].second, "."));
  else
    CHECK(versions[3].second == "not built");
  for (const auto& [lib, version] : versions) MESSAGE(lib << ": " << version);
}
