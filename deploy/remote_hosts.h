// Hosts of a multi-host pslaunch job and where each process goes.
//
// Hosts come from `--hosts h1,h2,...` or a hostfile: one host per line,
// `[user@]host [slots=K]`, `#` starts a comment, blank lines are skipped.
// `slots=K` caps the processes pslaunch puts on that entry; without it an
// entry takes any number. A host may be listed more than once: each listing
// is one more place in the rotation (and its slots add up).
//
// Placement (what mpirun's and torchrun's users expect):
//   - the scheduler on the first host;
//   - servers round-robin over the hosts, server i on host i mod H;
//   - workers round-robin over the hosts, worker r on host r mod H;
//   - an entry whose slots are used up is skipped (the next entry with room
//     takes the process); more processes than slots is an error.
// Pure functions, no OS access.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"

namespace syncline::deploy {

struct HostEntry {
  std::string target;   // what ssh is given: "[user@]host"
  std::string address;  // the host without "user@": SYNCLINE_HOST, the
                        // scheduler's address
  int slots = 0;        // cap on processes; 0 = no cap
};

// "h1,h2,user@h3" -> entries without slot caps (blanks around names are
// dropped). Empty names are errors.
Result<std::vector<HostEntry>> ParseHostList(const std::string& text);
// A hostfile's text; `origin` names it in errors ("hosts.txt:3: ...").
Result<std::vector<HostEntry>> ParseHostfile(const std::string& text, const std::string& origin);

struct Placement {
  int scheduler = 0;         // index into the entries
  std::vector<int> servers;  // servers[i]: entry of server i
  std::vector<int> workers;  // workers[r]: entry of worker r
};

// REQUIRES: hosts not empty, num_servers and num_workers >= 1.
Result<Placement> PlaceProcesses(const std::vector<HostEntry>& hosts, int num_servers, int num_workers);

}  // namespace syncline::deploy
