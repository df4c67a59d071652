# Core engine tests: config, tensor list, memory estimates, chat format, test models, the CLI.
cosmos_add_gtest(test_model_config LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_model_config.cpp)
cosmos_add_gtest(test_memory_estimate LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_memory_estimate.cpp)
cosmos_add_gtest(test_chat_format LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_chat_format.cpp)
cosmos_add_gtest(test_test_model LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_test_model.cpp)
cosmos_add_gtest(test_cli LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cli.cpp)
add_dependencies(test_cli cosmos-cli)
cosmos_add_gtest(test_kv_cache LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_kv_cache.cpp
                 ${CMAKE_CURRENT_SOURCE_DIR}/test_kv_format.cpp)
cosmos_add_gtest(test_quant LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant.cpp ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_dot.cpp
                 ${CMAKE_CURRENT_SOURCE_DIR}/test_e4m3.cpp)
cosmos_add_gtest(test_cpu_backend LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_backend.cpp)
cosmos_add_gtest(test_session LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_session.cpp)
cosmos_add_gtest(test_batch_scheduler LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_batch_scheduler.cpp)
# The CUDA backend module loader (a missing or broken libcosmos-cuda.so; reaches engine/src).
cosmos_add_gtest(test_cuda_module LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cuda_module.cpp
                 LIBS ${CMAKE_DL_LIBS})
target_include_directories(test_cuda_module PRIVATE ${PROJECT_SOURCE_DIR}/engine/src)
cosmos_add_gtest(test_cpu_quant LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_quant.cpp
                 ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_kv_int8.cpp)
cosmos_add_gtest(test_quant_cache LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_quant_cache.cpp)
# The GPU clock sampler (cosmos/gpu_clocks.h): summaries, its thread with a fake source, NVML absent.
cosmos_add_gtest(test_gpu_clocks LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_gpu_clocks.cpp)
cosmos_add_gtest(test_tune_cache LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_tune_cache.cpp)
# The decode launch tuner's decisions (cosmos/decode_tuner.h) on a fake measure, and measure_decode on the CPU backend.
cosmos_add_gtest(test_decode_tuner LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_decode_tuner.cpp)
# The CPU backend's matrix product (engine/src/cpu/cpu_ops.cpp) against a float64 reference.
cosmos_add_gtest(test_cpu_matmul LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_matmul.cpp)
target_include_directories(test_cpu_matmul PRIVATE ${PROJECT_SOURCE_DIR}/engine/src)
# Its grouped-query attention (engine/src/cpu/cpu_attention.cpp) against a float64 reference.
cosmos_add_gtest(test_cpu_attention LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_cpu_attention.cpp)
target_include_directories(test_cpu_attention PRIVATE ${PROJECT_SOURCE_DIR}/engine/src)
# Its speed on the 7B layer shapes (not a test: prints ms per layer, GB/s, GFLOP/s; docs/PERFORMANCE.md).
add_executable(bench_cpu_matmul ${CMAKE_CURRENT_SOURCE_DIR}/bench_cpu_matmul.cpp)
target_link_libraries(bench_cpu_matmul PRIVATE cosmos_engine OpenMP::OpenMP_CXX)
target_include_directories(bench_cpu_matmul PRIVATE ${PROJECT_SOURCE_DIR}/engine/src ${PROJECT_SOURCE_DIR}/tests/common)
cosmos_warnings(bench_cpu_matmul)
add_executable(bench_quantize ${CMAKE_CURRENT_SOURCE_DIR}/bench_quantize.cpp)
target_link_libraries(bench_quantize PRIVATE cosmos_engine OpenMP::OpenMP_CXX)
target_include_directories(bench_quantize PRIVATE ${PROJECT_SOURCE_DIR}/tests/common)
cosmos_warnings(bench_quantize)
# COSMOS_QGEMV_TUNING's parser (kernels/qgemv_tuning_spec.h, pure C++: the GPU products' knobs per shape).
cosmos_add_gtest(test_qgemv_tuning_spec LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_qgemv_tuning_spec.cpp)
target_include_directories(test_qgemv_tuning_spec PRIVATE ${PROJECT_SOURCE_DIR})
