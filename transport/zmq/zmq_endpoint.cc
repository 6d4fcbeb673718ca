#include "transport/zmq/zmq_endpoint.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <limits>
#include <map>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "common/logging.h"
#include "common/mutex.h"
#include "transport/wire.h"
#include "transport/zmq/kernel_send_buffer.h"
#include "transport/zmq/this_host.h"

namespace syncline {
namespace {

void ReleaseOwner(void* /*data*/, void* hint) { delete static_cast<std::shared_ptr<const void>*>(hint); }

// "tcp://host:0" -> "tcp://host:*" (ZeroMQ's spelling of "any free port").
std::string BindSpelling(const std::string& address) {
  if (address.rfind("tcp://", 0) == 0 && address.size() > 2 && address.compare(address.size() - 2, 2, ":0") == 0)
    return address.substr(0, address.size() - 1) + "*";
  return address;
}

// True if something accepts connections on the unix socket at `path` now.
// (libzmq unlinks an ipc:// path before binding it, live listener or not.)
bool SomeoneListensAt(const std::string& path) {
  sockaddr_un su{};
  su.sun_family = AF_UNIX;
  if (path.empty() || path[0] == '@' || path == "*" || path.size() >= sizeof(su.sun_path)) return false;
  std::memcpy(su.sun_path, path.data(), path.size());
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A full backlog (EAGAIN) is a listener too; ECONNREFUSED is a stale file.
  const bool live = connect(fd, reinterpret_cast<sockaddr*>(&su), sizeof(su)) == 0 || errno == EAGAIN;
  close(fd);
  return live;
}

constexpr char kCurveMark[] = "|curve:";
constexpr size_t kZ85KeyChars = 40;

std::string Z85(const std::string& raw) {
  char text[kZ85KeyChars + 1] = {};
  zmq_z85_encode(text, reinterpret_cast<const uint8_t*>(raw.data()), raw.size());
  return text;
}

// Splits "address|curve:KEY" into the address ZeroMQ connects to and the key.
std::pair<std::string, std::string> SplitCurveKey(const std::string& address) {
  const size_t mark = address.rfind(kCurveMark);
  if (mark == std::string::npos) return {address, ""};
  return {address.substr(0, mark), address.substr(mark + sizeof(kCurveMark) - 1)};
}

class ZmqEndpoint : public Endpoint {
 public:
  explicit ZmqEndpoint(const ZmqOptions& options) : options_(options), context_(options.io_threads) {
    // Sockets closing never wait for unsent data, but what Flush asked for (Close).
    context_.set(zmq::ctxopt::blocky, false);
    if (options_.curve) {
      char pub[kZ85KeyChars + 1] = {}, sec[kZ85KeyChars + 1] = {};
      if (options_.curve_secret_key.size() == 32) {
        std::string encoded = Z85(options_.curve_secret_key);
        std::copy(encoded.begin(), encoded.end(), sec);
        curve_ok_ = zmq_curve_public(pub, sec) == 0;
      } else {
        curve_ok_ = options_.curve_secret_key.empty() && zmq_curve_keypair(pub, sec) == 0;
      }
      curve_public_ = pub;
      curve_secret_ = sec;
    }
  }
  ~ZmqEndpoint() override { Close(); }

  Result<std::string> Listen(const std::string& address, Receiver receiver) override {
    if (address.rfind("tcp://", 0) != 0 && address.rfind("ipc://", 0) != 0)
      return InvalidArgument("zmq address must start with tcp:// or ipc://: " + address);
    if (options_.curve && !curve_ok_)
      return Unavailable("cannot encrypt: this libzmq has no CURVE support, or the CURVE secret key is not 32 bytes");
    if (address.rfind("ipc://", 0) == 0 && SomeoneListensAt(address.substr(6)))
      return Unavailable("address " + address + " is already in use (another endpoint listens on it)");
    router_ = zmq::socket_t(context_, zmq::socket_type::router);
    router_.set(zmq::sockopt::linger, 0);
    if (options_.curve) {
      router_.set(zmq::sockopt::curve_server, true);
      router_.set(zmq::sockopt::curve_secretkey, curve_secret_);
    }
    router_.set(zmq::sockopt::maxmsgsize, options_.max_message_bytes);
    // A Receiver that does not keep up stops the reading of its peers'
    // connections here, and so pushes back on their sends.
    router_.set(zmq::sockopt::rcvhwm, std::max(options_.receive_queue_messages, 1));
    try {
      router_.bind(BindSpelling(address));
    } catch (const zmq::error_t& e) {
      router_.close();
      if (e.num() == EADDRINUSE) return Unavailable("address " + address + " is already in use");
      return Unavailable("cannot listen on " + address + ": " + e.what());
    }
    address_ = router_.get(zmq::sockopt::last_endpoint);
    receiver_ = std::move(receiver);
    thread_ = std::thread([this] { Run(); });
    return options_.curve ? address_ + kCurveMark + curve_public_ : address_;
  }

