// ZmqEndpoint: the default transport, over ZeroMQ (tcp:// and ipc://).
// One ROUTER socket receives; one DEALER socket per connected peer sends.
// Payload frames are zero-copy both ways: sends reference the caller's
// Buffers until ZeroMQ has written them, and received frames become Buffers
// that keep the ZeroMQ message alive.
//
// With `curve` on, every connection is encrypted and authenticated by
// ZeroMQ's CURVE: the ROUTER is a CURVE server, and the address Listen
// returns carries its public key ("tcp://host:port|curve:<Z85 key>"), which
// a peer's Connect needs (transport/factory.h: WithCurveKey).
//
// Listen on an ipc:// path that a live endpoint listens on fails, as a tcp
// port in use does; a socket file nobody accepts on is taken over.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "transport/transport.h"

namespace syncline {

struct ZmqOptions {
  // ZeroMQ I/O threads per endpoint. One saturates loopback TCP on small
  // machines; more help on fast NICs with many peers.
  int io_threads = 1;
  // Messages queued per peer before Send waits (up to its deadline, then
  // DeadlineExceeded). With receive_queue_messages and the kernel's socket
  // buffers, what a peer that does not read can make this node hold.
  int send_queue_messages = 100000;
  // Messages received from one peer and not yet handed to the Receiver
  // before this node stops reading that peer's connection; its sends then
  // queue on its side and, once that queue is full, wait (docs/decisions.md).
  int receive_queue_messages = 1024;
  // Messages larger than this are refused by the receiving socket before
  // they are buffered (guards against garbage claiming huge frames).
  int64_t max_message_bytes = int64_t{1} << 34;
  // SO_SNDBUF of each tcp:// connection to another machine: it bounds what
  // the connection keeps unacknowledged. A connection to this host
  // (transport/zmq/this_host.h) keeps the kernel's. 0: the kernel's
  // autotuning everywhere.
  int tcp_send_buffer_bytes = 0;
  // Whether a tcp:// address leads to this host; empty: LeadsToThisHost.
  // Tests pass one that calls this host's own address another machine's.
  std::function<bool(const std::string& tcp_address)> leads_to_this_host;
  // Encrypt every connection with CURVE.
  bool curve = false;
  // The endpoint's CURVE secret key, 32 raw bytes; empty: a fresh random
  // pair (a scheduler passes one derived from the job token, so that nodes
  // know its public key before they join).
  std::string curve_secret_key;
};

std::unique_ptr<Endpoint> CreateZmqEndpoint(const ZmqOptions& options = {});

}  // namespace syncline
