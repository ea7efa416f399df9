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
  ccsb::append_json_escaped(out, s);
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

void event_sink::write(const ccsb::protocol::egressd_events::event& e) {
  const std::string line = ccsb::protocol::egressd_events::write_line(e);
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

void event_sink::violation(std::string_view target, std::string_view reason) {
  write(ccsb::protocol::egressd_events::violation{std::string(target), std::string(reason)});
}

} // namespace egressd
