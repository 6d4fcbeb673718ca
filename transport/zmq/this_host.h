// Whether a tcp:// address leads to this machine. ZmqEndpoint bounds the
// kernel send buffer of connections to other machines only (ZmqOptions::
// tcp_send_buffer_bytes): a connection to this host, whether spelled
// 127.0.0.1, localhost or the host's own address or name (a worker and a
// server sharing a host under pslaunch --hosts), is routed over the
// loopback device and never meets a switch queue.
#pragma once

#include <string>

namespace syncline {

// True for "tcp://HOST:PORT" where HOST is in 127.0.0.0/8, is ::1 or
// localhost, is an address one of this machine's interfaces holds, or is a
// name that resolves to one of those. False for other addresses, names that
// do not resolve, and addresses that are not tcp://.
bool LeadsToThisHost(const std::string& tcp_address);

}  // namespace syncline
