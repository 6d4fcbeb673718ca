#include "common/logging.h"

#include <spdlog/sinks/stdout_sinks.h>

namespace syncline {

void InitLogging(const std::string& node_name, const std::string& level) {
  // One logger for the process, installed once and then set up in place: the
  // logging macros reach spdlog's default logger through an unguarded raw
  // pointer, so replacing it while another thread logs would free it under
  // that thread (ThreadSanitizer saw syncline_init do so in a process whose
  // servers were running). Level and pattern may change while others log.
  static const std::shared_ptr<spdlog::logger> logger =
      std::make_shared<spdlog::logger>("syncline", std::make_shared<spdlog::sinks::stderr_sink_mt>());
  logger->set_pattern("[%H:%M:%S.%e] [" + node_name + "] [%l] %v");
  logger->set_level(spdlog::level::from_str(level));
  logger->flush_on(spdlog::level::info);
  if (spdlog::default_logger_raw() != logger.get()) spdlog::set_default_logger(logger);
}

}  // namespace syncline
