// cosmos/cuda_backend.h in the engine: loads the CUDA backend module (libcosmos-cuda.so) on first
// use and calls through its table (cuda/cuda_module_abi.h). The engine itself links no CUDA
// library; when the module or the CUDA libraries it needs are missing, the functions here say why.
#include "cuda_module.h"

#include <dlfcn.h>

#include <atomic>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <vector>

#include <spdlog/spdlog.h>

#include "cuda/cuda_module_abi.h"

#ifndef COSMOS_CUDA_MODULE_BUILT
#define COSMOS_CUDA_MODULE_BUILT 0
#endif

namespace cosmos {
namespace {

namespace fs = std::filesystem;

constexpr const char* kModuleName = "libcosmos-cuda.so";

struct LoadedModule {
  CudaModuleStatus status;
  const CudaModuleV1* api = nullptr;  // set when status.loaded
};

std::string dl_error() {
  const char* e = dlerror();
  return e ? e : "unknown error";
}

// dlopen + entry point + ABI checks. `path` may be a bare name (the dynamic loader searches).
LoadedModule open_module(const std::string& path) {
  LoadedModule m;
  m.status.path = path;
  dlerror();
  // Never closed: backends made by the module run its code, and the CUDA runtime inside it
  // registers exit handlers.
  void* handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    m.status.why_not = detail::describe_load_failure(path, dl_error());
    return m;
  }
  void* sym = dlsym(handle, COSMOS_CUDA_MODULE_ENTRY);
  if (!sym) {
    m.status.why_not = "cannot load the CUDA backend: " + path + " is not a Cosmos Chat CUDA backend module (no " +
                       COSMOS_CUDA_MODULE_ENTRY + ")";
    return m;
  }
  using Entry = const CudaModuleV1* (*)();
  const CudaModuleV1* api = reinterpret_cast<Entry>(sym)();
  if (!api || api->abi_version != kCudaModuleAbiVersion || api->backend_options_size != sizeof(BackendOptions) ||
      api->error_size != sizeof(Error) || !api->create_backend || !api->memory_info || !api->copy_bandwidth_gbps ||
      !api->pci_bus_id) {
    m.status.why_not = "cannot load the CUDA backend: " + path +
                       " comes from another build of Cosmos Chat (module interface " +
                       (api ? std::to_string(api->abi_version) : std::string("?")) + ", this engine needs " +
                       std::to_string(kCudaModuleAbiVersion) + "); reinstall or rebuild it";
    return m;
  }
  m.api = api;
  m.status.loaded = true;
  if (Dl_info info{}; dladdr(sym, &info) && info.dli_fname && *info.dli_fname)
    m.status.path = fs::path(info.dli_fname).lexically_normal();  // where the loader found it
  return m;
}

LoadedModule open_explicit(const fs::path& path) {
  std::error_code ec;
  if (!fs::exists(path, ec)) {
    LoadedModule m;
    m.status.path = path;
    m.status.why_not = "cannot load the CUDA backend: " + path.string() + " does not exist";
    return m;
  }
  return open_module(path.string());
}

// Directories that may hold the module, in order, without duplicates.
std::vector<fs::path> search_dirs() {
  std::vector<fs::path> dirs;
  auto add = [&](const fs::path& d) {
    if (d.empty()) return;
    const fs::path n = d.lexically_normal();
    for (const auto& x : dirs)
      if (x == n) return;
    dirs.push_back(n);
  };
  std::error_code ec;
  const fs::path exe = fs::read_symlink("/proc/self/exe", ec);
  if (!ec && exe.has_parent_path()) {
    add(exe.parent_path() / ".." / "lib");
    add(exe.parent_path() / ".." / "lib" / "cosmos-chat");
  }
  static const int anchor = 0;  // an address inside libcosmos-engine.so
  Dl_info info{};
  if (dladdr(&anchor, &info) && info.dli_fname && *info.dli_fname) {
    const fs::path engine = fs::path(info.dli_fname).parent_path();
    add(engine.empty() ? fs::path(".") : engine);
    add((engine.empty() ? fs::path(".") : engine) / "cosmos-chat");
  }
  return dirs;
}

LoadedModule load() {
  if (const char* env = std::getenv("COSMOS_CUDA_MODULE"); env && *env) {
    LoadedModule m = open_explicit(env);
    if (!m.status.loaded) m.status.why_not += " (set by COSMOS_CUDA_MODULE)";
    return m;
  }
  std::error_code ec;
  std::string first_failure;
  fs::path first_failed;
  std::string looked;
  for (const auto& dir : search_dirs()) {
    const fs::path p = dir / kModuleName;
    looked += (looked.empty() ? "" : ", ") + dir.string();
    if (!fs::exists(p, ec)) continue;
    LoadedModule m = open_module(p.string());
    if (m.status.loaded) return m;
    if (first_failure.empty()) {
      first_failure = m.status.why_not;
      first_failed = p;
    }
  }
  if (!first_failure.empty()) {
    LoadedModule m;
    m.status.path = first_failed;
    m.status.why_not = first_failure;
    return m;
  }
  // The dynamic loader's own search (LD_LIBRARY_PATH, ld.so.cache, the system's directories).
  LoadedModule m = open_module(kModuleName);
  if (m.status.loaded) return m;
  const std::string not_found = std::string(kModuleName) + ": cannot open shared object file";
  if (m.status.why_not.find(not_found) == std::string::npos) return m;  // found, but it failed
  m.status.path.clear();
  if (COSMOS_CUDA_MODULE_BUILT)
    m.status.why_not = std::string("the CUDA backend module (") + kModuleName + ") is not installed: not in " + looked +
                       " nor on the library path (COSMOS_CUDA_MODULE can name it)";
  else
    m.status.why_not = "this build of Cosmos Chat has no CUDA backend (built without the CUDA toolkit)";
  return m;
}

std::mutex g_mutex;
std::atomic<const LoadedModule*> g_module{nullptr};

const LoadedModule& module() {
  if (const LoadedModule* m = g_module.load(std::memory_order_acquire)) return *m;
  std::lock_guard lock(g_mutex);
  if (const LoadedModule* m = g_module.load(std::memory_order_relaxed)) return *m;
  // Every state ever made, kept (reachable, never destroyed) for the life of the process:
  // references handed out stay valid across reset_cuda_module_for_testing() and at exit.
  static auto* all = new std::vector<std::unique_ptr<LoadedModule>>();
  all->push_back(std::make_unique<LoadedModule>(load()));
  const LoadedModule* m = all->back().get();
  if (m->status.loaded)
    spdlog::debug("cuda backend module: {}", m->status.path.string());
  else
    spdlog::debug("cuda backend module not loaded: {}", m->status.why_not);
  g_module.store(m, std::memory_order_release);
  return *m;
}

}  // namespace

