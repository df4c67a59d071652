#include "npy_writer.h"

#include <cstdio>
#include <fstream>
#include <string>

namespace cosmos::cli {

Status write_npy_f32(const std::filesystem::path& path, std::span<const float> data, const std::vector<std::size_t>& shape) {
  std::string dims;  // "3, 4" or "3," (a one-element Python tuple)
  for (std::size_t i = 0; i < shape.size(); ++i) dims += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) dims += ",";
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + dims + "), }";
  // Magic (6) + version (2) + header length (2) + header, padded with spaces to 64 bytes, ending in \n.
  const std::size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header += '\n';
  const auto tmp = path.string() + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    const unsigned char len[2] = {static_cast<unsigned char>(header.size() & 0xFF),
                                  static_cast<unsigned char>(header.size() >> 8)};
    f.write("\x93NUMPY\x01\x00", 8);
    f.write(reinterpret_cast<const char*>(len), 2);
    f << header;
    f.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size_bytes()));
    f.close();
    if (!f) {
      std::remove(tmp.c_str());
      return make_error(ErrorCategory::io, "file.write", path.string() + ": cannot write (disk full or no permission?)");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return make_error(ErrorCategory::io, "file.write", path.string() + ": " + ec.message());
  return ok_status();
}

}  // namespace cosmos::cli
