// Logging setup: spdlog to the console (stderr) and, when a path is given, a rotating file.
#pragma once

#include <string>

namespace cosmos {

struct LogOptions {
  bool verbose = false;      // debug level on the console
  std::string file;          // rotating log file; empty: console only
  std::size_t max_file_bytes = 5 * 1024 * 1024;
  std::size_t max_files = 3;
};

// Replaces spdlog's default logger. Returns an error sentence if the file cannot be opened
// (logging then continues on the console only); empty on success.
std::string setup_logging(const LogOptions& options);

// Default log file: $XDG_STATE_HOME/cosmos-chat/cosmos.log (or ~/.local/state/...).
std::string default_log_path();

}  // namespace cosmos
