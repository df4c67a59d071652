#include "cosmos/logging.h"

#include <cstdlib>
#include <filesystem>
#include <vector>

#include <spdlog/sinks/rotating_file_sink.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

namespace cosmos {

std::string default_log_path() {
  namespace fs = std::filesystem;
  fs::path base;
  if (const char* state = std::getenv("XDG_STATE_HOME"); state && *state) {
    base = state;
  } else if (const char* home = std::getenv("HOME"); home && *home) {
    base = fs::path(home) / ".local" / "state";
  } else {
    base = fs::temp_directory_path();
  }
  return (base / "cosmos-chat" / "cosmos.log").string();
}

std::string setup_logging(const LogOptions& options) {
  std::vector<spdlog::sink_ptr> sinks;
  auto console = std::make_shared<spdlog::sinks::stderr_color_sink_mt>();
  console->set_level(options.verbose ? spdlog::level::debug : spdlog::level::warn);
  console->set_pattern("%^%l%$: %v");
  sinks.push_back(console);

  std::string problem;
  if (!options.file.empty()) {
    try {
      std::filesystem::create_directories(std::filesystem::path(options.file).parent_path());
      auto file = std::make_shared<spdlog::sinks::rotating_file_sink_mt>(
          options.file, options.max_file_bytes, options.max_files);
      file->set_level(spdlog::level::debug);
      file->set_pattern("[%Y-%m-%d %H:%M:%S.%e] [%t] [%l] %v");
      sinks.push_back(file);
    } catch (const std::exception& e) {
      problem = "cannot open log file " + options.file + ": " + e.what();
    }
  }
  auto logger = std::make_shared<spdlog::logger>("cosmos", sinks.begin(), sinks.end());
  logger->set_level(spdlog::level::debug);
  logger->flush_on(spdlog::level::warn);
  spdlog::set_default_logger(logger);
  if (!problem.empty()) spdlog::warn("{}", problem);
  return problem;
}

}  // namespace cosmos
