#include "transport/multi_endpoint.h"

#include <vector>

namespace syncline {
namespace {

std::string SchemeOf(const std::string& address) {
  const size_t end = address.find("://");
  return end == std::string::npos ? "" : address.substr(0, end);
}

}  // namespace

MultiEndpoint::MultiEndpoint(BackendFactory make, BackendKey key, std::unique_ptr<Endpoint> first,
                             const std::string& first_scheme)
    : make_(std::move(make)), key_(std::move(key)) {
  if (first) backends_[key_(first_scheme)] = std::move(first);
}

MultiEndpoint::~MultiEndpoint() { Close(); }

Result<Endpoint*> MultiEndpoint::BackendFor(const std::string& address) {
  const std::string scheme = SchemeOf(address);
  if (scheme.empty()) return InvalidArgument("address has no scheme (like tcp://): " + address);
  const std::string key = key_(scheme);
  {
    MutexLock lock(mu_);
    if (closed_) return Aborted("endpoint closed");
    if (auto it = backends_.find(key); it != backends_.end()) return it->second.get();
  }
  // Made outside the lock: starting a backend may take a while (UCX opens devices).
  SYNCLINE_ASSIGN_OR_RETURN(std::unique_ptr<Endpoint> made, make_(scheme));
  Endpoint* backend = nullptr;
  {
    MutexLock lock(mu_);
    if (!closed_) {
      // try_emplace leaves `made` alone if another thread made one first.
      backend = backends_.try_emplace(key, std::move(made)).first->second.get();
    }
  }
  if (made) made->Close();  // not under the lock: not needed after all
  if (backend == nullptr) return Aborted("endpoint closed");
  return backend;
}

Result<std::string> MultiEndpoint::Listen(const std::string& address, Receiver receiver) {
  SYNCLINE_ASSIGN_OR_RETURN(Endpoint * backend, BackendFor(address));
  return backend->Listen(address, std::move(receiver));
}

Status MultiEndpoint::Connect(PeerId peer, const std::string& address) {
  SYNCLINE_ASSIGN_OR_RETURN(Endpoint * backend, BackendFor(address));
  SYNCLINE_RETURN_IF_ERROR(backend->Connect(peer, address));
  MutexLock lock(mu_);
  routes_[peer] = backend;
  return Status::Ok();
}

Status MultiEndpoint::Send(PeerId peer, Message message, Deadline deadline) {
  Endpoint* backend = nullptr;
  {
    MutexLock lock(mu_);
    auto it = routes_.find(peer);
    if (it == routes_.end()) return NotFound("no connection to peer " + std::to_string(peer));
    backend = it->second;
  }
  // Backends live until this endpoint is destroyed, so the pointer stays valid.
  return backend->Send(peer, std::move(message), deadline);
}

Status MultiEndpoint::Flush(Deadline deadline) {
  std::vector<Endpoint*> backends;
  {
    MutexLock lock(mu_);
    for (auto& [key, backend] : backends_) backends.push_back(backend.get());
  }
  // Every backend, even after one failed: each gets to send what it can.
  Status first = Status::Ok();
  for (Endpoint* backend : backends) {
    Status flushed = backend->Flush(deadline);
    if (first.ok()) first = std::move(flushed);
  }
  return first;
}

void MultiEndpoint::Close() {
  std::vector<Endpoint*> backends;
  {
    MutexLock lock(mu_);
    closed_ = true;
    for (auto& [key, backend] : backends_) backends.push_back(backend.get());
  }
  // Not under the lock: a backend's Receiver may call Send while it shuts down.
  for (Endpoint* backend : backends) backend->Close();
}

EndpointStats MultiEndpoint::stats() const {
  EndpointStats total;
  MutexLock lock(mu_);
  for (const auto& [key, backend] : backends_) {
    const EndpointStats s = backend->stats();
    total.messages_sent += s.messages_sent;
    total.messages_received += s.messages_received;
    total.messages_rejected += s.messages_rejected;
    total.payload_bytes_sent += s.payload_bytes_sent;
    total.payload_bytes_received += s.payload_bytes_received;
  }
  return total;
}

}  // namespace syncline
