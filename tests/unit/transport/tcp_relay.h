// TcpRelay: a one-connection TCP forwarder on 127.0.0.1 that keeps a copy of
// every byte it passes towards its target, so a test can see what crossed the
// "network" (e.g. that encrypted traffic does not show its plaintext).
// Bounded: its thread polls with a timeout and stops when the relay is destroyed.
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <mutex>
#include <string>
#include <thread>

namespace syncline::testing {

class TcpRelay {
 public:
  explicit TcpRelay(int target_port) : target_port_(target_port) {
    listener_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = Loopback(0);
    bind(listener_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(listener_, 1);
    socklen_t len = sizeof(a);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    thread_ = std::thread([this] { Run(); });
  }
  ~TcpRelay() {
    stop_ = true;
    thread_.join();
    close(listener_);
  }
  int port() const { return port_; }
  // Everything sent towards the target so far.
  std::string upstream() {
    std::lock_guard<std::mutex> lock(mu_);
    return upstream_;
  }

 private:
  static sockaddr_in Loopback(int port) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    return a;
  }
  void Run() {
    pollfd accept_poll{listener_, POLLIN, 0};
    while (!stop_ && poll(&accept_poll, 1, 20) <= 0) {
    }
    if (stop_) return;
    const int client = accept(listener_, nullptr, nullptr);
    const int target = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in t = Loopback(target_port_);
    if (client < 0 || connect(target, reinterpret_cast<sockaddr*>(&t), sizeof(t)) != 0) {
      if (client >= 0) close(client);
      close(target);
      return;
    }
    char buf[65536];
    pollfd fds[2] = {{client, POLLIN, 0}, {target, POLLIN, 0}};
    while (!stop_) {
      if (poll(fds, 2, 20) <= 0) continue;
      for (int i = 0; i < 2; ++i) {
        if (!(fds[i].revents & (POLLIN | POLLHUP))) continue;
        const ssize_t n = read(fds[i].fd, buf, sizeof(buf));
        if (n <= 0) stop_ = true;
        if (n <= 0) break;
        if (i == 0) {
          std::lock_guard<std::mutex> lock(mu_);
          upstream_.append(buf, n);
        }
        for (ssize_t done = 0; done < n;) {
          const ssize_t w = write(fds[1 - i].fd, buf + done, n - done);
          if (w <= 0) break;
          done += w;
        }
      }
    }
    close(client);
    close(target);
  }

  const int target_port_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::mutex mu_;
  std::string upstream_;
};

}  // namespace syncline::testing
