#include "transport/reachability.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

namespace syncline {
namespace {

// The outcome of a non-blocking connect on `fd`, bounded by timeout_ms.
std::string ConnectOutcome(int fd, const sockaddr* addr, socklen_t len, int timeout_ms) {
  fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
  int err = 0;
  if (connect(fd, addr, len) != 0) {
    if (errno != EINPROGRESS) {
      err = errno;
    } else {
      pollfd p{fd, POLLOUT, 0};
      int ready;
      do {
        ready = poll(&p, 1, timeout_ms);  // a signal may cut the wait short: wait again
      } while (ready < 0 && errno == EINTR);
      if (ready != 1) return "timed out after " + std::to_string(timeout_ms) + " ms";
      socklen_t size = sizeof(err);
      getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &size);
    }
  }
  if (err == 0) return "accepts connections";
  std::string text = std::strerror(err);
  for (char& c : text) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return text;
}

std::string ProbeTcp(const std::string& host_port, int timeout_ms) {
  const size_t colon = host_port.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = host_port.substr(0, colon);
  if (host.size() > 1 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (int rc = getaddrinfo(host.c_str(), host_port.substr(colon + 1).c_str(), &hints, &found); rc != 0)
    return std::string("its host name does not resolve (") + gai_strerror(rc) + ")";
  std::string outcome;
  for (addrinfo* a = found; a != nullptr && outcome != "accepts connections"; a = a->ai_next) {
    int fd = socket(a->ai_family, a->ai_socktype, a->ai_protocol);
    if (fd < 0) continue;
    outcome = ConnectOutcome(fd, a->ai_addr, a->ai_addrlen, timeout_ms);
    close(fd);
  }
  freeaddrinfo(found);
  return outcome;
}

std::string ProbeIpc(const std::string& path, int timeout_ms) {
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  // Abstract sockets (ZeroMQ's ipc://@name) are not probed.
  if (path.empty() || path[0] == '@' || path.size() >= sizeof(addr.sun_path)) return "";
  std::memcpy(addr.sun_path, path.data(), path.size());
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  if (fd < 0) return "";
  std::string outcome = ConnectOutcome(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr), timeout_ms);
  close(fd);
  return outcome;
}

}  // namespace

std::string DescribeReachability(const std::string& address, int timeout_ms) {
  if (address.rfind("tcp://", 0) == 0) return ProbeTcp(address.substr(6), timeout_ms);
  if (address.rfind("ipc://", 0) == 0) return ProbeIpc(address.substr(6), timeout_ms);
  return "";
}

}  // namespace syncline
