// The CUDA backend module loader (engine/src/cuda_module.cpp): a missing module, a file that is not
// a shared library and a shared library that is not the module each give create_cuda_backend a
// clear "backend.no_gpu" error, and load_model falls back to the CPU (auto) or reports the reason
// (cuda), never crashing. The default search finds the module built next to the engine.
#include <dlfcn.h>

#include <cstdlib>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "cosmos/cuda_backend.h"
#include "cosmos/model_loader.h"
#include "cuda_module.h"
#include "temp_dir.h"
#include "tiny_model.h"

namespace cosmos {
namespace {

bool contains(const std::string& s, const std::string& part) { return s.find(part) != std::string::npos; }

// Sets COSMOS_CUDA_MODULE (or unsets it) and makes the loader search again; restores both after.
class CudaModuleTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (const char* v = std::getenv("COSMOS_CUDA_MODULE")) saved_ = v;
  }
  void TearDown() override {
    if (saved_) setenv("COSMOS_CUDA_MODULE", saved_->c_str(), 1);
    else unsetenv("COSMOS_CUDA_MODULE");
    detail::reset_cuda_module_for_testing();
  }
  static void use_module(const std::filesystem::path& path) {
    setenv("COSMOS_CUDA_MODULE", path.c_str(), 1);
    detail::reset_cuda_module_for_testing();
  }
  static void use_default_search() {
    unsetenv("COSMOS_CUDA_MODULE");
    detail::reset_cuda_module_for_testing();
  }

  // The module could not be loaded: every entry point says so, and model loading follows suit.
  static void expect_unavailable(const std::string& must_mention) {
    const CudaModuleStatus& st = cuda_module_status();
    EXPECT_FALSE(st.loaded);
    EXPECT_TRUE(contains(st.why_not, must_mention)) << st.why_not;
    EXPECT_FALSE(gpu_memory_info().has_value());
    EXPECT_EQ(gpu_copy_bandwidth_gbps(), 0.0);
    EXPECT_EQ(gpu_pci_bus_id(), "");

    auto gpu = create_cuda_backend(testing::tiny_model_dir(), BackendOptions{});
    ASSERT_FALSE(gpu.ok());
    EXPECT_EQ(gpu.error().code, "backend.no_gpu");
    EXPECT_EQ(gpu.error().category, ErrorCategory::unsupported_model);
    EXPECT_EQ(gpu.error().message, st.why_not);

    auto cuda = load_model(testing::tiny_model_dir(), Device::cuda, BackendOptions{});
    ASSERT_FALSE(cuda.ok());
    EXPECT_EQ(cuda.error().code, "backend.cuda_unavailable");
    EXPECT_TRUE(contains(cuda.error().message, st.why_not)) << cuda.error().message;
    EXPECT_TRUE(contains(cuda.error().message, "--device cpu")) << cuda.error().message;

    auto any = load_model(testing::tiny_model_dir(), Device::auto_select, BackendOptions{});
    ASSERT_TRUE(any.ok()) << any.error().message;
    EXPECT_EQ(any->backend->name(), "cpu");
    EXPECT_EQ(any->device_note, "using the CPU: " + st.why_not);
  }

  std::optional<std::string> saved_;
};

TEST_F(CudaModuleTest, MissingFileFallsBackToTheCpu) {
  testing::TempDir dir("cuda-module");
  const auto path = dir.path() / "libcosmos-cuda.so";
  use_module(path);
  expect_unavailable(path.string());
  const std::string why = cuda_module_status().why_not;
  EXPECT_TRUE(contains(why, "does not exist")) << why;
  EXPECT_TRUE(contains(why, "COSMOS_CUDA_MODULE")) << why;
  EXPECT_EQ(cuda_module_status().path, path);
}

TEST_F(CudaModuleTest, TextFileFallsBackToTheCpu) {
  testing::TempDir dir("cuda-module");
  const auto path = dir.write("libcosmos-cuda.so", std::string(4096, 'x') + "\nnot a shared library\n");
  use_module(path);
  expect_unavailable(path.string());
  const std::string why = cuda_module_status().why_not;
  EXPECT_EQ(why.rfind("cannot load the CUDA backend", 0), 0u) << why;
  EXPECT_TRUE(contains(why, "ELF")) << why;  // dlerror(): "invalid ELF header"
}

TEST_F(CudaModuleTest, SharedLibraryWithoutTheEntryPointIsRefused) {
  // libcosmos-engine.so itself: a loadable library, but not the module.
  Dl_info info{};
  ASSERT_NE(dladdr(reinterpret_cast<void*>(&cuda_backend_built), &info), 0);
  ASSERT_NE(info.dli_fname, nullptr);
  const std::filesystem::path engine = info.dli_fname;
  ASSERT_TRUE(contains(engine.filename().string(), "cosmos-engine")) << engine;
  use_module(engine);
  expect_unavailable("is not a Cosmos Chat CUDA backend module");
  // The same without touching the process's module.
  const CudaModuleStatus probe = detail::probe_cuda_module(engine);
  EXPECT_FALSE(probe.loaded);
  EXPECT_TRUE(contains(probe.why_not, "cosmos_cuda_module_v1")) << probe.why_not;
}

TEST_F(CudaModuleTest, MissingCudaLibrariesAreNamed) {
  const std::string why = detail::describe_load_failure(
      "/opt/cosmos/lib/cosmos-chat/libcosmos-cuda.so",
      "libcublasLt.so.13: cannot open shared object file: No such file or directory");
  EXPECT_EQ(why,
            "cannot load the CUDA backend (/opt/cosmos/lib/cosmos-chat/libcosmos-cuda.so): the CUDA libraries are "
            "not installed or not found: libcublasLt.so.13: cannot open shared object file: No such file or directory");
  const std::string bad = detail::describe_load_failure("/x/libcosmos-cuda.so",
                                                        "/x/libcosmos-cuda.so: invalid ELF header");
  EXPECT_EQ(bad, "cannot load the CUDA backend: /x/libcosmos-cuda.so: invalid ELF header");
}

TEST_F(CudaModuleTest, DefaultSearchFindsTheBuiltModuleOrSaysWhy) {
  use_default_search();
  const CudaModuleStatus& st = cuda_module_status();
  if (!st.loaded) {
    EXPECT_FALSE(st.why_not.empty());
    if (!cuda_backend_built())
      EXPECT_TRUE(contains(st.why_not, "no CUDA backend")) << st.why_not;
    else
      EXPECT_FALSE(st.path.empty()) << "the module next to libcosmos-engine.so was not found: " << st.why_not;
    expect_unavailable(st.why_not);
    return;
  }
  EXPECT_TRUE(cuda_backend_built());
  EXPECT_EQ(st.path.filename(), "libcosmos-cuda.so");
  // Loaded: with a GPU the backend works; without one the module says why (no driver, no GPU).
  auto gpu = create_cuda_backend(testing::tiny_model_dir(), BackendOptions{});
  if (gpu.ok()) {
    EXPECT_EQ((*gpu)->name(), "cuda");
    EXPECT_TRUE(gpu_memory_info().has_value());
    return;
  }
  EXPECT_EQ(gpu.error().code, "backend.no_gpu") << gpu.error().message;
  EXPECT_FALSE(gpu.error().message.empty());
  auto any = load_model(testing::tiny_model_dir(), Device::auto_select, BackendOptions{});
  ASSERT_TRUE(any.ok()) << any.error().message;
  EXPECT_EQ(any->backend->name(), "cpu");
  EXPECT_EQ(any->device_note, "using the CPU: " + gpu.error().message);
}

}  // namespace
}  // namespace cosmos
