// Process metrics under Prometheus's standard names: resident memory, CPU
// time, open file descriptors and start time of this process, read from
// /proc at scrape time; and syncline_node_info naming the role.
#pragma once

#include <string>

#include "metrics/registry.h"

namespace syncline {

void AddProcessMetrics(MetricsRegistry& registry);
// syncline_node_info{role, rank} 1, once the rank is known (-1: none).
void AddNodeInfo(MetricsRegistry& registry, const std::string& role, int rank);

}  // namespace syncline
