#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace syncline {

void InitLogging(const std::string& node_name, const std::string& level) {
  auto sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  auto logger = std::make_shared<spdlog::logger>("syncline", sink);
  logger->set_pattern("[%H:%M:%S.%e] [" + node_name + "] [%l] %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  spdlog::set_default_logger(logger);
}

}  // namespace syncline
