// syncline-test-outsider: a process outside a job, for the attack tests
// (tests/integration/test_attacks.py). It has no token; it knows only what
// any local user of the host can list: the job's process ids, their open
// descriptors (/proc/<pid>/fd, where the shared-memory outboxes show as
// memfds) and their listening addresses. It sends one node forged messages
// in the names of the job's nodes:
//   --segments-of PID  headers naming each memfd of PID: heartbeats that ask
//                      the receiver to map it, pushes naming slots with an
//                      offset out of range (a reader releases such a slot);
//   --fresh-senders N  N heartbeats, each in the name of a new node id
//                      (from --first-sender on);
//   --big-frame-mib N  one push whose payload frame is N MiB;
//   --flood-seconds S  heartbeats at full speed for S seconds, in the names
//                      of node ids 0..--senders with made-up proofs (each
//                      costs the receiver a MAC check).
// It exits 0 once every message is queued and flushed (it cannot tell what
// the receiver did: the test asks the job).
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>
#include <vector>

#include "transport/wire.h"
#include "transport/zmq/zmq_endpoint.h"

namespace syncline {
namespace {

struct Segment {
  int32_t pid;
  int32_t fd;
  uint64_t bytes;
};

// The memfds process `pid` holds open, as /proc shows them to its user.
std::vector<Segment> SegmentsOf(int32_t pid) {
  std::vector<Segment> found;
  const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
  DIR* d = opendir(dir.c_str());
  if (d == nullptr) return found;
  while (dirent* e = readdir(d)) {
    const std::string path = dir + "/" + e->d_name;
    char target[256] = {};
    const ssize_t n = readlink(path.c_str(), target, sizeof(target) - 1);
    if (n <= 0 || std::string(target, n).rfind("/memfd:", 0) != 0) continue;
    struct stat st {};
    if (stat(path.c_str(), &st) != 0) continue;
    found.push_back({pid, std::stoi(e->d_name), static_cast<uint64_t>(st.st_size)});
  }
  closedir(d);
  return found;
}

Message Naming(const Segment& s, proto::Op op, int32_t sender, uint32_t slot) {
  Message m = MakeMessage(op, sender);
  proto::ShmRef* ref = m.header.mutable_shm();
  ref->set_pid(s.pid);
  ref->set_fd(s.fd);
  ref->set_segment_bytes(s.bytes);
  ref->set_slot(slot);
  if (op == proto::PUSH) {
    m.header.set_dtype(proto::FLOAT32);
    m.header.set_byte_length(8);
    ref->set_offset(s.bytes + 4096);  // out of range
    ref->add_frame_lengths(8);
  }
  return m;
}

int Run(int argc, char** argv) {
  CLI::App app{"Sends a job's node forged messages, as a process without the job token would"};
  std::string to;
  std::vector<int32_t> pids;
  int fresh = 0;
  int senders = 8;
  app.add_option("--to", to, "The node's address (tcp://host:port)")->required();
  app.add_option("--segments-of", pids, "Process ids whose memfds to name");
  app.add_option("--fresh-senders", fresh, "Heartbeats, each in the name of a new node id");
  app.add_option("--senders", senders, "Node ids 1..N to speak for with --segments-of");
  int first_sender = 100000;
  app.add_option("--first-sender", first_sender, "The node id of the first of --fresh-senders");
  int big_mib = 0;
  app.add_option("--big-frame-mib", big_mib, "One push whose payload frame is this many MiB");
  double flood_seconds = 0;
  app.add_option("--flood-seconds", flood_seconds, "Heartbeats at full speed for this long");
  CLI11_PARSE(app, argc, argv);

  // A short send queue: what is still queued when the endpoint closes is
  // lost (ZeroMQ's linger is 0), and the tests count every message.
  ZmqOptions options;
  options.send_queue_messages = 256;
  std::unique_ptr<Endpoint> endpoint = CreateZmqEndpoint(options);
  auto& e = *endpoint;
  if (auto at = e.Listen("tcp://127.0.0.1:0", [](Message&&) {}); !at.ok())
    return std::fprintf(stderr, "outsider: %s\n", at.status().ToString().c_str()), 1;
  constexpr PeerId kTarget = 1;
  if (Status st = e.Connect(kTarget, to); !st.ok())
    return std::fprintf(stderr, "outsider: %s\n", st.ToString().c_str()), 1;
  uint64_t sent = 0;
  auto send = [&](Message m) {
    if (e.Send(kTarget, std::move(m), Deadline::AfterMs(5000)).ok()) ++sent;
  };
  size_t segments = 0;
  for (int32_t pid : pids) {
    for (const Segment& s : SegmentsOf(pid)) {
      ++segments;
      for (int32_t sender = 1; sender <= senders; ++sender) {
        send(Naming(s, proto::HEARTBEAT, sender, 0));
        for (uint32_t slot = 0; slot < 16; ++slot) send(Naming(s, proto::PUSH, sender, slot));
      }
    }
  }
  for (int i = 0; i < fresh; ++i) send(MakeMessage(proto::HEARTBEAT, first_sender + i));
  if (flood_seconds > 0) {
    // As fast as the receiver takes them: sends wait once the queue is full.
    const Deadline end = Deadline::AfterMs(static_cast<long long>(flood_seconds * 1000));
    proto::Auth made_up;
    made_up.set_mac(std::string(16, 'm'));
    for (uint64_t seq = 1; !end.Expired(); ++seq) {
      Message m = MakeMessage(proto::HEARTBEAT, static_cast<int32_t>(seq % (senders + 1)));
      made_up.set_seq(seq);
      *m.header.mutable_auth() = made_up;
      send(std::move(m));
    }
  }
  if (big_mib > 0) {
    Message big = MakeMessage(proto::PUSH, 1);
    big.header.set_dtype(proto::FLOAT32);
    std::vector<uint8_t> bytes(size_t(big_mib) << 20, 0x5a);
    big.payloads.push_back(Buffer::Copy(bytes.data(), bytes.size()));
    big.header.set_byte_length(bytes.size());
    send(std::move(big));
  }
  // ZeroMQ sends from its own thread: the last queued messages leave before
  // the endpoint, and what it still holds, goes.
  if (Status flushed = e.Flush(Deadline::AfterMs(5000)); !flushed.ok())
    std::fprintf(stderr, "outsider: %s\n", flushed.ToString().c_str());
  e.Close();
  std::printf("outsider: %llu messages to %s (%zu segments named)\n", static_cast<unsigned long long>(sent),
              to.c_str(), segments);
  return 0;
}

}  // namespace
}  // namespace syncline

int main(int argc, char** argv) { return syncline::Run(argc, argv); }
