// egressd/net.hpp — the Asio pieces every I/O file uses. Asio 1.22 keeps
// as_tuple in experimental; errors come back as values, never exceptions.
#pragma once

#include <asio.hpp>
#include <asio/experimental/as_tuple.hpp>

namespace egressd {

inline constexpr auto use_tuple = asio::experimental::as_tuple(asio::use_awaitable);

} // namespace egressd
