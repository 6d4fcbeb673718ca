// ZmqOptions::tcp_send_buffer_bytes: the kernel send buffer of a tcp://
// connection to another machine is the one asked for, and a connection over
// loopback keeps the kernel's own. The sockets are found among this
// process's file descriptors by their peer's address.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <optional>
#include <string>

#include "tests/unit/transport/collector.h"
#include "transport/wire.h"
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

TEST(ZmqSendBufferTest, AConnectionToAnotherMachineGetsTheBufferAskedForAndLoopbackKeepsTheKernels) {
  const std::optional<std::string> ip = NonLoopbackAddress();
  if (!ip) GTEST_SKIP() << "this machine has no IPv4 address other than loopback";
  ZmqOptions options;
  options.tcp_send_buffer_bytes = 20000;  // Linux keeps twice what is asked, for its bookkeeping
  auto sender = CreateZmqEndpoint(options);
  const std::optional<int> remote = SendBufferTowards(*ip, *sender, 1);
  ASSERT_TRUE(remote.has_value()) << "no connection to " << *ip << " found";
  EXPECT_EQ(*remote, 2 * 20000);
  const std::optional<int> loopback = SendBufferTowards("127.0.0.1", *sender, 2);
  ASSERT_TRUE(loopback.has_value()) << "no connection to 127.0.0.1 found";
  EXPECT_NE(*loopback, 2 * 20000);
  sender->Close();
}

TEST(ZmqSendBufferTest, ZeroLeavesTheKernelsAutotuning) {
  const std::optional<std::string> ip = NonLoopbackAddress();
  if (!ip) GTEST_SKIP() << "this machine has no IPv4 address other than loopback";
  auto sender = CreateZmqEndpoint();  // tcp_send_buffer_bytes = 0
  const std::optional<int> remote = SendBufferTowards(*ip, *sender, 1);
  ASSERT_TRUE(remote.has_value()) << "no connection to " << *ip << " found";
  EXPECT_NE(*remote, 2 * 20000);
  sender->Close();
}

}  // namespace
}  // namespace syncline
