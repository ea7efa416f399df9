// egressd/server.hpp — owns the listeners, the signals and the sweeper (the
// `server` of the Asio HTTP server example). run() returns the exit code.
#pragma once

#include "config.hpp"
#include "events.hpp"

namespace egressd {

int run_server(const settings& cfg, event_sink& events);

} // namespace egressd
