// egressd/io_util.hpp — small awaitable helpers shared by the sessions.
// Errors are values: each helper returns false when the peer went away.
#pragma once

#include "net.hpp"

#include <string>
#include <string_view>

namespace egressd {

template <class Socket>
asio::awaitable<bool> write_all(Socket& s, std::string_view data) {
  if (data.empty()) co_return true;
  auto [ec, n] = co_await asio::async_write(s, asio::buffer(data.data(), data.size()),
                                            use_tuple);
  (void)n;
  co_return !ec;
}

// Appends what one read returns (at most `chunk` bytes) to `buf`.
template <class Socket>
asio::awaitable<bool> read_some_into(Socket& s, std::string& buf, std::size_t chunk = 4096) {
  std::size_t old = buf.size();
  buf.resize(old + chunk);
  auto [ec, n] = co_await s.async_read_some(asio::buffer(buf.data() + old, chunk),
                                            use_tuple);
  buf.resize(old + (ec ? 0 : n));
  co_return !ec && n > 0;
}

} // namespace egressd
