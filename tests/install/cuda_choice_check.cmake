# cmake -DSOURCE_DIR=... -DWORK_DIR=... -P cuda_choice_check.cmake
# cmake/ringbench_cuda.cmake with stand-in nvcc files: a user's compiler or nvcc on PATH (a loaded
# module's) wins over /usr/local/cuda/bin/nvcc, which stays the fallback; a user's
# CMAKE_CUDA_ARCHITECTURES or $CUDAARCHS wins over RINGBENCH_CUDA_ARCHITECTURES.
cmake_minimum_required(VERSION 3.24)
include(${SOURCE_DIR}/cmake/ringbench_cuda.cmake)
set(failures 0)
macro(expect what got want)
  if(NOT "${got}" STREQUAL "${want}")
    message(SEND_ERROR "${what}: got '${got}', expected '${want}'")
    math(EXPR failures "${failures} + 1")
  endif()
endmacro()

file(REMOVE_RECURSE ${WORK_DIR})
foreach(dir module/bin fallback/bin empty)
  file(MAKE_DIRECTORY ${WORK_DIR}/${dir})
endforeach()
foreach(nvcc module/bin/nvcc fallback/bin/nvcc)
  file(WRITE ${WORK_DIR}/${nvcc} "#!/bin/sh\n")
  file(CHMOD ${WORK_DIR}/${nvcc} PERMISSIONS OWNER_READ OWNER_WRITE OWNER_EXECUTE)
endforeach()
set(RINGBENCH_CUDA_FALLBACK_NVCC ${WORK_DIR}/fallback/bin/nvcc)
unset(ENV{CUDACXX})
unset(ENV{CUDAARCHS})

# nvcc on PATH: CMake's own search finds it, so no fallback.
set(ENV{PATH} "${WORK_DIR}/empty:${WORK_DIR}/module/bin")
ringbench_cuda_compiler_fallback(got)
expect("nvcc on PATH" "${got}" "")
# None on PATH: the fallback.
set(ENV{PATH} "${WORK_DIR}/empty")
ringbench_cuda_compiler_fallback(got)
expect("no nvcc on PATH" "${got}" "${WORK_DIR}/fallback/bin/nvcc")
# The user's choice, by variable or environment: no fallback.
set(CMAKE_CUDA_COMPILER ${WORK_DIR}/module/bin/nvcc)
ringbench_cuda_compiler_fallback(got)
expect("-DCMAKE_CUDA_COMPILER" "${got}" "")
unset(CMAKE_CUDA_COMPILER)
set(ENV{CUDACXX} ${WORK_DIR}/module/bin/nvcc)
ringbench_cuda_compiler_fallback(got)
expect("CUDACXX" "${got}" "")
unset(ENV{CUDACXX})
# No fallback file (a machine without /usr/local/cuda): nothing, CMake then reports none.
set(RINGBENCH_CUDA_FALLBACK_NVCC ${WORK_DIR}/none/nvcc)
ringbench_cuda_compiler_fallback(got)
expect("no fallback" "${got}" "")

# Architectures.
set(RINGBENCH_CUDA_ARCHITECTURES "90a;80")
ringbench_cuda_architectures()
expect("default architectures" "${CMAKE_CUDA_ARCHITECTURES}" "90a;80")
set(CMAKE_CUDA_ARCHITECTURES 90)
ringbench_cuda_architectures()
expect("-DCMAKE_CUDA_ARCHITECTURES" "${CMAKE_CUDA_ARCHITECTURES}" "90")
expect("-DCMAKE_CUDA_ARCHITECTURES source" "${RINGBENCH_CUDA_ARCHITECTURES_FROM}" "CMAKE_CUDA_ARCHITECTURES")
unset(CMAKE_CUDA_ARCHITECTURES)
set(ENV{CUDAARCHS} 80)
ringbench_cuda_architectures()
expect("CUDAARCHS leaves the variable to enable_language" "${CMAKE_CUDA_ARCHITECTURES}" "")
expect("CUDAARCHS source" "${RINGBENCH_CUDA_ARCHITECTURES_FROM}" "CUDAARCHS")

if(failures GREATER 0)
  message(FATAL_ERROR "cuda choice: ${failures} check(s) failed")
endif()
message(STATUS "cuda choice: ok")
