// The backends the conformance suite runs over, and the fixture that starts
// their endpoints. Each backend states its contract (endpoint_conformance.h)
// and, where it has a wire, how to forge bytes on it.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "syncline/config.h"
#include "tests/unit/transport/endpoint_conformance.h"
#include "transport/loopback/loopback_network.h"
#include "transport/shm/shm_endpoint.h"
#include "transport/zmq/zmq_endpoint.h"
#if SYNCLINE_HAVE_UCX
#include "tests/unit/transport/ucx_raw_client.h"
#include "tests/unit/transport/ucx_scoped_tls.h"
#include "transport/ucx/ucx_endpoint.h"
#endif

namespace syncline::testing {

std::function<std::unique_ptr<Endpoint>(PeerId, std::unique_ptr<Endpoint>)> g_authenticate;

namespace {

int Counter() {
  static std::atomic<int> n{0};
  return n++;
}

// A loopback TCP port nobody listens at (bound, then freed).
int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(sa);
  if (fd < 0 || bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len) != 0) {
    ADD_FAILURE() << "cannot reserve a port: " << strerror(errno);
  }
  close(fd);
  return ntohs(sa.sin_port);
}

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(gen());
  return s;
}

// Writes `bytes` on a plain stream socket to a tcp:// or ipc:// address, then hangs up.
void WriteRawStream(const std::string& address, const std::string& bytes) {
  int fd = -1;
  if (address.rfind("ipc://", 0) == 0) {
    sockaddr_un su{};
    su.sun_family = AF_UNIX;
    std::strncpy(su.sun_path, address.c_str() + 6, sizeof(su.sun_path) - 1);
    fd = socket(AF_UNIX, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&su), sizeof(su)), 0) << strerror(errno);
  } else {
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    sa.sin_port = htons(static_cast<uint16_t>(std::stoi(address.substr(address.rfind(':') + 1))));
    fd = socket(AF_INET, SOCK_STREAM, 0);
    ASSERT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof(sa)), 0) << strerror(errno);
  }
  // The endpoint may hang up mid-write; that is fine (and must not SIGPIPE us).
  (void)send(fd, bytes.data(), bytes.size(), MSG_NOSIGNAL);
  close(fd);
}

// ---- loopback ----

class LoopbackBackend : public Backend {
 public:
  Contract contract() const override {
    Contract c;
    c.receives_writable = false;
    c.shares_sender_memory = true;
    c.flush_waits_for_stuck_peer = false;
    return c;
  }
  std::unique_ptr<Endpoint> Make(const Tuning& tuning) override {
    LoopbackOptions options;
    if (tuning.small_queue) options.inbox_messages = 16;
    return net_.CreateEndpoint(options);
  }
  std::string ListenSpec() override { return "loop://node-" + std::to_string(Counter()); }
  std::string AbsentAddress() override { return "loop://nobody"; }

 private:
  LoopbackNetwork net_;
};

// ---- zmq (tcp, ipc) ----

