// What the kernel grants a TCP socket that asks for a send buffer
// (SO_SNDBUF). Linux caps the request at net.core.wmem_max, silently: a
// SYNCLINE_TCP_SEND_BUFFER_BYTES above that limit would bound each connection
// to less than asked. ZmqEndpoint asks once, with a socket of its own, and
// warns with both numbers when the kernel grants less.
#pragma once

namespace syncline {

// The send buffer, in the bytes SO_SNDBUF is asked in, that a TCP socket
// keeps when it asks for `requested` bytes: `requested` itself between the
// kernel's floor (about 2 KiB) and its cap (net.core.wmem_max, at most
// INT_MAX / 2), the floor or the cap outside. -1 when no socket can be made
// to ask, or off Linux.
int KernelSendBufferFor(int requested);

}  // namespace syncline
