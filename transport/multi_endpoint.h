// MultiEndpoint: one Endpoint over several backends, picked per address by its
// scheme (tcp:// and ipc:// -> ZeroMQ, ucx:// -> UCX). It listens with the
// backend of its listen address and reaches each peer with the backend that
// peer's address names, creating send-only backends the first time one is
// needed. This lets a node whose data plane is UCX register with a scheduler
// that always listens on ZeroMQ TCP, and the scheduler answer it over UCX.
//
// Thread-safety: as Endpoint (every call may come from any thread).
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>

#include "common/mutex.h"
#include "transport/transport.h"

namespace syncline {

class MultiEndpoint : public Endpoint {
 public:
  // Makes the backend for a scheme ("tcp", "ipc", "ucx"); `BackendKey` says
  // which schemes share one backend.
  using BackendFactory = std::function<Result<std::unique_ptr<Endpoint>>(const std::string& scheme)>;
  using BackendKey = std::function<std::string(const std::string& scheme)>;

  // `first` (may be null) serves the schemes of `first_scheme` from the start.
  MultiEndpoint(BackendFactory make, BackendKey key, std::unique_ptr<Endpoint> first = nullptr,
                const std::string& first_scheme = "");
  ~MultiEndpoint() override;

  Result<std::string> Listen(const std::string& address, Receiver receiver) override;
  Status Connect(PeerId peer, const std::string& address) override;
  Status Send(PeerId peer, Message message, Deadline deadline) override;
  // Flushes every backend (all by the one deadline); the first failure, if any.
  Status Flush(Deadline deadline) override;
  void Close() override;
  // The sum over the backends.
  EndpointStats stats() const override;

 private:
  Result<Endpoint*> BackendFor(const std::string& address) EXCLUDES(mu_);

  const BackendFactory make_;
  const BackendKey key_;
  // Held for map look-ups and changes only, never across a backend's call
  // (but stats(), which only reads counters).
  mutable Mutex mu_;
  bool closed_ GUARDED_BY(mu_) = false;
  std::map<std::string, std::unique_ptr<Endpoint>> backends_ GUARDED_BY(mu_);  // by BackendKey
  std::map<PeerId, Endpoint*> routes_ GUARDED_BY(mu_);
};

}  // namespace syncline
