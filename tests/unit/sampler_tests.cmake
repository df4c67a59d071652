# Sampler tests: HF-parity probabilities on hand-checked cases, seeded draw statistics, parameter
# validation, and a 152064-token vocabulary (counts kept by top-k / top-p / min-p, sample() timing).
cosmos_add_gtest(test_sampler LABEL unit SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/test_sampler.cpp)
