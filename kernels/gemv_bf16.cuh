// Former name of kernels/gemv.cuh (bf16 only): kept so existing includes build; use gemv.cuh.
#pragma once

#include "kernels/gemv.cuh"
