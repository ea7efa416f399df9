// ccsb/launch/macos/platform.hpp — THE platform boundary of the macOS
// backend: the only code of ccsb that compiles differently on macOS. Every
// other part of the macOS backend (render_seatbelt.hpp, seatbelt_log.hpp,
// seatbelt_driver.hpp) is plain POSIX or pure and is built and tested on
// Linux.
//
//   user_temp_dir() -> result<std::string>   confstr(_CS_DARWIN_USER_TEMP_DIR)
//   is_macos        -> true only when compiled for macOS
//
// Off macOS, user_temp_dir() is a typed error (backend_unavailable): the
// Seatbelt driver refuses to run rather than pick some other directory.
#pragma once

#include "ccsb/result.hpp"

#include <string>

#if defined(__APPLE__)
#include <unistd.h>
#endif

namespace ccsb::launch::macos {

#if defined(__APPLE__)
inline constexpr bool is_macos = true;

// The per-user temp dir (/var/folders/XX/YYYY/T/), owned by the user, 0700:
// the parent of every session's private TMPDIR.
inline result<std::string> user_temp_dir() {
  char buf[1024];
  size_t n = ::confstr(_CS_DARWIN_USER_TEMP_DIR, buf, sizeof buf);
  if (n == 0 || n > sizeof buf)
    return make_error(errc::io_error, "DARWIN_USER_TEMP_DIR", "confstr(_CS_DARWIN_USER_TEMP_DIR) failed");
  std::string d(buf);
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  return d;
}
#else
inline constexpr bool is_macos = false;

inline result<std::string> user_temp_dir() {
  return make_error(errc::backend_unavailable, "platform",
                    "the Seatbelt backend runs only on macOS (sandbox-exec); use --print-profile seatbelt to see "
                    "the profile a Mac would run");
}
#endif

} // namespace ccsb::launch::macos
