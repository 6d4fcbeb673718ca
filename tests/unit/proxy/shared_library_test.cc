// libsyncline.so loaded the way a Python shim loads it (dlopen, no link-time
// knowledge of C++): every C API call resolves, internal C++ symbols stay
// hidden, and a call that fails says why.
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>

#include "proxy/c_api.h"

namespace {

class SharedLibraryTest : public ::testing::Test {
 protected:
  // Loaded once per process and never unloaded, as a Python interpreter does:
  // protobuf keeps a library's schema registered after dlclose, so loading
  // it a second time would register it twice.
  static void SetUpTestSuite() { handle_ = dlopen(SYNCLINE_SHARED_LIBRARY, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE); }
  void SetUp() override { ASSERT_NE(handle_, nullptr) << dlerror(); }
  template <typename F>
  F Get(const char* name) {
    return reinterpret_cast<F>(dlsym(handle_, name));
  }
  static void* handle_;
};

void* SharedLibraryTest::handle_ = nullptr;

TEST_F(SharedLibraryTest, ExportsTheWholeCApi) {
  for (const char* name : {"syncline_last_error", "syncline_init", "syncline_rank", "syncline_size",
                           "syncline_local_rank", "syncline_local_size", "syncline_cross_iteration", "syncline_sync_mode",
                           "syncline_would_compress", "syncline_osp_period",
                           "syncline_declare", "syncline_push_pull_async", "syncline_push_pull_to", "syncline_push_pull_on_stream", "syncline_push_pull", "syncline_poll", "syncline_wait",
                           "syncline_op_free", "syncline_begin_step", "syncline_now_us", "syncline_trace_span", "syncline_broadcast", "syncline_barrier", "syncline_shutdown"}) {
    EXPECT_NE(dlsym(handle_, name), nullptr) << name << " is not exported";
  }
}

TEST_F(SharedLibraryTest, KeepsTheCppInsideHidden) {
  // A C++ symbol of the worker, and one of a static dependency's.
  EXPECT_EQ(dlsym(handle_, "_ZN8syncline6Worker8ShutdownEv"), nullptr);
  EXPECT_EQ(dlsym(handle_, "_ZN8syncline15CreditScheduler7ReleaseEm"), nullptr);
}

TEST_F(SharedLibraryTest, AFailedInitSaysWhy) {
  setenv("SYNCLINE_NUM_WORKERS", "many", 1);
  auto init = Get<int (*)(syncline_worker**)>("syncline_init");
  auto last_error = Get<const char* (*)()>("syncline_last_error");
  ASSERT_TRUE(init && last_error);
  syncline_worker* w = nullptr;
  EXPECT_NE(0, init(&w));
  EXPECT_EQ(w, nullptr);
  EXPECT_NE(std::string(last_error()).find("SYNCLINE_NUM_WORKERS"), std::string::npos) << last_error();
  auto wait = Get<int (*)(syncline_op*, int64_t)>("syncline_wait");
  EXPECT_NE(0, wait(nullptr, 0));
  EXPECT_NE(std::string(last_error()).find("null op"), std::string::npos) << last_error();
  auto poll = Get<int (*)(const syncline_op*)>("syncline_poll");
  EXPECT_EQ(0, poll(nullptr));
  unsetenv("SYNCLINE_NUM_WORKERS");
}

}  // namespace
