// Reachability of a peer's address, for error messages that say why a peer
// was never heard from ("connection refused" rather than a bare timeout).
// One short connection attempt, closed at once: not a health check, and
// nothing is sent.
#pragma once

#include <string>

namespace syncline {

// "accepts connections", "connection refused", "timed out", ... for tcp://
// and ipc:// addresses; empty for address kinds it cannot probe (ucx://,
// inproc://, loopback names).
std::string DescribeReachability(const std::string& address, int timeout_ms = 1000);

}  // namespace syncline
