// The worker a training process gets: a Worker whose chunks go through the
// CreditScheduler its settings describe (SYNCLINE_SCHEDULING, the scheduling
// credit). The C API, the example and the benchmarks create workers here.
#pragma once

#include <memory>

#include "common/settings.h"
#include "worker/worker.h"

namespace syncline {

Result<std::unique_ptr<Worker>> CreateScheduledWorker(const Settings& settings);

}  // namespace syncline
