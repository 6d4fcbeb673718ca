// DescribeReachability: what a connection attempt to an address finds.
#include "transport/reachability.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <string>

namespace syncline {
namespace {

// A TCP socket listening on a free loopback port; closed at destruction.
struct Listener {
  int fd = -1;
  int port = 0;
  Listener() {
    fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd, 4);
    socklen_t len = sizeof(a);
    getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Listener() { close(fd); }
};

TEST(Reachability, ListeningTcpAddressAcceptsConnections) {
  Listener l;
  EXPECT_EQ(DescribeReachability("tcp://127.0.0.1:" + std::to_string(l.port)), "accepts connections");
  EXPECT_EQ(DescribeReachability("tcp://localhost:" + std::to_string(l.port)), "accepts connections");
}

TEST(Reachability, ClosedTcpPortIsRefused) {
  int port = 0;
  {
    Listener l;  // a port that was free a moment ago, and is closed again
    port = l.port;
  }
  EXPECT_EQ(DescribeReachability("tcp://127.0.0.1:" + std::to_string(port)), "connection refused");
}

TEST(Reachability, UnknownHostSaysItDoesNotResolve) {
  EXPECT_NE(DescribeReachability("tcp://no-such-host.invalid:9000").find("does not resolve"), std::string::npos);
}

TEST(Reachability, IpcPathWithoutSocket) {
  EXPECT_EQ(DescribeReachability("ipc:///tmp/syncline-reachability-test-no-such-socket"),
            "no such file or directory");
}

TEST(Reachability, ListeningIpcSocketAcceptsConnections) {
  const std::string path = "/tmp/syncline-reachability-test-" + std::to_string(getpid());
  unlink(path.c_str());
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un a{};
  a.sun_family = AF_UNIX;
  std::memcpy(a.sun_path, path.data(), path.size());
  ASSERT_EQ(0, bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)));
  ASSERT_EQ(0, listen(fd, 4));
  EXPECT_EQ(DescribeReachability("ipc://" + path), "accepts connections");
  close(fd);
  unlink(path.c_str());
}

TEST(Reachability, AddressKindsItCannotProbeGiveNothing) {
  EXPECT_EQ(DescribeReachability("ucx://127.0.0.1:9000"), "");
  EXPECT_EQ(DescribeReachability("inproc://x"), "");
  EXPECT_EQ(DescribeReachability("tcp://no-port"), "");
  EXPECT_EQ(DescribeReachability("ipc://@abstract-name"), "");
}

}  // namespace
}  // namespace syncline
