#include "transport/loopback/loopback_network.h"

#include <atomic>
#include <condition_variable>
#include <deque>
#include <thread>

#include "common/logging.h"
#include "transport/wire.h"

namespace syncline {

// One endpoint's queue of encoded messages, drained by its I/O thread.
struct LoopbackNetwork::Inbox {
  struct Envelope {
    std::string header;
    std::vector<Buffer> payloads;
  };
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Envelope> queue;  // GUARDED_BY(mu)
  bool closed = false;         // GUARDED_BY(mu)
};

struct LoopbackNetwork::Shared {
  std::mutex mu;
  std::map<std::string, std::shared_ptr<Inbox>> listeners;  // GUARDED_BY(mu)
  std::set<std::string> isolated;                            // GUARDED_BY(mu)
};

namespace {

class LoopbackEndpoint : public Endpoint {
 public:
  explicit LoopbackEndpoint(std::shared_ptr<LoopbackNetwork::Shared> shared) : shared_(std::move(shared)) {}
  ~LoopbackEndpoint() override { Close(); }

  Result<std::string> Listen(const std::string& address, Receiver receiver) override {
    if (address.rfind("loop://", 0) != 0) return InvalidArgument("loopback address must start with loop://: " + address);
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->listeners.count(address)) return Unavailable("address " + address + " is already in use");
      shared_->listeners[address] = inbox_;
    }
    address_ = address;
    receiver_ = std::move(receiver);
    thread_ = std::thread([this] { Run(); });
    return address;
  }

  Status Connect(PeerId peer, const std::string& address) override {
    std::lock_guard<std::mutex> lock(mu_);
    peers_[peer] = address;
    return Status::Ok();
  }

  Status Send(PeerId peer, Message message, Deadline) override {
    std::string to;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = peers_.find(peer);
      if (it == peers_.end()) return NotFound("no connection to peer " + std::to_string(peer));
      to = it->second;
      ++stats_.messages_sent;
      stats_.payload_bytes_sent += PayloadBytes(message);
    }
    std::shared_ptr<LoopbackNetwork::Inbox> inbox;
    {
      std::lock_guard<std::mutex> lock(shared_->mu);
      if (shared_->isolated.count(to) || shared_->isolated.count(address_)) return Status::Ok();
      auto it = shared_->listeners.find(to);
      if (it == shared_->listeners.end()) return Status::Ok();  // like a socket: queued into the void
      inbox = it->second;
    }
    std::lock_guard<std::mutex> lock(inbox->mu);
    if (inbox->closed) return Status::Ok();
    // The receiver gets views of the sender's memory: never writable on its side.
    for (Buffer& b : message.payloads) b = b.AsReadOnly();
    inbox->queue.push_back({EncodeHeader(message.header), std::move(message.payloads)});
    inbox->cv.notify_one();
    return Status::Ok();
  }

  void Close() override {
    // Messages still queued are dropped, as a closed socket drops them, and
    // at once: their payloads are views of their senders' memory, which a
    // sender may be waiting to get back. (Dropped outside the lock, since a
    // release may call into the sender.)
    decltype(inbox_->queue) undelivered;
    {
      std::lock_guard<std::mutex> lock(inbox_->mu);
      inbox_->closed = true;
      undelivered.swap(inbox_->queue);
      inbox_->cv.notify_all();
    }
    undelivered.clear();
    if (thread_.joinable()) thread_.join();
    std::lock_guard<std::mutex> lock(shared_->mu);
    auto it = shared_->listeners.find(address_);
    if (it != shared_->listeners.end() && it->second == inbox_) shared_->listeners.erase(it);
  }

  EndpointStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  void Run() {
    for (;;) {
      LoopbackNetwork::Inbox::Envelope envelope;
      {
        std::unique_lock<std::mutex> lock(inbox_->mu);
        inbox_->cv.wait(lock, [&] { return inbox_->closed || !inbox_->queue.empty(); });
        if (inbox_->closed) return;
        envelope = std::move(inbox_->queue.front());
        inbox_->queue.pop_front();
      }
      auto message = AdmitReceived(
          DecodeMessage(envelope.header.data(), envelope.header.size(), std::move(envelope.payloads)), mu_, stats_,
          address_);
      if (message) receiver_(std::move(*message));
    }
  }

  std::shared_ptr<LoopbackNetwork::Shared> shared_;
  std::shared_ptr<LoopbackNetwork::Inbox> inbox_ = std::make_shared<LoopbackNetwork::Inbox>();
  std::string address_;
  Receiver receiver_;
  std::thread thread_;
  mutable std::mutex mu_;
  std::map<PeerId, std::string> peers_;  // GUARDED_BY(mu_)
  EndpointStats stats_;                  // GUARDED_BY(mu_)
};

}  // namespace

LoopbackNetwork::LoopbackNetwork() : shared_(std::make_shared<Shared>()) {}
LoopbackNetwork::~LoopbackNetwork() = default;

std::unique_ptr<Endpoint> LoopbackNetwork::CreateEndpoint() { return std::make_unique<LoopbackEndpoint>(shared_); }

void LoopbackNetwork::Isolate(const std::string& address) {
  std::lock_guard<std::mutex> lock(shared_->mu);
  shared_->isolated.insert(address);
}

}  // namespace syncline
