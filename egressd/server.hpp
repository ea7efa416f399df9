// egressd/server.hpp — owns the listeners, the signals and the sweeper (the
// `server` of the Asio HTTP server example). run_server() returns an exit
// code only when start-up fails; after SIGTERM/SIGINT and the drain it ends
// the process with status 0. `after_ready`, when given, runs once on the
// server's thread after the ready event (egressd-attack's attempts:
// test_attack.hpp).
#pragma once

#include "config.hpp"
#include "events.hpp"

#include <functional>

namespace egressd {

int run_server(const settings& cfg, event_sink& events, std::function<void(event_sink&)> after_ready = {});

} // namespace egressd
