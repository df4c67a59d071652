// cosmos-cli: the command-line interface to the Cosmos Chat engine.
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>
#include <spdlog/spdlog.h>

#include "cli_common.h"
#include "cosmos/logging.h"

int main(int argc, char** argv) {
  using namespace cosmos;
  CLI::App app{"cosmos-cli " COSMOS_VERSION " - run and inspect Cosmos-Reason1-7B with the Cosmos Chat engine"};
  app.require_subcommand(1);
  app.set_version_flag("--version", "cosmos-cli " COSMOS_VERSION);
  bool verbose = false;
  std::string log_file;
  app.add_flag("-v,--verbose", verbose, "debug output on stderr");
  app.add_option("--log-file", log_file, "rotating log file (default: " + default_log_path() + ")");

  cli::RunFn run;
  cli::register_tokenize(app, run);
  cli::register_chat_prompt(app, run);
  cli::register_inspect(app, run);
  cli::register_make_test_model(app, run);
  cli::register_bench_tokenizer(app, run);
  cli::register_generate(app, run);
  cli::register_logits(app, run);
  cli::register_bench(app, run);
  cli::register_tune(app, run);
  cli::register_batch(app, run);
#ifdef COSMOS_CLI_HAS_CONVERSATIONS
  cli::register_conversations(app, run);
  cli::register_import(app, run);
  cli::register_export(app, run);
  cli::register_download(app, run);
#endif

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);  // prints help or the usage error; codes stay below 128
  }
  LogOptions log;
  log.verbose = verbose;
  log.file = log_file.empty() ? default_log_path() : log_file;
  setup_logging(log);
  spdlog::debug("cosmos-cli {} started", COSMOS_VERSION);
  try {
    return run ? run() : cli::kExitError;
  } catch (const std::exception& e) {
    std::cerr << "error: internal: " << e.what() << "\n";
    spdlog::error("uncaught exception: {}", e.what());
    return cli::kExitInternal;
  }
}
