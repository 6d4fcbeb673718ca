// ZmqOptions::tcp_send_buffer_bytes: the kernel send buffer of a tcp://
// connection to another machine is the one asked for, and a connection to
// this host (LeadsToThisHost, however its address is spelled) keeps the
// kernel's; the setting reaches a node's endpoints; the kernel's cap on it
// is found. The sockets are found among this process's file descriptors by
// their peer's address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <functional>
#include <limits>
#include <optional>
#include <sstream>
#include <string>

#include "common/settings.h"
#include "tests/unit/transport/collector.h"
#include "transport/factory.h"
#include "transport/wire.h"
#include "transport/zmq/kernel_send_buffer.h"
#include "transport/zmq/this_host.h"
#include "transport/zmq/zmq_endpoint.h"

namespace syncline {
namespace {

using testing::Collector;

// An IPv4 address of this machine other than loopback, if it has one.
std::optional<std::string> NonLoopbackAddress() {
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return std::nullopt;
  std::optional<std::string> found;
  for (ifaddrs* a = all; a && !found; a = a->ifa_next) {
    if (!a->ifa_addr || a->ifa_addr->sa_family != AF_INET) continue;
    const auto* in = reinterpret_cast<const sockaddr_in*>(a->ifa_addr);
    if ((ntohl(in->sin_addr.s_addr) >> 24) == 127) continue;
    char text[INET_ADDRSTRLEN];
    if (inet_ntop(AF_INET, &in->sin_addr, text, sizeof(text))) found = text;
  }
  freeifaddrs(all);
  return found;
}

int PortOf(const std::string& address) { return std::stoi(address.substr(address.rfind(':') + 1)); }

// SO_SNDBUF of this process's TCP socket connected to `ip`:`port` (the
// connecting side), if there is one.
std::optional<int> SendBufferOfConnectionTo(const std::string& ip, int port) {
  for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
    const int fd = std::stoi(entry.path().filename().string());
    struct stat st {};
    if (fstat(fd, &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_in peer{};
    socklen_t length = sizeof(peer);
    if (getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &length) != 0 || peer.sin_family != AF_INET) continue;
    char text[INET_ADDRSTRLEN];
    if (!inet_ntop(AF_INET, &peer.sin_addr, text, sizeof(text)) || text != ip || ntohs(peer.sin_port) != port)
      continue;
    int bytes = 0;
    length = sizeof(bytes);
    if (getsockopt(fd, SOL_SOCKET, SO_SNDBUF, &bytes, &length) == 0) return bytes;
  }
  return std::nullopt;
}

// Listens at `ip`, has `sender` connect and deliver one message (so that
// the connection exists), and returns the SO_SNDBUF of its connection.
std::optional<int> SendBufferTowards(const std::string& ip, Endpoint& sender, PeerId peer) {
  Collector in;
  auto listener = CreateZmqEndpoint();
  auto address = listener->Listen("tcp://" + ip + ":0", in.receiver());
  if (!address.ok()) return std::nullopt;
  if (!sender.Connect(peer, *address).ok()) return std::nullopt;
  if (!sender.Send(peer, MakeMessage(proto::HEARTBEAT, 3), Deadline::AfterMs(5000)).ok()) return std::nullopt;
  if (!in.WaitFor(1, 5000)) return std::nullopt;
  return SendBufferOfConnectionTo(ip, PortOf(*address));
}

// The kernel's default send buffer for a new TCP socket (the middle of
// net.ipv4.tcp_wmem), where autotuning starts.
int KernelsDefaultSendBuffer() {
  std::ifstream in("/proc/sys/net/ipv4/tcp_wmem");
  int least = 0, initial = 0;
  in >> least >> initial;
  return initial;
}

ZmqOptions CallingEveryAddressAnotherMachines(int send_buffer_bytes) {
  ZmqOptions options;
  options.tcp_send_buffer_bytes = send_buffer_bytes;
  options.leads_to_this_host = [](const std::string&) { return false; };
  return options;
}

TEST(ZmqSendBufferTest, AConnectionToAnotherMachineGetsTheBufferAskedFor) {
  // Linux keeps twice what is asked, for its bookkeeping.
  auto sender = CreateZmqEndpoint(CallingEveryAddressAnotherMachines(20000));
  const std::optional<int> remote = SendBufferTowards("127.0.0.1", *sender, 1);
  ASSERT_TRUE(remote.has_value()) << "no connection to 127.0.0.1 found";
  EXPECT_EQ(*remote, 2 * 20000);
  sender->Close();
}

TEST(ZmqSendBufferTest, AConnectionToThisHostKeepsTheKernelsByLoopbackOrByItsOwnAddress) {
  ZmqOptions options;
  options.tcp_send_buffer_bytes = 20000;
  auto sender = CreateZmqEndpoint(options);
  const std::optional<int> loopback = SendBufferTowards("127.0.0.1", *sender, 1);
  ASSERT_TRUE(loopback.has_value()) << "no connection to 127.0.0.1 found";
  EXPECT_NE(*loopback, 2 * 20000);
  // A worker and a server on one host under pslaunch --hosts reach each
  // other at the host's own address.
  if (const std::optional<std::string> ip = NonLoopbackAddress()) {
    const std::optional<int> own = SendBufferTowards(*ip, *sender, 2);
    ASSERT_TRUE(own.has_value()) << "no connection to " << *ip << " found";
    EXPECT_NE(*own, 2 * 20000) << *ip << " is this host's";
  }
  sender->Close();
}

TEST(ZmqSendBufferTest, ZeroLeavesTheKernelsAutotuning) {
  auto sender = CreateZmqEndpoint(CallingEveryAddressAnotherMachines(0));
  const std::optional<int> remote = SendBufferTowards("127.0.0.1", *sender, 1);
  ASSERT_TRUE(remote.has_value()) << "no connection to 127.0.0.1 found";
  // Setting 0 would give the kernel's least (a few KiB); untouched, the
  // buffer starts at the default and grows from there.
  EXPECT_GE(*remote, KernelsDefaultSendBuffer());
  sender->Close();
}

TEST(ZmqSendBufferTest, TheSettingReachesTheEndpointsANodeMakes) {
  Result<Settings> defaults = Settings::FromEnvironment({});
  ASSERT_TRUE(defaults.ok()) << defaults.status().ToString();
  EXPECT_EQ(NodeTransportOptions(*defaults).tcp_send_buffer_bytes, 32 << 10);
  Result<Settings> set = Settings::FromEnvironment({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "65536"}});
  ASSERT_TRUE(set.ok()) << set.status().ToString();
  EXPECT_EQ(NodeTransportOptions(*set).tcp_send_buffer_bytes, 65536);
  Result<Settings> off = Settings::FromEnvironment({{"SYNCLINE_TCP_SEND_BUFFER_BYTES", "0"}});
  ASSERT_TRUE(off.ok()) << off.status().ToString();
  EXPECT_EQ(NodeTransportOptions(*off).tcp_send_buffer_bytes, 0);
}

// net.core.wmem_max, where it is readable and below Linux's own ceiling of
// INT_MAX / 2 (a larger value caps nothing).
std::optional<int> KernelsSendBufferCap() {
  std::ifstream in("/proc/sys/net/core/wmem_max");
  long long cap = 0;
  if (!(in >> cap) || cap < 20000 || cap > std::numeric_limits<int>::max() / 4) return std::nullopt;
  return static_cast<int>(cap);
}

TEST(KernelSendBufferTest, AskingWithinTheCapGetsWhatWasAskedAndAboveItGetsTheCap) {
  const std::optional<int> cap = KernelsSendBufferCap();
  if (!cap) GTEST_SKIP() << "net.core.wmem_max is not readable here, or caps nothing a test can ask";
  EXPECT_EQ(KernelSendBufferFor(20000), 20000);
  EXPECT_EQ(KernelSendBufferFor(*cap), *cap);
  EXPECT_EQ(KernelSendBufferFor(2 * *cap), *cap) << "net.core.wmem_max = " << *cap;
}

// What the endpoint logs while `connect` runs.
std::string LogOf(const std::function<void()>& connect) {
  std::ostringstream log;
  auto previous = spdlog::default_logger();
  spdlog::set_default_logger(
      std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::ostream_sink_mt>(log)));
  connect();
  spdlog::set_default_logger(previous);
  return log.str();
}

