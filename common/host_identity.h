// HostIdentity: a string equal for two processes exactly when they share a
// kernel, a network namespace and a PID namespace — when they can exchange
// payloads through shared memory. Emulated hosts (network namespaces on one
// machine) count as different hosts, as they must for the emulated cluster.
#pragma once

#include <string>

namespace syncline {

std::string HostIdentity();

}  // namespace syncline
