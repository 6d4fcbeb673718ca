#include "deploy/remote_hosts.h"

#include <charconv>

namespace syncline::deploy {
namespace {

Status CheckHostName(const std::string& target, const std::string& where) {
  if (target.empty()) return InvalidArgument(where + "an empty host name");
  for (char c : target) {
    // Anything that could start an ssh option or split a word is refused here
    // rather than misread by ssh.
    if (c == ' ' || c == '\t' || c == '\'' || c == '"' || c == '\\' || c == '$' || c == '`' || c == ';')
      return InvalidArgument(where + "'" + target + "' is not a host name");
  }
  if (target.front() == '-') return InvalidArgument(where + "'" + target + "' is not a host name");
  size_t at = target.rfind('@');
  if (at != std::string::npos && (at == 0 || at + 1 == target.size()))
    return InvalidArgument(where + "'" + target + "' is not [user@]host");
  return Status::Ok();
}

HostEntry MakeEntry(const std::string& target, int slots) {
  size_t at = target.rfind('@');
  return HostEntry{target, at == std::string::npos ? target : target.substr(at + 1), slots};
}

}  // namespace

Result<std::vector<HostEntry>> ParseHostList(const std::string& text) {
  std::vector<HostEntry> hosts;
  size_t start = 0;
  while (true) {
    size_t comma = text.find(',', start);
    std::string name = text.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    // "h1, h2" as a user types it.
    name.erase(0, name.find_first_not_of(" \t"));
    name.erase(name.find_last_not_of(" \t") + 1);
    SYNCLINE_RETURN_IF_ERROR(CheckHostName(name, "--hosts: "));
    hosts.push_back(MakeEntry(name, 0));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return hosts;
}

Result<std::vector<HostEntry>> ParseHostfile(const std::string& text, const std::string& origin) {
  std::vector<HostEntry> hosts;
  size_t line_start = 0;
  for (int line_no = 1; line_start < text.size(); ++line_no) {
    size_t nl = text.find('\n', line_start);
    std::string line = text.substr(line_start, nl == std::string::npos ? std::string::npos : nl - line_start);
    line_start = nl == std::string::npos ? text.size() : nl + 1;
    if (size_t hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::vector<std::string> fields;
    size_t i = 0;
    while (i < line.size()) {
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t' || line[i] == '\r')) ++i;
      size_t j = i;
      while (j < line.size() && line[j] != ' ' && line[j] != '\t' && line[j] != '\r') ++j;
      if (j > i) fields.push_back(line.substr(i, j - i));
      i = j;
    }
    if (fields.empty()) continue;
    const std::string where = origin + ":" + std::to_string(line_no) + ": ";
    SYNCLINE_RETURN_IF_ERROR(CheckHostName(fields[0], where));
    int slots = 0;
    for (size_t f = 1; f < fields.size(); ++f) {
      const std::string& field = fields[f];
      const char* digits = field.data() + 6;
      const char* end = field.data() + field.size();
      auto parsed = field.rfind("slots=", 0) == 0 ? std::from_chars(digits, end, slots)
                                                  : std::from_chars_result{digits, std::errc::invalid_argument};
      if (parsed.ec != std::errc() || parsed.ptr != end || slots < 1)
        return InvalidArgument(where + "'" + field + "' is not slots=K with K >= 1");
    }
    hosts.push_back(MakeEntry(fields[0], slots));
  }
  if (hosts.empty()) return InvalidArgument(origin + ": no hosts in it");
  return hosts;
}

Result<Placement> PlaceProcesses(const std::vector<HostEntry>& hosts, int num_servers, int num_workers) {
  const int h = static_cast<int>(hosts.size());
  long long capacity = 0;
  bool capped = true;
  for (const auto& e : hosts) {
    capped = capped && e.slots > 0;
    capacity += e.slots;
  }
  const long long needed = 1LL + num_servers + num_workers;
  if (capped && capacity < needed)
    return InvalidArgument(std::to_string(needed) + " processes (1 scheduler, " + std::to_string(num_servers) +
                           " servers, " + std::to_string(num_workers) + " workers) do not fit in the " +
                           std::to_string(capacity) + " slots of the hosts");
  std::vector<int> used(hosts.size(), 0);
  auto has_room = [&](int e) { return hosts[e].slots == 0 || used[e] < hosts[e].slots; };
  // The first entry at or after `preferred` with room (the capacity check
  // above guarantees one exists).
  auto take = [&](int preferred) {
    for (int k = 0; k < h; ++k) {
      int e = (preferred + k) % h;
      if (has_room(e)) {
        ++used[e];
        return e;
      }
    }
    return -1;
  };
  Placement p;
  p.scheduler = take(0);
  for (int i = 0; i < num_servers; ++i) p.servers.push_back(take(i % h));
  for (int r = 0; r < num_workers; ++r) p.workers.push_back(take(r % h));
  return p;
}

}  // namespace syncline::deploy