  Status Connect(PeerId peer, const std::string& address) override {
    auto [where, server_key] = SplitCurveKey(address);
    if (options_.curve && server_key.size() != kZ85KeyChars)
      return InvalidArgument("cannot connect to " + address + " encrypted: the address carries no CURVE key (is "
                             "SYNCLINE_ENCRYPT=1 set on every node?)");
    if (!options_.curve && !server_key.empty())
      return InvalidArgument("the peer at " + where + " encrypts its traffic: set SYNCLINE_ENCRYPT=1 on every node");
    auto p = std::make_shared<Peer>();
    MutexLock setup(p->mu);  // not shared yet, but the socket is guarded all the same
    try {
      p->socket = zmq::socket_t(context_, zmq::socket_type::dealer);
      p->socket.set(zmq::sockopt::linger, 0);
      p->socket.set(zmq::sockopt::sndhwm, options_.send_queue_messages);
      // Bounds the bytes in flight from this node to that peer (ZmqOptions).
      if (options_.tcp_send_buffer_bytes > 0 && where.rfind("tcp://", 0) == 0 && !LeadsHere(where)) {
        std::call_once(send_buffer_checked_, [this] { WarnIfTheKernelCapsTheSendBuffer(); });
        p->socket.set(zmq::sockopt::sndbuf, options_.tcp_send_buffer_bytes);
      }
      if (options_.curve) {
        p->socket.set(zmq::sockopt::curve_serverkey, server_key);
        p->socket.set(zmq::sockopt::curve_publickey, curve_public_);
        p->socket.set(zmq::sockopt::curve_secretkey, curve_secret_);
      }
      p->socket.connect(where);
    } catch (const zmq::error_t& e) {
      return Unavailable("cannot connect to " + address + ": " + e.what());
    }
    p->address = address;
    setup.Unlock();
    MutexLock lock(peers_mu_);
    peers_[peer] = std::move(p);
    return Status::Ok();
  }

  Status Send(PeerId peer, Message message, Deadline deadline) override {
    std::shared_ptr<Peer> p;
    {
      MutexLock lock(peers_mu_);
      auto it = peers_.find(peer);
      if (it == peers_.end()) return NotFound("no connection to peer " + std::to_string(peer));
      p = it->second;
    }
    const std::string header = EncodeHeader(message.header);
    const uint64_t bytes = PayloadBytes(message);
    MutexLock lock(p->mu);
    if (closed_.load()) return Aborted("endpoint closed");
    try {
      const auto wait_ms = static_cast<int>(std::min<long long>(deadline.RemainingMs(), 1 << 30));
      p->socket.set(zmq::sockopt::sndtimeo, wait_ms);
      auto more = message.payloads.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore;
      if (!p->socket.send(zmq::buffer(header), more))
        return DeadlineExceeded("send queue to peer " + std::to_string(peer) + " (" + p->address +
                                ") stayed full: the peer is not reading");
      for (size_t i = 0; i < message.payloads.size(); ++i) {
        const Buffer& b = message.payloads[i];
        auto flags = i + 1 < message.payloads.size() ? zmq::send_flags::sndmore : zmq::send_flags::none;
        zmq::message_t frame = b.owner() ? zmq::message_t(const_cast<uint8_t*>(b.data()), b.size(), ReleaseOwner,
                                                          new std::shared_ptr<const void>(b.owner()))
                                         : zmq::message_t(b.data(), b.size());
        // Later frames of a multipart message are accepted at once.
        (void)p->socket.send(frame, flags);
      }
    } catch (const zmq::error_t& e) {
      return Unavailable("send to peer " + std::to_string(peer) + " failed: " + e.what());
    }
    counters_.Sent(bytes);
    return Status::Ok();
  }

  // ZeroMQ cannot tell whether a socket's queue is empty, only whether it
  // has room. Flush waits until each peer's queue has room (one that stays
  // full names a peer that is not reading), and makes Close linger until
  // `deadline` so that ZeroMQ's I/O thread writes out what is still queued:
  // Close returns once it has, or at `deadline` at the latest.
  Status Flush(Deadline deadline) override {
    {
      MutexLock lock(linger_mu_);
      linger_until_ = std::max(linger_until_, deadline.at());
    }
    std::vector<std::pair<PeerId, std::shared_ptr<Peer>>> peers;
    {
      MutexLock lock(peers_mu_);
      peers.assign(peers_.begin(), peers_.end());
    }
    std::string full;
    for (auto& [id, p] : peers) {
      MutexLock lock(p->mu);
      if (closed_.load()) break;
      zmq::pollitem_t item{p->socket.handle(), 0, ZMQ_POLLOUT, 0};
      try {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(deadline.RemainingMs())) > 0) continue;
      } catch (const zmq::error_t& e) {
        return Unavailable("cannot flush to peer " + std::to_string(id) + ": " + e.what());
      }
      full += (full.empty() ? "" : ", ") + std::to_string(id) + " (" + p->address + ")";
    }
    if (!full.empty()) return DeadlineExceeded("the send queue to peer(s) " + full + " stayed full: not reading");
    return Status::Ok();
  }

