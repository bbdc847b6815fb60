// placeholder until the CUDA kernels land; remove from CMakeLists then
