// FaultyEndpoint: a forwarding wrapper around any Endpoint that lets a test
// drop, alter or stop outgoing messages (to play a flaky or dead peer).
// Thread-safety: as Endpoint; the filter may be replaced at any time (it runs
// outside the lock, on the sending thread).
#pragma once

#include <functional>
#include <memory>

#include "common/mutex.h"
#include "transport/transport.h"

namespace syncline {

class FaultyEndpoint : public Endpoint {
 public:
  // Returns false to drop the message; may modify it (corrupt, truncate).
  using SendFilter = std::function<bool(PeerId, Message&)>;

  explicit FaultyEndpoint(std::unique_ptr<Endpoint> inner) : inner_(std::move(inner)) {}
  void SetSendFilter(SendFilter filter) EXCLUDES(mu_) {
    MutexLock lock(mu_);
    filter_ = std::move(filter);
  }

  Result<std::string> Listen(const std::string& address, Receiver receiver) override {
    return inner_->Listen(address, std::move(receiver));
  }
  Status Connect(PeerId peer, const std::string& address) override { return inner_->Connect(peer, address); }
  Status Send(PeerId peer, Message message, Deadline deadline) override {
    SendFilter filter;
    {
      MutexLock lock(mu_);
      filter = filter_;
    }
    if (filter && !filter(peer, message)) return Status::Ok();
    return inner_->Send(peer, std::move(message), deadline);
  }
  Status Flush(Deadline deadline) override { return inner_->Flush(deadline); }
  void Close() override { inner_->Close(); }
  EndpointStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<Endpoint> inner_;
  Mutex mu_;
  SendFilter filter_ GUARDED_BY(mu_);
};

}  // namespace syncline
