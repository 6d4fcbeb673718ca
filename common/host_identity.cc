#include "common/host_identity.h"

#include <unistd.h>

#include <fstream>

namespace syncline {
namespace {

std::string ReadFirstLine(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

std::string LinkTarget(const char* path) {
  char buf[256];
  const ssize_t n = readlink(path, buf, sizeof(buf) - 1);
  return n > 0 ? std::string(buf, n) : "";
}

}  // namespace

std::string HostIdentity() {
  const std::string boot = ReadFirstLine("/proc/sys/kernel/random/boot_id");
  const std::string net = LinkTarget("/proc/self/ns/net"), pid = LinkTarget("/proc/self/ns/pid");
  if (boot.empty() || net.empty() || pid.empty()) return "";  // unknown: never colocated
  return boot + "/" + net + "/" + pid;
}

}  // namespace syncline
