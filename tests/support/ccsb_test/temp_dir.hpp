// ccsb_test/temp_dir.hpp — the one temporary directory type of the tests.
//
// mkdtemp under a parent directory (default /tmp), removed with everything
// below it when the object goes: the walk never follows a symlink (a test
// that planted one must not make the cleanup delete host files), an entry
// already gone is not an error (a sandbox may remove its own files while the
// fixture is torn down), and directories are made searchable first (a test
// may leave a 0000 directory behind). A directory that cannot be made
// throws, which Catch2 reports as a failed test, never a skip.
#pragma once

#include <fcntl.h>
#include <ftw.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace ccsb_test {

class temp_dir {
public:
  // <parent>/<prefix>-XXXXXX, mode 0700 (mkdtemp's) unless `mode` is given.
  explicit temp_dir(std::string_view prefix = "ccsb-test", std::string_view parent = "/tmp", mode_t mode = 0) {
    std::string tmpl = std::string(parent) + "/" + std::string(prefix) + "-XXXXXX";
    if (!::mkdtemp(tmpl.data()))
      throw std::runtime_error("mkdtemp(" + tmpl + "): " + std::strerror(errno));
    path_ = std::move(tmpl);
    if (mode != 0 && ::chmod(path_.c_str(), mode) != 0)
      throw std::runtime_error("chmod(" + path_ + "): " + std::strerror(errno));
  }
  ~temp_dir() {
    if (!keep_) remove_tree(path_);
  }
  temp_dir(const temp_dir&) = delete;
  temp_dir& operator=(const temp_dir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }
  // Leaves the tree on disk (a failing test's evidence, kept on request).
  void keep() { keep_ = true; }

  static void remove_tree(const std::string& root) {
    if (root.empty()) return;
    make_searchable(root);
    ::nftw(root.c_str(), remove_entry, 32, FTW_DEPTH | FTW_PHYS);
  }

private:
  // Each directory is opened up as the walk reaches it, before it descends.
  static void make_searchable(const std::string& root) {
    namespace fs = std::filesystem;
    std::error_code ec;
    if (!fs::is_directory(fs::symlink_status(root, ec))) return;
    ::chmod(root.c_str(), 0700);
    for (auto it = fs::recursive_directory_iterator(root, fs::directory_options::skip_permission_denied, ec);
         it != fs::recursive_directory_iterator(); it.increment(ec))
      if (it->is_directory(ec) && !it->is_symlink(ec)) ::chmod(it->path().c_str(), 0700);
  }
  static int remove_entry(const char* p, const struct stat*, int, struct FTW*) {
    return ::remove(p) == 0 || errno == ENOENT ? 0 : -1;
  }

  std::string path_;
  bool keep_{false};
};

} // namespace ccsb_test
