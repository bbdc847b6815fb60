// The Kokkos host AttentionBackend: memory in the default memory space, kernels from
// host_kernels.cpp (row "kokkos") or materialized_kernels.cpp (row "materialized"), and timing
// marks as host monotonic clock readings after a fence.
#include <chrono>
#include <new>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include <Kokkos_Core.hpp>

#include "host/host_backend.hpp"
#include "host/host_kernels.hpp"
#include "host/materialized_kernels.hpp"
#include "kernel_paths.hpp"
#include "kernel_policy.hpp"

namespace rb::attn {

namespace {

using Mem = Kokkos::DefaultExecutionSpace::memory_space;
using Bytes = Kokkos::View<char*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using HostBytes = Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

// One backend for every host row: memory and copies are the same, only the block kernels
// differ (row "materialized": materialized_kernels.cpp, row "kokkos": host_kernels.cpp). The
// picker gives each block its row: the fixed one, or auto's (tuned policy, built-in rule).
class KokkosHostBackend final : public AttentionBackend {
 public:
  KokkosHostBackend(KernelPicker picker, const KernelPath& named)
      : picker_(std::move(picker)), materialized_(std::string(named.name) == "materialized") {}
  ~KokkosHostBackend() override {
    for (auto& [p, bytes] : sizes_) Kokkos::kokkos_free<Mem>(p);
  }
  // Every row records its own name, as `kernel:` spells it (files written before 2026-11-28
  // the kokkos row as "kokkos-host").
  std::string name() const override { return materialized_ ? "materialized" : "kokkos"; }
  bool on_device() const override { return false; }

  void* allocate(std::size_t bytes) override {
    if (bytes == 0) bytes = 1;
    void* p = nullptr;
    try {
      p = Kokkos::kokkos_malloc<Mem>("rb::attn::buffer", bytes);
    } catch (const std::exception&) {
      p = nullptr;
    }
    if (p == nullptr) throw OutOfMemory(bytes, host::available_host_memory(), name() + " allocate");
    sizes_[p] = bytes;
    current_ += bytes;
    if (current_ > peak_) peak_ = current_;
    return p;
  }
  void release(void* p) override {
    if (p == nullptr) return;
    auto it = sizes_.find(p);
    if (it == sizes_.end())
      throw std::invalid_argument("host backend release: pointer not allocated here");
    current_ -= it->second;
    sizes_.erase(it);
    Kokkos::kokkos_free<Mem>(p);
  }
  void copy_to_device(void* dst, const void* host_src, std::size_t bytes) override {
    Kokkos::deep_copy(Bytes(static_cast<char*>(dst), bytes),
                      HostBytes(const_cast<char*>(static_cast<const char*>(host_src)), bytes));
  }
  void copy_to_host(void* host_dst, const void* src, std::size_t bytes) override {
    Kokkos::deep_copy(HostBytes(static_cast<char*>(host_dst), bytes),
                      Bytes(const_cast<char*>(static_cast<const char*>(src)), bytes));
  }
  void copy(void* dst, const void* src, std::size_t bytes) override {
    Kokkos::deep_copy(Bytes(static_cast<char*>(dst), bytes),
                      Bytes(const_cast<char*>(static_cast<const char*>(src)), bytes));
  }
  void fill_zero(void* p, std::size_t bytes) override {
    Kokkos::deep_copy(Bytes(static_cast<char*>(p), bytes), char(0));
  }
  void copy_head_chunks(const HeadChunks& c, const HeadTensor& t, bool to_chunks) override {
    attn::host::copy_head_chunks(c, t, to_chunks);
  }
  void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) override {
    attn::host::init_forward(out, lse, rows, head_dim);
  }
  void forward(const attn::ForwardBlock& block) override {
    on_its_row(block, attn::host::forward, attn::host::materialized_forward,
               attn::host::materialized_forward_scratch);
  }
  void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                        int head_dim, attn::DType dtype) override {
    attn::host::backward_prepare(dout, out, delta, rows, head_dim, dtype);
  }
  void backward(const attn::BackwardBlock& block) override {
    on_its_row(block, attn::host::backward, attn::host::materialized_backward,
               attn::host::materialized_backward_scratch);
  }
  void accumulate(float* dst, const float* src, std::size_t count) override {
    attn::host::accumulate(dst, src, static_cast<std::int64_t>(count));
  }

  int mark() override {
    Kokkos::fence();
    marks_.push_back(std::chrono::steady_clock::now());
    return static_cast<int>(marks_.size()) - 1;
  }
  double seconds_between(int from, int to) override {
    return std::chrono::duration<double>(marks_.at(static_cast<std::size_t>(to)) -
                                         marks_.at(static_cast<std::size_t>(from)))
        .count();
  }
  void reset_marks() override { marks_.clear(); }
  void synchronize() override { Kokkos::fence(); }
  std::size_t peak_bytes() const override { return peak_; }
  void reset_peak() override { peak_ = current_; }

 private:
  static bool is_materialized(const KernelPath& row) {
    return std::string(row.name) == "materialized";
  }
  // A block on the row the picker gives it: the fused kernel, or the materialized one with its
  // score tiles; then counted under that row.
  template <class Block>
  void on_its_row(const Block& block, void (*fused)(const Block&),
                  void (*materialized)(const Block&, float*),
                  std::size_t (*scratch_floats)(const Block&)) {
    const KernelPicker::Pick pick = picker_.pick(block.dtype, block.dims, block.pattern);
    if (is_materialized(*pick.row))
      materialized(block, scratch(scratch_floats(block)));
    else
      fused(block);
    count_block(pick.row->name, pick.from_policy);
  }

  // The materialized kernels' score tiles: grown through allocate() so they count in
  // peak_bytes() and running out is an OutOfMemory like any other buffer.
  float* scratch(std::size_t floats) {
    if (floats > scratch_floats_) {
      Kokkos::fence();  // a kernel still reading the old tile must finish before it is freed
      release(scratch_);
      scratch_ = nullptr;
      scratch_floats_ = 0;
      scratch_ = static_cast<float*>(allocate(floats * sizeof(float)));
      scratch_floats_ = floats;
    }
    return static_cast<float*>(scratch_);
  }

  KernelPicker picker_;
  bool materialized_;  // named after the materialized row (auto: after the headline row)
  void* scratch_ = nullptr;
  std::size_t scratch_floats_ = 0;
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t current_ = 0, peak_ = 0;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_host_backend() {
  return make_host_backend(KernelChoice{"kokkos", "default"});
}

std::unique_ptr<AttentionBackend> make_host_backend(const KernelChoice& choice) {
  const std::string want =
      choice.path == "auto" ? auto_headline_path(Device::Host)->name : choice.path;
  const KernelPath* row = find_kernel_path(want, Device::Host);
  if (!row)
    throw std::invalid_argument("make_host_backend: '" + choice.path +
                                "' is not a host kernel path");
  if (const TileVariant* t = find_tile(*row, choice.tile); !t || std::string(t->name) != "default")
    throw std::invalid_argument("make_host_backend: kernel '" + want + "' has no tile variant '" +
                                choice.tile + "'");
  const bool is_auto = choice.path == "auto";
  return std::make_unique<KokkosHostBackend>(
      KernelPicker(Device::Host, is_auto ? nullptr : row, is_auto ? choice.policy : nullptr), *row);
}

}  // namespace rb::attn
