// Logging: one spdlog logger per process, named after the node ("worker 2"),
// writing to stderr. Library code logs through the SYNCLINE_LOG_* macros.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

namespace syncline {

// Sets the process's log prefix and level ("trace".."error", "off"); safe to
// call again, also while other threads log (the first call installs the
// logger: make it before starting threads that log).
void InitLogging(const std::string& node_name, const std::string& level = "info");

}  // namespace syncline

#define SYNCLINE_LOG_DEBUG(...) SPDLOG_DEBUG(__VA_ARGS__)
#define SYNCLINE_LOG_INFO(...) SPDLOG_INFO(__VA_ARGS__)
#define SYNCLINE_LOG_WARN(...) SPDLOG_WARN(__VA_ARGS__)
#define SYNCLINE_LOG_ERROR(...) SPDLOG_ERROR(__VA_ARGS__)
