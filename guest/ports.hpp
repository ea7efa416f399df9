// guest/ports.hpp — what the guest agent and its egress relay both read:
// small text files of /proc and /sys, and the device of a virtio-serial port
// by its name (there is no udev in the guest to make /dev/virtio-ports/NAME).
#pragma once

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <string>
#include <string_view>

namespace ccsb::guest {

// The first 4 KiB of a file, trailing newlines and spaces cut; "" when it
// cannot be read.
inline std::string read_small(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[4096];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return {};
  std::string s(buf, static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// /dev/vportNpM of the port named `name` (virtio_console names it in
// sysfs), waiting up to `attempts` x 10 ms for it to appear; "" if it does not.
inline std::string find_port(std::string_view name, int attempts) {
  for (int attempt = 0; attempt < attempts; ++attempt) {
    if (DIR* d = ::opendir("/sys/class/virtio-ports")) {
      std::string found;
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (read_small(std::string("/sys/class/virtio-ports/") + e->d_name + "/name") == name)
          found = std::string("/dev/") + e->d_name;
      }
      ::closedir(d);
      if (!found.empty() && ::access(found.c_str(), F_OK) == 0) return found;
    }
    ::usleep(10000);
  }
  return {};
}

} // namespace ccsb::guest