TEST(KernelSendBufferTest, AnEndpointAskedForMoreThanTheCapWarnsOnceAndOneWithinItDoesNot) {
  const std::optional<int> cap = KernelsSendBufferCap();
  if (!cap) GTEST_SKIP() << "net.core.wmem_max is not readable here, or caps nothing a test can ask";
  for (const int asked : {2 * *cap, 20000}) {
    auto sender = CreateZmqEndpoint(CallingEveryAddressAnotherMachines(asked));
    const std::string log = LogOf([&] {
      for (PeerId peer : {1, 2}) ASSERT_TRUE(sender->Connect(peer, "tcp://127.0.0.1:1").ok());
    });
    if (asked > *cap) {
      EXPECT_EQ(std::count(log.begin(), log.end(), '\n'), 1) << log;
      EXPECT_NE(log.find("SYNCLINE_TCP_SEND_BUFFER_BYTES=" + std::to_string(asked)), std::string::npos) << log;
      EXPECT_NE(log.find("get " + std::to_string(*cap) + " bytes"), std::string::npos) << log;
      EXPECT_NE(log.find("net.core.wmem_max"), std::string::npos) << log;
    } else {
      EXPECT_EQ(log, "") << "asked for " << asked << " within net.core.wmem_max = " << *cap;
    }
    sender->Close();
  }
}

