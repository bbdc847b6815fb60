# `cmake --install` into a temporary prefix, then the installed program and analysis run.
add_test(NAME install_prefix
         COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/check_install.sh ${PROJECT_BINARY_DIR}
                 ${RINGBENCH_TEST_OUTPUT}/install_prefix)
set_tests_properties(install_prefix PROPERTIES TIMEOUT 120 LABELS "unit;install")
# cmake/ringbench_cuda.cmake in script mode with stand-in nvcc files: the user's compiler or
# nvcc on PATH (a loaded module's) before /usr/local/cuda/bin/nvcc; -DCMAKE_CUDA_ARCHITECTURES
# and $CUDAARCHS before RINGBENCH_CUDA_ARCHITECTURES. No GPU or CUDA needed.
add_test(NAME cmake_cuda_choice
         COMMAND ${CMAKE_COMMAND} -DSOURCE_DIR=${PROJECT_SOURCE_DIR}
                 -DWORK_DIR=${RINGBENCH_TEST_OUTPUT}/cmake_cuda_choice
                 -P ${CMAKE_CURRENT_SOURCE_DIR}/install/cuda_choice_check.cmake)
set_tests_properties(cmake_cuda_choice PROPERTIES TIMEOUT 60 LABELS "unit;install")
