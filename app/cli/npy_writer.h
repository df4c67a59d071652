// Writes a float32 array as a NumPy .npy file (format 1.0), via a temporary file and a rename.
#pragma once

#include <filesystem>
#include <span>
#include <vector>

#include "cosmos/error.h"

namespace cosmos::cli {

Status write_npy_f32(const std::filesystem::path& path, std::span<const float> data, const std::vector<std::size_t>& shape);

}  // namespace cosmos::cli
