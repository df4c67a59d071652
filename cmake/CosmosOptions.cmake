# Build options and compiler settings shared by every target.

# CUDA: on by default when a CUDA compiler is found (also /usr/local/cuda, where NVIDIA's toolkit lives).
if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
  set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
endif()
check_language(CUDA)
set(_cuda_default OFF)
if(CMAKE_CUDA_COMPILER)
  set(_cuda_default ON)
endif()
option(COSMOS_WITH_CUDA "Build the CUDA backend and kernels" ${_cuda_default})

# UI: on by default when Qt 6 (Quick, Sql, Network, Test) is found. The GPU machine has no Qt.
find_package(Qt6 6.4 QUIET COMPONENTS Core Gui Qml Quick QuickControls2 Sql Network Test)
set(_ui_default OFF)
if(Qt6_FOUND)
  set(_ui_default ON)
endif()
option(COSMOS_WITH_UI "Build the Qt desktop app and its view-models" ${_ui_default})
option(COSMOS_BUILD_TESTS "Build the tests" ON)
option(COSMOS_WERROR "Treat warnings as errors" OFF)
option(COSMOS_FUZZ "Build libFuzzer targets (needs clang)" OFF)
option(COSMOS_KTRACE "Diagnostic build: per-block timestamps in the decode chain's kernels (kernels/ktrace.cuh)" OFF)

if(COSMOS_WITH_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  # Architectures are chosen on purpose: sm_90 (H100/H200) is the target; presets widen it for release.
  if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES OR CMAKE_CUDA_ARCHITECTURES STREQUAL "52")
    set(CMAKE_CUDA_ARCHITECTURES 90)
  endif()
  # CMake 3.25 does not know nvcc 13's C++20 flag (DESIGN.md §8): tell it.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA_STANDARD 20)
  set(CMAKE_CUDA_STANDARD_REQUIRED ON)
endif()

if(COSMOS_WITH_UI)
  find_package(Qt6 6.4 REQUIRED COMPONENTS Core Gui Qml Quick QuickControls2 Sql Network Test)
endif()

# ccache when present.
find_program(COSMOS_CCACHE_PROGRAM ccache)
set(COSMOS_CCACHE OFF)
if(COSMOS_CCACHE_PROGRAM)
  set(COSMOS_CCACHE ON)
  set(CMAKE_C_COMPILER_LAUNCHER ${COSMOS_CCACHE_PROGRAM})
  set(CMAKE_CXX_COMPILER_LAUNCHER ${COSMOS_CCACHE_PROGRAM})
  set(CMAKE_CUDA_COMPILER_LAUNCHER ${COSMOS_CCACHE_PROGRAM})
endif()

# Warnings for our own targets (call cosmos_warnings(target)).
function(cosmos_warnings target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra -Wpedantic -Wshadow>
    $<$<AND:$<COMPILE_LANGUAGE:CXX>,$<BOOL:${COSMOS_WERROR}>>:-Werror>
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall>
    $<$<AND:$<COMPILE_LANGUAGE:CUDA>,$<BOOL:${COSMOS_WERROR}>>:-Werror=all-warnings>)
endfunction()

# Where the test tokenizer lives (fetched by packaging/fetch-test-tokenizer.sh).
if(DEFINED ENV{COSMOS_CACHE_DIR})
  set(_cosmos_cache $ENV{COSMOS_CACHE_DIR})
elseif(DEFINED ENV{XDG_CACHE_HOME})
  set(_cosmos_cache $ENV{XDG_CACHE_HOME}/cosmos-chat)
else()
  set(_cosmos_cache $ENV{HOME}/.cache/cosmos-chat)
endif()
set(COSMOS_TEST_TOKENIZER "${_cosmos_cache}/test-tokenizer/tokenizer.json"
    CACHE FILEPATH "Qwen2.5-VL test tokenizer.json (packaging/fetch-test-tokenizer.sh makes it)")
