// egressd/session_http.hpp — the HTTP proxy front end: CONNECT tunnels and
// absolute-form forwarding, each request checked on its own.
#pragma once

#include "connection.hpp"

#include "net.hpp"

#include <memory>

namespace egressd {

asio::awaitable<void> http_session(std::shared_ptr<connection> c);

} // namespace egressd
