#include "metrics/process_metrics.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <sstream>

namespace syncline {
namespace {

// Field `index` (1-based, as in proc(5)) of /proc/self/stat, or -1.
double StatField(int index) {
  std::ifstream in("/proc/self/stat");
  std::string line;
  if (!std::getline(in, line)) return -1;
  // The command name (field 2) may hold spaces: count fields after its ')'.
  const size_t close = line.rfind(')');
  if (close == std::string::npos) return -1;
  std::istringstream rest(line.substr(close + 1));
  std::string field;
  for (int i = 3; rest >> field; ++i)
    if (i == index) return std::stod(field);
  return -1;
}

double ResidentBytes() {
  std::ifstream in("/proc/self/statm");
  double size = 0, resident = 0;
  if (!(in >> size >> resident)) return -1;
  return resident * static_cast<double>(sysconf(_SC_PAGESIZE));
}

double OpenFds() {
  DIR* dir = opendir("/proc/self/fd");
  if (!dir) return -1;
  double n = 0;
  while (const dirent* e = readdir(dir))
    if (e->d_name[0] != '.') ++n;
  closedir(dir);
  return n - 1;  // the directory's own descriptor
}

double BootTimeSeconds() {
  std::ifstream in("/proc/stat");
  std::string key;
  double value = 0;
  while (in >> key) {
    if (key == "btime" && in >> value) return value;
    in.ignore(1 << 20, '\n');
  }
  return 0;
}

}  // namespace

void AddNodeInfo(MetricsRegistry& registry, const std::string& role, int rank) {
  registry.AddGauge("syncline_node_info", "This process's role and rank in the job (always 1)",
                    {{"role", role}, {"rank", std::to_string(rank)}})
      .Set(1);
}

void AddProcessMetrics(MetricsRegistry& registry) {
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double start = BootTimeSeconds() + StatField(22) / ticks;  // fixed for the process's life
  registry.AddCollector("process_resident_memory_bytes", "Resident memory size in bytes",
                        [] { return std::vector<std::pair<MetricLabels, double>>{{{}, ResidentBytes()}}; });
  registry.AddCollector(
      "process_cpu_seconds_total", "User and system CPU time spent in seconds",
      [ticks] {
        return std::vector<std::pair<MetricLabels, double>>{{{}, (StatField(14) + StatField(15)) / ticks}};
      },
      /*counter=*/true);
  registry.AddCollector("process_open_fds", "Number of open file descriptors",
                        [] { return std::vector<std::pair<MetricLabels, double>>{{{}, OpenFds()}}; });
  registry.AddGauge("process_start_time_seconds", "Start time of the process since the Unix epoch in seconds")
      .Set(start);
}

}  // namespace syncline