// A DEALER socket of its own, as any process on the network could open.
class ZmqRawPeer : public RawPeer {
 public:
  explicit ZmqRawPeer(const std::string& address) : address_(address), dealer_(ctx_, zmq::socket_type::dealer) {
    dealer_.set(zmq::sockopt::linger, 0);
    dealer_.connect(address);
  }
  void Send(const std::string& header, const std::vector<std::string>& payloads) override {
    dealer_.send(zmq::buffer(header), payloads.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
    for (size_t i = 0; i < payloads.size(); ++i)
      dealer_.send(zmq::buffer(payloads[i]), i + 1 < payloads.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
  }
  int SendWireGarbage() override {
    dealer_.send(zmq::message_t(), zmq::send_flags::none);  // an empty message: no header frame
    return 1;
  }
  void SendStreamGarbage() override {
    // Random bytes, a ZMTP signature then random bytes, one claiming a huge
    // frame, and a connection closed at once.
    const std::string garbage = RandomBytes(4096, 7);
    const std::string zmtp("\xff\0\0\0\0\0\0\0\x01\x7f", 10);
    WriteRawStream(address_, garbage);
    WriteRawStream(address_, zmtp + garbage);
    WriteRawStream(address_, zmtp + std::string("\x03\x00NULL", 6) + std::string(48, '\0') +
                                 std::string("\x06\xff\xff\xff\xff\xff\xff\xff\xff", 9));
    WriteRawStream(address_, "");
  }

 private:
  std::string address_;
  zmq::context_t ctx_{1};
  zmq::socket_t dealer_;
};

class ZmqBackend : public Backend {
 public:
  explicit ZmqBackend(std::string transport) : transport_(std::move(transport)) {}
  // ZeroMQ leaves an ipc:// socket file behind when its endpoint closes; the
  // test removes the ones it named (every endpoint is gone by now).
  ~ZmqBackend() override {
    for (const std::string& path : ipc_paths_) unlink(path.c_str());
  }
  Contract contract() const override {
    Contract c;
    c.queues_for_absent_peer = true;
    c.tcp_port = transport_ == "tcp";
    return c;
  }
  std::unique_ptr<Endpoint> Make(const Tuning& tuning) override {
    ZmqOptions options;
    if (tuning.small_queue) options.send_queue_messages = options.receive_queue_messages = 16;
    return CreateZmqEndpoint(options);
  }
  std::string ListenSpec() override { return transport_ == "tcp" ? "tcp://127.0.0.1:0" : FreshIpc(); }
  std::string AbsentAddress() override {
    return transport_ == "tcp" ? "tcp://127.0.0.1:" + std::to_string(FreePort()) : FreshIpc();
  }
  std::unique_ptr<RawPeer> Raw(const std::string& address) override { return std::make_unique<ZmqRawPeer>(address); }

 private:
  std::string FreshIpc() {
    const std::string path =
        "/tmp/syncline-conformance-" + std::to_string(getpid()) + "-" + std::to_string(Counter()) + ".sock";
    ipc_paths_.push_back(path);
    return "ipc://" + path;
  }
  std::string transport_;
  std::vector<std::string> ipc_paths_;
};

// ---- shared memory (ShmEndpoint over zmq tcp, peers colocated) ----

// The inner socket's raw peer, plus forged shared-memory references.
class ShmRawPeer : public ZmqRawPeer {
 public:
  using ZmqRawPeer::ZmqRawPeer;
  int SendWireGarbage() override {
    int rejected = ZmqRawPeer::SendWireGarbage();
    // A reference to a segment that does not exist.
    Message ghost = Numbered(50, 0);
    ghost.header.set_byte_length(8);
    proto::ShmRef* ref = ghost.header.mutable_shm();
    ref->set_pid(getpid());
    ref->set_fd(987654);
    ref->set_segment_bytes(1 << 20);
    ref->add_frame_lengths(8);
    Send(EncodeHeader(ghost.header), {});
    // Node 1 (marked colocated with this process) naming another process.
    ghost.header.set_sender(1);
    ref->set_pid(1);
    Send(EncodeHeader(ghost.header), {});
    return rejected + 2;
  }
};

class ShmBackend : public ZmqBackend {
 public:
  ShmBackend() : ZmqBackend("tcp") {}
  Contract contract() const override {
    Contract c = ZmqBackend::contract();
    c.receives_writable = false;  // views of the sender's segment
    return c;
  }
  std::unique_ptr<Endpoint> Make(const Tuning& tuning) override {
    ShmOptions options;
    options.outbox_bytes = tuning.small_queue ? size_t{4} << 20 : size_t{160} << 20;  // room for 64 MiB frames
    return std::make_unique<ShmEndpoint>(ZmqBackend::Make(tuning), options);
  }
  void Colocate(Endpoint& e, PeerId peer) override {
    auto* shm = dynamic_cast<ShmEndpoint*>(&e);
    ASSERT_NE(shm, nullptr);
    shm->MarkColocated(peer, getpid());
    shm->PeersComplete();  // the suite's nodes know their peers from the start
  }
  std::unique_ptr<RawPeer> Raw(const std::string& address) override { return std::make_unique<ShmRawPeer>(address); }
};

// ---- UCX ----
#if SYNCLINE_HAVE_UCX

class UcxRawPeer : public RawPeer {
 public:
  explicit UcxRawPeer(const std::string& address) : address_(address), client_(address) {}
  void Send(const std::string& header, const std::vector<std::string>& payloads) override {
    client_.SendFrames(header, payloads);
  }
  int SendWireGarbage() override {
    const std::string eight(8, 'x');
    client_.SendAm("\xff\xfe garbage, not a preamble", "");                                // not a preamble
    client_.SendAm("", eight);                                                              // no AM header at all
    client_.SendAm(UcxRawClient::AmHeader(Push(1, {Pattern(8, 1)})), eight + "yy");         // frames miss data
    client_.SendAm(UcxRawClient::AmHeader(MakeMessage(proto::HEARTBEAT, 9)).substr(0, 15), "");  // cut preamble
    client_.SendAm("\xff\xfe garbage", std::string(2 << 20, 'z'), UCP_AM_SEND_FLAG_RNDV);   // large garbage
    return 5;
  }
  void SendStreamGarbage() override {
    // Plain TCP bytes to the listener's port, where UCX's connection manager expects its own handshake.
    WriteRawStream(address_, RandomBytes(4096, 7));
    WriteRawStream(address_, "");
  }
  void Flush() override { client_.Flush(); }

 private:
  std::string address_;
  UcxRawClient client_;
};

class UcxBackend : public Backend {
 public:
  explicit UcxBackend(const std::string& tls) : tls_(tls) {}
  Contract contract() const override {
    Contract c;
    c.tcp_port = true;
    return c;
  }
  std::unique_ptr<Endpoint> Make(const Tuning& tuning) override {
    UcxOptions options;
    if (tuning.small_queue) options.send_queue_messages = 16;
    auto e = CreateUcxEndpoint(options);
    EXPECT_TRUE(e.ok()) << e.status().ToString();
    return e.ok() ? std::move(e).value() : nullptr;
  }
  std::string ListenSpec() override { return "ucx://127.0.0.1:0"; }
  std::string AbsentAddress() override { return "ucx://127.0.0.1:" + std::to_string(FreePort()); }
  std::unique_ptr<RawPeer> Raw(const std::string& address) override { return std::make_unique<UcxRawPeer>(address); }

 private:
  ScopedTls tls_;  // UCX reads UCX_TLS when each endpoint's context is made
};

#endif

}  // namespace

std::vector<BackendParam> AllBackends() {
  std::vector<BackendParam> all = {
      {"loopback", [] { return std::make_unique<LoopbackBackend>(); }},
      {"zmq_tcp", [] { return std::make_unique<ZmqBackend>("tcp"); }},
      {"zmq_ipc", [] { return std::make_unique<ZmqBackend>("ipc"); }},
      {"shm_over_zmq_tcp", [] { return std::make_unique<ShmBackend>(); }},
  };
#if SYNCLINE_HAVE_UCX
  // tcp and sm as the design asks; UCX's own choice and tcp,sm as well,
  // since they differ in peer-failure handling (docs/ucx.md).
  for (const char* tls : {"tcp", "sm", "default", "tcp,sm"}) {
    std::string name = std::string("ucx_") + tls;
    std::replace(name.begin(), name.end(), ',', '_');
    all.push_back({name, [tls] { return std::make_unique<UcxBackend>(tls); }});
  }
#endif
  return all;
}

// ---- the fixture ----

void EndpointConformance::SetUp() {
  backend_ = GetParam().make();
  contract_ = backend_->contract();
}

void EndpointConformance::TearDown() {
  // Both at once: a Close may take a poll interval or a drain timeout.
  std::thread close_a([this] {
    if (a_ && a_->endpoint) a_->endpoint->Close();
  });
  if (b_ && b_->endpoint) b_->endpoint->Close();
  close_a.join();
  a_.reset();
  b_.reset();
}

std::unique_ptr<Node> EndpointConformance::StartNode(PeerId id, const Tuning& tuning, Tap tap) {
  auto node = std::make_unique<Node>();
  node->id = id;
  node->endpoint = backend_->Make(tuning);
  if (node->endpoint == nullptr) {
    ADD_FAILURE() << "the backend made no endpoint";
    return node;
  }
  if (g_authenticate) node->endpoint = g_authenticate(id, std::move(node->endpoint));
  Endpoint::Receiver collect = node->in.receiver();
  auto address = node->endpoint->Listen(backend_->ListenSpec(), [tap = std::move(tap), collect](Message&& m) {
    if (tap) tap(m);
    collect(std::move(m));
  });
  EXPECT_TRUE(address.ok()) << address.status().ToString();
  if (address.ok()) node->address = *address;
  return node;
}

void EndpointConformance::Link(Node& from, const Node& to) {
  ASSERT_TRUE(from.Connect(to.id, to.address).ok());
  backend_->Colocate(*from.endpoint, to.id);
}

void EndpointConformance::Handshake(Node& x, Node& y) {
  ASSERT_TRUE(x.Send(y.id, MakeMessage(proto::HEARTBEAT, x.id), Soon()).ok());
  ASSERT_TRUE(y.Send(x.id, MakeMessage(proto::HEARTBEAT, y.id), Soon()).ok());
  ASSERT_TRUE(x.in.WaitFor(1, kWaitMs) && y.in.WaitFor(1, kWaitMs)) << "no handshake between " << x.id << " and " << y.id;
  x.in.TakeAll();
  y.in.TakeAll();
}

void EndpointConformance::StartPair(const Tuning& tuning, Tap b_tap) {
  a_ = StartNode(1, tuning);
  b_ = StartNode(2, tuning, std::move(b_tap));
  ASSERT_FALSE(a_->address.empty() || b_->address.empty());
  Link(*a_, *b_);
  Link(*b_, *a_);
  Handshake(*a_, *b_);
}

}  // namespace syncline::testing
