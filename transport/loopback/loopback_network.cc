#include "transport/loopback/loopback_network.h"

#include <atomic>
#include <deque>
#include <map>
#include <set>
#include <thread>

#include "common/logging.h"
#include "common/mutex.h"
#include "transport/wire.h"

namespace syncline {

// One endpoint's bounded queue of encoded messages, drained by its I/O thread.
struct LoopbackNetwork::Inbox {
  struct Envelope {
    std::string header;
    std::vector<Buffer> payloads;
  };
  explicit Inbox(size_t capacity) : capacity(capacity) {}
  const size_t capacity;
  Mutex mu;
  CondVar ready;  // a message arrived, or the inbox closed
  CondVar room;   // a message was taken, or the inbox closed
  std::deque<Envelope> queue GUARDED_BY(mu);
  bool closed GUARDED_BY(mu) = false;
};

struct LoopbackNetwork::Shared {
  Mutex mu;
  std::map<std::string, std::shared_ptr<Inbox>> listeners GUARDED_BY(mu);
  std::set<std::string> isolated GUARDED_BY(mu);
};

namespace {

using Inbox = LoopbackNetwork::Inbox;

class LoopbackEndpoint : public Endpoint {
 public:
  LoopbackEndpoint(std::shared_ptr<LoopbackNetwork::Shared> shared, const LoopbackOptions& options)
      : shared_(std::move(shared)), inbox_(std::make_shared<Inbox>(std::max<size_t>(options.inbox_messages, 1))) {}
  ~LoopbackEndpoint() override { Close(); }

  Result<std::string> Listen(const std::string& address, Receiver receiver) override {
    if (address.rfind("loop://", 0) != 0) return InvalidArgument("loopback address must start with loop://: " + address);
    {
      MutexLock lock(shared_->mu);
      if (shared_->listeners.count(address)) return Unavailable("address " + address + " is already in use");
      shared_->listeners[address] = inbox_;
    }
    address_ = address;
    receiver_ = std::move(receiver);
    thread_ = std::thread([this] { Run(); });
    return address;
  }

  Status Connect(PeerId peer, const std::string& address) override {
    MutexLock lock(mu_);
    peers_[peer] = address;
    return Status::Ok();
  }

  Status Send(PeerId peer, Message message, Deadline deadline) override {
    if (closed_.load()) return Aborted("endpoint closed");
    std::string to;
    {
      MutexLock lock(mu_);
      auto it = peers_.find(peer);
      if (it == peers_.end()) return NotFound("no connection to peer " + std::to_string(peer));
      to = it->second;
    }
    const uint64_t bytes = PayloadBytes(message);
    std::shared_ptr<Inbox> inbox;
    {
      MutexLock lock(shared_->mu);
      if (shared_->isolated.count(to) || shared_->isolated.count(address_)) return Sent(bytes);
      auto it = shared_->listeners.find(to);
      if (it == shared_->listeners.end()) return Sent(bytes);  // like a socket: queued into the void
      inbox = it->second;
    }
    // The receiver gets views of the sender's memory, never writable on its
    // side; memory nobody owns is the caller's to reuse at once: copied.
    for (Buffer& b : message.payloads) b = b.owner() ? b.AsReadOnly() : Buffer::Copy(b.data(), b.size()).AsReadOnly();
    Inbox::Envelope envelope{EncodeHeader(message.header), std::move(message.payloads)};
    MutexLock lock(inbox->mu);
    const bool room = inbox->room.WaitUntil(inbox->mu, deadline, [&]() REQUIRES(inbox->mu) {
      return inbox->closed || inbox->queue.size() < inbox->capacity;
    });
    if (!room)
      return DeadlineExceeded("the inbox of peer " + std::to_string(peer) + " (" + to + ") stayed full: its receiver " +
                              "does not keep up");
    if (inbox->closed) return Sent(bytes);
    inbox->queue.push_back(std::move(envelope));
    inbox->ready.NotifyOne();
    return Sent(bytes);
  }

  // Send hands every message to its receiver's inbox before it returns:
  // nothing of this node's is left to wait for.
  Status Flush(Deadline /*deadline*/) override { return Status::Ok(); }

  void Close() override {
    closed_ = true;
    // Messages still queued are dropped, as a closed socket drops them, and
    // at once: their payloads are views of their senders' memory, which a
    // sender may be waiting to get back. (Dropped outside the lock, since a
    // release may call into the sender.)
    std::deque<Inbox::Envelope> undelivered;
    {
      MutexLock lock(inbox_->mu);
      inbox_->closed = true;
      undelivered.swap(inbox_->queue);
      inbox_->ready.NotifyAll();
      inbox_->room.NotifyAll();
    }
    undelivered.clear();
    if (thread_.joinable()) thread_.join();
    MutexLock lock(shared_->mu);
    auto it = shared_->listeners.find(address_);
    if (it != shared_->listeners.end() && it->second == inbox_) shared_->listeners.erase(it);
  }

  EndpointStats stats() const override { return counters_.Get(); }

 private:
  Status Sent(uint64_t bytes) {
    counters_.Sent(bytes);
    return Status::Ok();
  }

  void Run() {
    for (;;) {
      Inbox::Envelope envelope;
      {
        MutexLock lock(inbox_->mu);
        inbox_->ready.Wait(inbox_->mu, [&]() REQUIRES(inbox_->mu) { return inbox_->closed || !inbox_->queue.empty(); });
        if (inbox_->closed) return;
        envelope = std::move(inbox_->queue.front());
        inbox_->queue.pop_front();
        inbox_->room.NotifyOne();
      }
      auto message = AdmitReceived(
          DecodeMessage(envelope.header.data(), envelope.header.size(), std::move(envelope.payloads)), counters_,
          address_);
      if (message) receiver_(std::move(*message));
    }
  }

  std::shared_ptr<LoopbackNetwork::Shared> shared_;
  const std::shared_ptr<Inbox> inbox_;
  std::string address_;
  Receiver receiver_;
  std::thread thread_;
  std::atomic<bool> closed_{false};
  Mutex mu_;
  std::map<PeerId, std::string> peers_ GUARDED_BY(mu_);
  EndpointCounters counters_;
};

}  // namespace

LoopbackNetwork::LoopbackNetwork() : shared_(std::make_shared<Shared>()) {}
LoopbackNetwork::~LoopbackNetwork() = default;

std::unique_ptr<Endpoint> LoopbackNetwork::CreateEndpoint(const LoopbackOptions& options) {
  return std::make_unique<LoopbackEndpoint>(shared_, options);
}

void LoopbackNetwork::Isolate(const std::string& address) {
  MutexLock lock(shared_->mu);
  shared_->isolated.insert(address);
}

}  // namespace syncline
