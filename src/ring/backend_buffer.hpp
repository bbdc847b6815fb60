#pragma once
// A buffer of the attention backend's memory (device memory on the GPU path), released when it
// goes out of scope; what every context-parallel scheme holds its tensors in.
#include <cstddef>
#include <utility>

#include "backend.hpp"

namespace rb::ring {

class BackendBuffer {
 public:
  BackendBuffer() = default;
  // Throws attn::OutOfMemory when the backend cannot allocate it.
  BackendBuffer(attn::AttentionBackend& b, std::size_t bytes) : owner(&b), ptr(b.allocate(bytes)) {}
  ~BackendBuffer() {
    if (ptr) owner->release(ptr);
  }
  BackendBuffer(BackendBuffer&& o) noexcept : owner(o.owner), ptr(std::exchange(o.ptr, nullptr)) {}
  BackendBuffer& operator=(BackendBuffer&& o) noexcept {
    if (this != &o) {
      if (ptr) owner->release(ptr);
      owner = o.owner;
      ptr = std::exchange(o.ptr, nullptr);
    }
    return *this;
  }
  BackendBuffer(const BackendBuffer&) = delete;
  BackendBuffer& operator=(const BackendBuffer&) = delete;

  char* bytes() const { return static_cast<char*>(ptr); }
  float* floats() const { return static_cast<float*>(ptr); }

  attn::AttentionBackend* owner = nullptr;
  void* ptr = nullptr;
};

}  // namespace rb::ring
