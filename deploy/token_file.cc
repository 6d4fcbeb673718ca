#include "deploy/token_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace syncline::deploy {

Result<std::string> ReadTokenFile(const std::string& path) {
  constexpr size_t kMaxToken = 4096;
  auto unreadable = [&path](const char* why) {
    return InvalidArgument("--token-file " + path + ": cannot read the job token: " + why);
  };
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return unreadable(std::strerror(errno));
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    close(fd);
    return unreadable("not a regular file");
  }
  std::string token;
  char buf[1024];
  ssize_t n = 0;
  while (token.size() <= kMaxToken && (n = read(fd, buf, sizeof(buf))) != 0) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    token.append(buf, static_cast<size_t>(n));
  }
  const int read_errno = errno;
  close(fd);
  if (n < 0) return unreadable(std::strerror(read_errno));
  if (!token.empty() && token.back() == '\n') token.pop_back();
  if (!token.empty() && token.back() == '\r') token.pop_back();
  if (token.empty()) return InvalidArgument("--token-file " + path + ": the file is empty (no job token)");
  if (token.size() > kMaxToken)
    return InvalidArgument("--token-file " + path + ": longer than " + std::to_string(kMaxToken) +
                           " bytes; a job token is one line");
  if (token.find_first_of("\r\n") != std::string::npos)
    return InvalidArgument("--token-file " + path + ": holds more than one line; a job token is one line");
  return token;
}

}  // namespace syncline::deploy
