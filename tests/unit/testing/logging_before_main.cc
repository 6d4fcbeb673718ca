// Linked into every unit test: creates spdlog's registry (and its default
// logger) before main, while the process has one thread. spdlog creates it on
// the first log otherwise, inside libspdlog, whose thread-safe static
// initialisation ThreadSanitizer cannot see (the library is not instrumented):
// two threads of a test logging for the first time at once were reported as a
// race on the logger. Real processes call InitLogging before their first
// thread (common/node_main.cc, syncline_init) for the same reason.
#include <spdlog/spdlog.h>

namespace {
[[maybe_unused]] const bool kRegistryReady = (spdlog::default_logger_raw(), true);
}  // namespace
