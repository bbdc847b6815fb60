// The Kokkos host AttentionBackend: memory in the default memory space, kernels from
// host_kernels.cpp, and timing marks as host monotonic clock readings after a fence.
#include <chrono>
#include <fstream>
#include <new>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

#include <Kokkos_Core.hpp>

#include "host/host_backend.hpp"
#include "host/host_kernels.hpp"

namespace rb::attn {

namespace {

using Mem = Kokkos::DefaultExecutionSpace::memory_space;
using Bytes = Kokkos::View<char*, Mem, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;
using HostBytes = Kokkos::View<char*, Kokkos::HostSpace, Kokkos::MemoryTraits<Kokkos::Unmanaged>>;

std::size_t available_host_memory() {
  std::ifstream in("/proc/meminfo");
  std::string key;
  std::size_t kb = 0;
  std::string unit;
  while (in >> key >> kb >> unit)
    if (key == "MemAvailable:") return kb * 1024;
  return 0;
}

class KokkosHostBackend final : public AttentionBackend {
 public:
  ~KokkosHostBackend() override {
    for (auto& [p, bytes] : sizes_) Kokkos::kokkos_free<Mem>(p);
  }
  std::string name() const override { return "kokkos-host"; }
  bool on_device() const override { return false; }

  void* allocate(std::size_t bytes) override {
    if (bytes == 0) bytes = 1;
    void* p = nullptr;
    try {
      p = Kokkos::kokkos_malloc<Mem>("rb::attn::buffer", bytes);
    } catch (const std::exception&) {
      p = nullptr;
    }
    if (p == nullptr) throw OutOfMemory(bytes, available_host_memory(), "kokkos-host allocate");
    sizes_[p] = bytes;
    current_ += bytes;
    if (current_ > peak_) peak_ = current_;
    return p;
  }
  void release(void* p) override {
    if (p == nullptr) return;
    auto it = sizes_.find(p);
    if (it == sizes_.end()) throw std::invalid_argument("kokkos-host release: pointer not allocated here");
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
  void init_forward(float* out, float* lse, std::int64_t rows, int head_dim) override {
    attn::host::init_forward(out, lse, rows, head_dim);
  }
  void forward(const attn::ForwardBlock& block) override { attn::host::forward(block); }
  void backward_prepare(const void* dout, const float* out, float* delta, std::int64_t rows,
                        int head_dim, attn::DType dtype) override {
    attn::host::backward_prepare(dout, out, delta, rows, head_dim, dtype);
  }
  void backward(const attn::BackwardBlock& block) override { attn::host::backward(block); }
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
  std::unordered_map<void*, std::size_t> sizes_;
  std::size_t current_ = 0, peak_ = 0;
  std::vector<std::chrono::steady_clock::time_point> marks_;
};

}  // namespace

std::unique_ptr<AttentionBackend> make_host_backend() {
  return std::make_unique<KokkosHostBackend>();
}

}  // namespace rb::attn
