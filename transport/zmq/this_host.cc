#include "transport/zmq/this_host.h"

#include <ifaddrs.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <cstring>
#include <optional>
#include <vector>

namespace syncline {
namespace {

// An IPv4 or IPv6 address without its port, compared by its bytes.
struct IpAddress {
  int family = AF_UNSPEC;
  unsigned char bytes[16] = {};
  bool operator==(const IpAddress& other) const {
    const size_t size = family == AF_INET ? 4 : 16;
    return family == other.family && std::memcmp(bytes, other.bytes, size) == 0;
  }
};

std::optional<IpAddress> FromSockaddr(const sockaddr* sa) {
  IpAddress ip;
  if (!sa) return std::nullopt;
  if (sa->sa_family == AF_INET) {
    ip.family = AF_INET;
    std::memcpy(ip.bytes, &reinterpret_cast<const sockaddr_in*>(sa)->sin_addr, 4);
  } else if (sa->sa_family == AF_INET6) {
    ip.family = AF_INET6;
    std::memcpy(ip.bytes, &reinterpret_cast<const sockaddr_in6*>(sa)->sin6_addr, 16);
  } else {
    return std::nullopt;
  }
  return ip;
}

bool IsLoopback(const IpAddress& ip) {
  if (ip.family == AF_INET) return ip.bytes[0] == 127;
  static const unsigned char kV6Loopback[16] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  // ::ffff:127.x.y.z, the IPv4-mapped spelling of loopback, too.
  static const unsigned char kV4MappedPrefix[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return std::memcmp(ip.bytes, kV6Loopback, 16) == 0 ||
         (std::memcmp(ip.bytes, kV4MappedPrefix, 12) == 0 && ip.bytes[12] == 127);
}

std::vector<IpAddress> InterfaceAddresses() {
  std::vector<IpAddress> found;
  ifaddrs* all = nullptr;
  if (getifaddrs(&all) != 0) return found;
  for (const ifaddrs* a = all; a; a = a->ifa_next)
    if (auto ip = FromSockaddr(a->ifa_addr)) found.push_back(*ip);
  freeifaddrs(all);
  return found;
}

// The addresses `host` stands for: itself if it is a literal (IPv6 without
// its brackets), else what the resolver gives.
std::vector<IpAddress> Resolve(const std::string& host) {
  std::vector<IpAddress> found;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* results = nullptr;
  if (getaddrinfo(host.c_str(), nullptr, &hints, &results) != 0) return found;
  for (const addrinfo* r = results; r; r = r->ai_next)
    if (auto ip = FromSockaddr(r->ai_addr)) found.push_back(*ip);
  freeaddrinfo(results);
  return found;
}

// "tcp://[::1]:5000" -> "::1"; "tcp://10.0.0.1:5000" -> "10.0.0.1";
// "tcp://src;dst:5000" (ZeroMQ's source-address form) -> "dst". Empty if
// the address is not tcp:// or has no port.
std::string HostOf(const std::string& address) {
  const std::string prefix = "tcp://";
  if (address.rfind(prefix, 0) != 0) return "";
  std::string rest = address.substr(prefix.size());
  if (const size_t source = rest.find(';'); source != std::string::npos) rest = rest.substr(source + 1);
  const size_t colon = rest.rfind(':');
  if (colon == std::string::npos) return "";
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return host;
}

}  // namespace

bool LeadsToThisHost(const std::string& tcp_address) {
  const std::string host = HostOf(tcp_address);
  if (host.empty()) return false;
  const std::vector<IpAddress> targets = Resolve(host);
  if (targets.empty()) return false;
  const std::vector<IpAddress> mine = InterfaceAddresses();
  for (const IpAddress& target : targets) {
    if (IsLoopback(target)) return true;
    for (const IpAddress& own : mine)
      if (own == target) return true;
  }
  return false;
}

}  // namespace syncline
