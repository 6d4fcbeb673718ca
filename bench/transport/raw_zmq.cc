// syncline-bench-raw-zmq: the reference the transport benchmark is compared
// with, measured in the same run: raw ZeroMQ between two processes, with no
// Syncline code in the path.
//   stream: a zero-copy PUSH/PULL stream of messages of --size bytes for
//           --seconds; prints one-directional throughput.
//   pingpong: DEALER/ROUTER round trips of --size bytes each way; prints the
//           median round-trip time.
// The program forks: the child sends, the parent receives and reports one
// JSON line, e.g. {"mode":"stream","bytes":4194304,"MBps":2345.6}.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>
#include <zmq.hpp>

namespace {

using Clock = std::chrono::steady_clock;

double Since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

void NoFree(void*, void*) {}

int Stream(const std::string& endpoint, size_t size, double seconds) {
  zmq::context_t ctx(1);
  zmq::socket_t pull(ctx, zmq::socket_type::pull);
  pull.set(zmq::sockopt::rcvhwm, 16);
  pull.bind(endpoint);
  const std::string bound = pull.get(zmq::sockopt::last_endpoint);
  pid_t child = fork();
  if (child == 0) {
    zmq::context_t cctx(1);
    zmq::socket_t push(cctx, zmq::socket_type::push);
    push.set(zmq::sockopt::sndhwm, 16);
    push.connect(bound);
    std::vector<uint8_t> payload(size, 7);
    for (;;) {
      zmq::message_t m(payload.data(), payload.size(), NoFree, nullptr);  // zero-copy send
      if (!push.send(m, zmq::send_flags::none)) break;
      zmq::message_t stop;
      (void)stop;
    }
    _exit(0);
  }
  // Warm up, then count what arrives in the measured window.
  zmq::message_t m;
  for (int i = 0; i < 8; ++i) (void)pull.recv(m);
  size_t bytes = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  while ((elapsed = Since(start)) < seconds) {
    (void)pull.recv(m);
    bytes += m.size();
  }
  elapsed = Since(start);
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  std::printf("{\"mode\":\"stream\",\"bytes\":%zu,\"MBps\":%.1f}\n", size, bytes / elapsed / 1e6);
  return 0;
}

int PingPong(const std::string& endpoint, size_t size, int iterations) {
  zmq::context_t ctx(1);
  zmq::socket_t router(ctx, zmq::socket_type::router);
  router.bind(endpoint);
  const std::string bound = router.get(zmq::sockopt::last_endpoint);
  pid_t child = fork();
  if (child == 0) {
    zmq::context_t cctx(1);
    zmq::socket_t dealer(cctx, zmq::socket_type::dealer);
    dealer.connect(bound);
    std::vector<uint8_t> payload(size, 3);
    zmq::message_t reply;
    for (int i = 0; i < iterations + 10; ++i) {
      (void)dealer.send(zmq::buffer(payload), zmq::send_flags::none);
      (void)dealer.recv(reply);
    }
    _exit(0);
  }
  std::vector<double> times;
  zmq::message_t id, body;
  auto last = Clock::now();
  for (int i = 0; i < iterations + 10; ++i) {
    (void)router.recv(id);
    (void)router.recv(body);
    const auto now = Clock::now();
    if (i > 10) times.push_back(std::chrono::duration<double>(now - last).count());
    last = now;
    (void)router.send(id, zmq::send_flags::sndmore);
    (void)router.send(body, zmq::send_flags::none);
  }
  waitpid(child, nullptr, 0);
  std::sort(times.begin(), times.end());
  std::printf("{\"mode\":\"pingpong\",\"bytes\":%zu,\"round_trip_us\":%.1f}\n", size, times[times.size() / 2] * 1e6);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = "stream", endpoint = "tcp://127.0.0.1:*";
  size_t size = 4 << 20;
  double seconds = 2.0;
  int iterations = 2000;
  CLI::App app{"Raw ZeroMQ reference for the Syncline transport benchmark."};
  app.add_option("--mode", mode)->check(CLI::IsMember({"stream", "pingpong"}));
  app.add_option("--endpoint", endpoint, "where the receiver binds (tcp://127.0.0.1:* or ipc://...)");
  app.add_option("--size", size, "message size in bytes");
  app.add_option("--seconds", seconds, "stream: measured time");
  app.add_option("--iterations", iterations, "pingpong: round trips");
  CLI11_PARSE(app, argc, argv);
  return mode == "stream" ? Stream(endpoint, size, seconds) : PingPong(endpoint, size, iterations);
}