  void Close() override {
    if (closed_.exchange(true)) return;
    if (thread_.joinable()) thread_.join();
    Clock::time_point linger_until;
    {
      MutexLock lock(linger_mu_);
      linger_until = linger_until_;
    }
    // What a Flush asked to keep is written out until its deadline (the
    // context's close below waits for it); everything else is dropped at once.
    const auto linger_ms = static_cast<int>(
        std::clamp<long long>(std::chrono::duration_cast<Millis>(linger_until - Clock::now()).count(), 0, 1 << 30));
    {
      MutexLock lock(peers_mu_);
      for (auto& [id, p] : peers_) {
        MutexLock peer_lock(p->mu);
        p->socket.set(zmq::sockopt::linger, linger_ms);
        p->socket.close();
      }
      peers_.clear();
    }
    router_.close();
    context_.close();
  }

  EndpointStats stats() const override { return counters_.Get(); }

 private:
  // Linux caps SO_SNDBUF at net.core.wmem_max without an error: a bound above it
  // would not be the bound asked for, so the endpoint says so, at its first
  // connection that asks for one.
  void WarnIfTheKernelCapsTheSendBuffer() const {
    const int asked = options_.tcp_send_buffer_bytes;
    const int granted = KernelSendBufferFor(asked);
    if (granted >= 0 && granted < std::min(asked, std::numeric_limits<int>::max() / 2))
      SYNCLINE_LOG_WARN(
          "SYNCLINE_TCP_SEND_BUFFER_BYTES={} is above what this kernel lets a socket ask for "
          "(net.core.wmem_max): connections to other machines get {} bytes. Raise net.core.wmem_max "
          "(sysctl -w net.core.wmem_max={}) or set a smaller value",
          asked, granted, asked);
  }

  struct Peer {
    Mutex mu;  // a socket is used by one thread at a time
    zmq::socket_t socket GUARDED_BY(mu);
    std::string address;  // set before the Peer is shared
  };

  void Run() {
    std::vector<zmq::message_t> frames;
    while (!closed_.load()) {
      zmq::pollitem_t item{router_.handle(), 0, ZMQ_POLLIN, 0};
      try {
        if (zmq::poll(&item, 1, std::chrono::milliseconds(50)) == 0) continue;
        frames.clear();
        do {
          zmq::message_t frame;
          if (!router_.recv(frame, zmq::recv_flags::dontwait)) break;
          frames.push_back(std::move(frame));
        } while (frames.back().more());
      } catch (const zmq::error_t& e) {
        if (closed_.load()) return;
        SYNCLINE_LOG_WARN("{}: receive failed: {}", address_, e.what());
        continue;
      }
      if (!frames.empty()) Deliver(frames);  // poll can wake with nothing to read
    }
  }

  // frames[0] is the ROUTER's routing id, frames[1] the header, the rest payloads.
  void Deliver(std::vector<zmq::message_t>& frames) {
    Result<Message> message = InvalidArgument("message has no header frame");
    if (frames.size() >= 2) {
      std::vector<Buffer> payloads;
      payloads.reserve(frames.size() - 2);
      for (size_t i = 2; i < frames.size(); ++i) {
        auto holder = std::make_shared<zmq::message_t>(std::move(frames[i]));
        payloads.push_back(Buffer(holder->data(), holder->size(), holder).AsWritable());  // ours alone
      }
      message = DecodeMessage(frames[1].data(), frames[1].size(), std::move(payloads));
    }
    auto admitted = AdmitReceived(std::move(message), counters_, address_);
    if (admitted) receiver_(std::move(*admitted));
  }

  // Whether the tcp:// address `where` leads to this host (ZmqOptions).
  bool LeadsHere(const std::string& where) const {
    return options_.leads_to_this_host ? options_.leads_to_this_host(where) : LeadsToThisHost(where);
  }

  const ZmqOptions options_;
  bool curve_ok_ = false;
  std::string curve_public_, curve_secret_;  // Z85 text (options_.curve)
  zmq::context_t context_;
  zmq::socket_t router_;  // used by the I/O thread only (after Listen)
  std::string address_;
  Receiver receiver_;
  std::thread thread_;
  std::atomic<bool> closed_{false};
  std::once_flag send_buffer_checked_;  // WarnIfTheKernelCapsTheSendBuffer ran
  // Held only to find a peer (Send copies its shared_ptr out) or to change the map.
  Mutex peers_mu_;  // taken before a Peer::mu, never after
  std::map<PeerId, std::shared_ptr<Peer>> peers_ GUARDED_BY(peers_mu_);
  EndpointCounters counters_;
  Mutex linger_mu_;
  Clock::time_point linger_until_ GUARDED_BY(linger_mu_){};  // the latest Flush deadline
};

}  // namespace

std::string WithCurveKey(const std::string& address, const std::string& public_key) {
  return address + kCurveMark + Z85(public_key);
}

std::unique_ptr<Endpoint> CreateZmqEndpoint(const ZmqOptions& options) {
  return std::make_unique<ZmqEndpoint>(options);
}

}  // namespace syncline