TEST(LeadsToThisHostTest, LoopbackThisHostsAddressesAndNamesLeadHere) {
  for (const char* address : {"tcp://127.0.0.1:5000", "tcp://127.9.8.7:5000", "tcp://[::1]:5000",
                              "tcp://localhost:5000", "tcp://[::ffff:127.0.0.1]:5000", "tcp://198.51.100.7;127.0.0.1:5000"})
    EXPECT_TRUE(LeadsToThisHost(address)) << address;
  if (const std::optional<std::string> ip = NonLoopbackAddress())
    EXPECT_TRUE(LeadsToThisHost("tcp://" + *ip + ":5000")) << *ip;
  char name[256] = {};
  addrinfo* resolved = nullptr;
  if (gethostname(name, sizeof(name) - 1) == 0 && getaddrinfo(name, nullptr, nullptr, &resolved) == 0) {
    freeaddrinfo(resolved);
    EXPECT_TRUE(LeadsToThisHost(std::string("tcp://") + name + ":5000")) << name;
  }
}

TEST(LeadsToThisHostTest, OtherMachinesAndOtherKindsOfAddressDoNot) {
  // An address set aside for documentation (RFC 5737) that no interface
  // here holds (sandboxes use these ranges too).
  std::string other;
  for (const char* candidate : {"198.51.100.7", "203.0.113.7", "192.0.2.77"})
    if (!LeadsToThisHost(std::string("tcp://") + candidate + ":5000")) other = candidate;
  ASSERT_FALSE(other.empty()) << "this machine holds every candidate address";
  for (const std::string& address : {"tcp://" + other + ":5000", std::string("tcp://[2001:db8::1]:5000"),
                                     "tcp://127.0.0.1;" + other + ":5000", std::string("tcp://127.0.0.1"),
                                     std::string("ipc:///tmp/syncline-socket"), std::string("inproc://127.0.0.1:5000"),
                                     std::string()})
    EXPECT_FALSE(LeadsToThisHost(address)) << address;
}

}  // namespace
}  // namespace syncline
