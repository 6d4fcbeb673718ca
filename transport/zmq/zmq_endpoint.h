// ZmqEndpoint: the default transport, over ZeroMQ (tcp:// and ipc://).
// One ROUTER socket receives; one DEALER socket per connected peer sends.
// Payload frames are zero-copy both ways: sends reference the caller's
// Buffers until ZeroMQ has written them, and received frames become Buffers
// that keep the ZeroMQ message alive.
#pragma once

#include <memory>

#include "transport/transport.h"

namespace syncline {

struct ZmqOptions {
  // ZeroMQ I/O threads per endpoint. One saturates loopback TCP on small
  // machines; more help on fast NICs with many peers.
  int io_threads = 1;
  // Messages queued per peer before Send waits (up to its deadline).
  int send_queue_messages = 100000;
  // Messages larger than this are refused by the receiving socket before
  // they are buffered (guards against garbage claiming huge frames).
  int64_t max_message_bytes = int64_t{1} << 34;
};

std::unique_ptr<Endpoint> CreateZmqEndpoint(const ZmqOptions& options = {});

}  // namespace syncline
