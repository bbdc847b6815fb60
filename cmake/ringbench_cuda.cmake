# Which nvcc and which CUDA architectures a build uses (CMakeLists.txt). Script-mode safe, so
# tests/install/cuda_choice_check.cmake runs these with a stand-in nvcc on PATH.

# The compiler, the first that applies: -DCMAKE_CUDA_COMPILER or $CUDACXX (CMake's own rules),
# nvcc on PATH (a loaded module's toolkit: it must win, or a cluster build would mix that
# module's CUDA libraries with another toolkit's compiler), /usr/local/cuda/bin/nvcc (where the
# toolkit installs by default, often not on PATH, and where CMake itself never looks).
# Sets OUT to /usr/local/cuda/bin/nvcc when only the fallback applies, else to "".
function(ringbench_cuda_compiler_fallback out)
  set(${out} "" PARENT_SCOPE)
  if(CMAKE_CUDA_COMPILER OR NOT "$ENV{CUDACXX}" STREQUAL "")
    return()
  endif()
  # PATH alone, as CMake's own compiler search: the default search would also find the system
  # prefixes' nvcc (/usr/local/bin), which CMake's check would not use.
  find_program(rb_nvcc_on_path nvcc NO_CACHE NO_DEFAULT_PATH PATHS ENV PATH)
  if(NOT rb_nvcc_on_path AND EXISTS "${RINGBENCH_CUDA_FALLBACK_NVCC}")
    set(${out} "${RINGBENCH_CUDA_FALLBACK_NVCC}" PARENT_SCOPE)
  endif()
endfunction()
if(NOT DEFINED RINGBENCH_CUDA_FALLBACK_NVCC)
  set(RINGBENCH_CUDA_FALLBACK_NVCC /usr/local/cuda/bin/nvcc)
endif()

# The architectures: -DCMAKE_CUDA_ARCHITECTURES or $CUDAARCHS (CMake's own; e.g. 90, native)
# win over the project's default RINGBENCH_CUDA_ARCHITECTURES. Call before enable_language(CUDA):
# a normal variable there is used without being cached, so a later -DRINGBENCH_CUDA_ARCHITECTURES
# still applies on reconfigure. Every CUDA target takes CMAKE_CUDA_ARCHITECTURES.
macro(ringbench_cuda_architectures)
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(RINGBENCH_CUDA_ARCHITECTURES_FROM "CMAKE_CUDA_ARCHITECTURES")
  elseif(NOT "$ENV{CUDAARCHS}" STREQUAL "")
    set(RINGBENCH_CUDA_ARCHITECTURES_FROM "CUDAARCHS")  # enable_language(CUDA) caches it
  else()
    set(CMAKE_CUDA_ARCHITECTURES ${RINGBENCH_CUDA_ARCHITECTURES})
    set(RINGBENCH_CUDA_ARCHITECTURES_FROM "RINGBENCH_CUDA_ARCHITECTURES")
  endif()
endmacro()
