// init/proxy/listeners.hpp — the proxy listeners inside the sandbox (L3, B2).
//
//   send_listeners(listeners, channel_fd)      -> "" or what failed (steps 1, 2, 4a)
//   await_listeners_taken(channel_fd, wait)    -> "" or what failed (steps 3, 4b)
//
// A checklist; the first failing step is the result:
//   1. for each listener, a TCP socket bound to its loopback address in the
//      sandbox's network namespace and listening (SO_REUSEADDR only: never
//      SO_REUSEPORT, so no other socket in the sandbox can bind the port and
//      take a share of the proxy's connections);
//   2. one "listeners ROLE..." datagram on the proxy channel with every
//      socket as SCM_RIGHTS (ccsb/protocol/proxy_channel.hpp);
//   4a. close this process's copies of the sockets (the datagram in flight
//      holds them);
//   3. wait (bounded) for egressd's answer: "accepting", or "refused REASON";
//   4b. close the channel: from here on only egressd holds the sockets, and
//      the command inherits neither.
// ccsb-init does its own start-up work (Landlock) between the two calls,
// while egressd takes the sockets, and serves no command before step 3.
// A listening socket queues connections in the kernel from step 1, so a
// client that connects as soon as the command starts waits in the backlog
// until egressd accepts; the answer in step 3 means egressd has them.
#pragma once

#include "ccsb/protocol/init_args.hpp"
#include "ccsb/protocol/proxy_channel.hpp"

#include <chrono>
#include <string>
#include <vector>

namespace ccsb::init {

// `listeners`: as ccsb-init's command line gave them (ccsb/protocol/init_args.hpp).
std::string send_listeners(const std::vector<protocol::init_listen>& listeners, int channel_fd);
std::string await_listeners_taken(int channel_fd, std::chrono::milliseconds wait);

} // namespace ccsb::init