namespace detail {

// "cannot load the CUDA backend ...: <why>", the dynamic loader's message kept whole.
std::string describe_load_failure(const std::string& path, const std::string& err) {
  // A missing dependency (libcublasLt.so.13, ...) is named first in the loader's message; a
  // problem with the module file itself starts with the module's path.
  if (err.find("cannot open shared object file") != std::string::npos && err.rfind(path, 0) != 0)
    return "cannot load the CUDA backend (" + path + "): the CUDA libraries are not installed or not found: " + err;
  if (err.rfind(path, 0) == 0) return "cannot load the CUDA backend: " + err;
  return "cannot load the CUDA backend (" + path + "): " + err;
}

CudaModuleStatus probe_cuda_module(const std::filesystem::path& path) {
  return open_explicit(path).status;
}

void reset_cuda_module_for_testing() {
  std::lock_guard lock(g_mutex);
  g_module.store(nullptr, std::memory_order_release);
}

}  // namespace detail

bool cuda_backend_built() { return COSMOS_CUDA_MODULE_BUILT != 0; }

const CudaModuleStatus& cuda_module_status() { return module().status; }

std::optional<DeviceMemoryInfo> gpu_memory_info() {
  const LoadedModule& m = module();
  if (!m.api) return std::nullopt;
  DeviceMemoryInfo info;
  if (!m.api->memory_info(&info.used, &info.total)) return std::nullopt;
  return info;
}

double gpu_copy_bandwidth_gbps() {
  const LoadedModule& m = module();
  return m.api ? m.api->copy_bandwidth_gbps() : 0.0;
}

std::string gpu_pci_bus_id() {
  const LoadedModule& m = module();
  char id[32] = {};
  if (!m.api || !m.api->pci_bus_id(id, static_cast<int>(sizeof(id) - 1))) return {};
  return id;
}

Result<std::unique_ptr<Backend>> create_cuda_backend(const std::filesystem::path& model_dir,
                                                     const BackendOptions& options) {
  const LoadedModule& m = module();
  if (!m.api) return make_error(ErrorCategory::unsupported_model, "backend.no_gpu", m.status.why_not);
  return m.api->create_backend(model_dir, options);
}

}  // namespace cosmos
