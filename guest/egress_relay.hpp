// guest/egress_relay.hpp — the guest end of a microVM's egress (N1-N8, X4;
// docs/microvm.md "Egress"), started by the agent when the kernel command
// line says ccsb.egress=1 (the host gave the VM the ccsb.egress port).
#pragma once

#include <initializer_list>
#include <string>

namespace ccsb::guest {

// Whether the VM has an egress port (ccsb.egress=1 on /proc/cmdline).
bool egress_enabled();

// Binds the guest's proxy listeners, 127.0.0.1:3128 (HTTP, CONNECT) and
// 127.0.0.1:1080 (SOCKS5), here and now (lo must be up; no command runs yet,
// so none can hold the ports first), then forks the relay: a process of its
// own, as guest root (the commands' unprivileged user can neither signal
// nor ptrace it), which multiplexes every accepted connection over the
// ccsb.egress port (ccsb/protocol/guest_egress.hpp) to the session's
// egressd on the host. `close_in_child`: the agent's descriptors the relay
// must not hold. "" on success, else why not.
std::string start_egress_relay(std::initializer_list<int> close_in_child);

} // namespace ccsb::guest
