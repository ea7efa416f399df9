// egressd/session_socks.hpp — the SOCKS5 front end (RFC 1928, RFC 1929).
#pragma once

#include "connection.hpp"

#include "net.hpp"

#include <memory>

namespace egressd {

asio::awaitable<void> socks_session(std::shared_ptr<connection> c);

} // namespace egressd
