// egressd/server.hpp — owns the listeners, the signals and the sweeper (the
// `server` of the Asio HTTP server example). run_server() returns an exit
// code only when start-up fails; after SIGTERM/SIGINT and the drain it ends
// the process with status 0.
#pragma once

#include "config.hpp"
#include "events.hpp"

namespace egressd {

int run_server(const settings& cfg, event_sink& events);

} // namespace egressd
