// UcxEndpoint: the transport over UCX (ucx://host:port). The same code runs
// over InfiniBand/RoCE verbs (RC, UD, DC) where the hardware exists and over
// UCX's tcp and shared-memory transports where it does not; UCX picks the
// transports, steered by its own environment (UCX_TLS, UCX_NET_DEVICES, ...).
// Connections are set up through a UCP listener on the node's address; every
// message is one UCP Active Message (see ucx_frame.h), so UCX sends large
// payloads zero-copy (rendezvous) straight from the caller's Buffers and
// receives them into pooled, pre-faulted memory that stays registered with
// UCX's registration cache across rounds.
#pragma once

#include <cstdint>
#include <memory>

#include "transport/transport.h"

namespace syncline {

struct UcxOptions {
  // Messages queued or in flight per peer before Send waits (up to its
  // deadline). Bounds the payload memory a slow peer can pin on the sender.
  int send_queue_messages = 100000;
  // Messages whose data is larger than this are refused on receipt before any
  // memory is allocated for them (guards against garbage claiming huge sizes).
  int64_t max_message_bytes = int64_t{1} << 34;
  // Idle receive memory kept for reuse (and registered with UCX); beyond
  // this, received buffers are freed when their last user drops them.
  size_t receive_pool_idle_bytes = size_t{256} << 20;
  // How long Close lets queued messages drain and connections close cleanly
  // before it forces them shut.
  int close_timeout_ms = 500;
};

// Creates a UCX context and worker and starts the endpoint's progress thread.
// Fails with a Status (never aborts) when UCX finds no usable transport, for
// example UCX_TLS=rc on a machine without an RDMA device.
Result<std::unique_ptr<Endpoint>> CreateUcxEndpoint(const UcxOptions& options = {});

}  // namespace syncline
