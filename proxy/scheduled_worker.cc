#include "proxy/scheduled_worker.h"

#include "common/logging.h"
#include "proxy/credit_scheduler.h"
#include "transport/factory.h"

namespace syncline {

Result<std::unique_ptr<Worker>> CreateScheduledWorker(const Settings& settings) {
  SYNCLINE_ASSIGN_OR_RETURN(auto endpoint, CreateEndpoint(settings.transport, NodeTransportOptions(settings)));
  SYNCLINE_ASSIGN_OR_RETURN(std::string address, ListenAddress(settings.transport, settings.host, settings.port));
  const uint64_t credit = settings.SchedulingCreditBytes();
  SYNCLINE_LOG_INFO("chunks go out in {} order with {} of credit", settings.scheduling,
                    credit == 0 ? std::string("unlimited") : std::to_string(credit) + " bytes");
  return Worker::Create(settings, std::move(endpoint), address, "", CreditScheduler::FromSettings(settings));
}

}  // namespace syncline
