// Host checks (no GPU) of the kernel path table and its binding to the CUDA library: every
// built CUDA row has entry points, every flash tile names a shape the kernels instantiate,
// `auto` picks as measured (cudnn, dilated on flash, flash on tensor-core shapes, else naive),
// and refusals name what is wrong.
#include <doctest/doctest.h>

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

std::string auto_name(DType t, int head_dim, bool dilated) {
  const KernelPath* row = auto_kernel_path(Device::Cuda, t, head_dim, false, dilated);
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
  for (const TileVariant& t : flash.tiles) {
    CAPTURE(t.name);
    CHECK_NOTHROW(gpu::flash_tile(t.name));
  }
  // Each non-default tile changes a shape (it would otherwise record a shape that never ran).
  for (std::size_t i = 1; i < flash.tiles.size(); ++i) {
    const gpu::FlashTile t = gpu::flash_tile(flash.tiles[i].name);
    CHECK((t.fwd != gpu::FlashTile::Fwd::Default || t.bwd != gpu::FlashTile::Bwd::Default));
  }
  CHECK_THROWS_AS(gpu::flash_tile("fwd-16w"), std::invalid_argument);
}

TEST_CASE("auto picks from the table's full-speed ranges") {
  const std::string fast16 = built("cudnn") ? "cudnn" : "flash";
  CHECK(auto_name(DType::BF16, 128, false) == fast16);
  CHECK(auto_name(DType::F16, 64, false) == fast16);
  CHECK(auto_name(DType::BF16, 128, true) == "flash");  // dilated branches stay on flash
  CHECK(auto_name(DType::F32, 128, false) == "naive");
  CHECK(auto_name(DType::BF16, 96, false) == (built("cudnn") ? "cudnn" : "naive"));
  CHECK(auto_name(DType::BF16, 96, true) == "naive");
  CHECK(auto_name(DType::BF16, 256, false) == "naive");
  CHECK(std::string(auto_headline_path(Device::Cuda)->name) == fast16);
  CHECK(gpu::flash_tensor_core_supported(DType::BF16, 64));
  CHECK(!gpu::flash_tensor_core_supported(DType::F32, 64));
  CHECK(!gpu::flash_tensor_core_supported(DType::F16, 96));
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
  if (built("cudnn")) CHECK(contains(versions[3].second, "."));
  else CHECK(versions[3].second == "not built");
  for (const auto& [lib, version] : versions) MESSAGE(lib << ": " << version);
}
