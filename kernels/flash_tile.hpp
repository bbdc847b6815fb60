#pragma once
// A tile shape of the flash kernels (kernels/cuda/flash_fwd.cu, flash_bwd.cu instantiate each):
// plain enums, so the kernel path table (kernel_paths.cpp, which host-only targets link) holds
// each tile variant's shape in its row and the CUDA backend reads it from there.

namespace rb::attn {

struct FlashTile {
  // Forward: warps x m-tiles (16 query rows each) per warp, keys per tile, Q in registers.
  enum class Fwd { Default, W4M1K64QReg, W4M2K32, W8M1K64QReg, W8M2K32 } fwd = Fwd::Default;
  // Backward: warps, keys per CTA.
  enum class Bwd { Default, W4K64 } bwd = Bwd::Default;
};

}  // namespace rb::attn
