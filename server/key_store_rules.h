// The rules every mode of the key store applies to a request (server/key_store*.cc
// share them; not a public header of the server).
#pragma once

#include <cstdint>
#include <string>

#include "server/key_store.h"

namespace syncline::key_store_rules {

// A push is acknowledged on its own when it asks for no pull (the ack is its
// only answer) or asks for the ack besides its pull (the sender's credit).
inline bool WantsAck(const Message& push) {
  const uint32_t flags = push.header.flags();
  return !(flags & proto::FLAG_PULL_AFTER_PUSH) || (flags & proto::FLAG_ACK_PUSH);
}

// Why a round cannot be taken now, or empty: it is over, or too far ahead.
inline std::string RefuseRound(uint64_t number, uint64_t served_below, bool open) {
  if (number < served_below && !open) return "round " + std::to_string(number) + " is already over";
  if (number >= served_below + kMaxRoundsAhead)
    return "round " + std::to_string(number) + " is " + std::to_string(number - served_below) +
           " rounds beyond the last one every worker finished on this key (the limit is " +
           std::to_string(kMaxRoundsAhead) + "): a worker is running far ahead of the others, or the round is bogus";
  return "";
}

}  // namespace syncline::key_store_rules
