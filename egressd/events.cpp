#include "events.hpp"

#include "ccsb/spec.hpp"

#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <unistd.h>

namespace egressd {

// One escaping rule for every JSON line ccsb writes (the library's: UTF-8
// kept, invalid bytes as U+FFFD, control characters as \uXXXX).
void append_json_string(std::string& out, std::string_view s) {
  out += '"';
  ccsb::detail::append_json_escaped(out, s);
  out += '"';
}

event_sink::~event_sink() {
  if (owned_) ::close(fd_);
}

ccsb::result<void> event_sink::open(const std::string& where) {
  if (where.empty() || where == "-") {
    fd_ = 1;
    return ccsb::ok();
  }
  int n = -1;
  auto [p, ec] = std::from_chars(where.data(), where.data() + where.size(), n);
  if (ec == std::errc{} && p == where.data() + where.size() && n >= 0) {
    if (::fcntl(n, F_GETFD) < 0)
      return ccsb::make_error(ccsb::errc::io_error, "events", "descriptor " + where + " is not open");
    fd_ = n;
    ::fcntl(fd_, F_SETFD, FD_CLOEXEC);
    return ccsb::ok();
  }
  int fd = ::open(where.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (fd < 0)
    return ccsb::make_error(ccsb::errc::io_error, "events", "open('" + where + "'): " + std::strerror(errno));
  fd_ = fd;
  owned_ = true;
  return ccsb::ok();
}

void event_sink::write_line(std::string line) {
  line += '\n';
  const char* p = line.data();
  std::size_t left = line.size();
  while (left > 0) {
    ssize_t n = ::write(fd_, p, left);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) { ::usleep(1000); continue; } // a full pipe: wait for the reader
      std::fprintf(stderr, "egressd: write(events fd %d): %s\n", fd_, std::strerror(errno));
      return;
    }
    p += n;
    left -= static_cast<std::size_t>(n);
  }
}

void event_sink::ready(std::string_view http, std::string_view socks, int listen_channel, std::string_view extra) {
  std::string line = "{\"event\":\"ready\"";
  if (!http.empty()) {
    line += ",\"http\":";
    append_json_string(line, http);
  }
  if (!socks.empty()) {
    line += ",\"socks\":";
    append_json_string(line, socks);
  }
  if (listen_channel >= 0) line += ",\"listenChannel\":" + std::to_string(listen_channel);
  line += extra;
  line += '}';
  write_line(std::move(line));
}

void event_sink::violation(std::string_view target, std::string_view reason) {
  std::string line = "{\"event\":\"violation\",\"action\":\"network-outbound\",\"target\":";
  append_json_string(line, target);
  line += ",\"reason\":";
  append_json_string(line, reason);
  line += '}';
  write_line(std::move(line));
}

} // namespace egressd
