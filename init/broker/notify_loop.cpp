#include "broker/notify_loop.hpp"

#include "ccsb/broker/git_object.hpp"
#include "ccsb/broker/object_decide.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <linux/inet_diag.h>
#include <linux/netlink.h>
#include <linux/openat2.h>
#include <linux/rtnetlink.h>
#include <linux/sock_diag.h>
#include <linux/seccomp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/xattr.h>
#include <linux/limits.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <csignal>
#include <climits>
#include <cstddef>
#include <cstring>
#include <memory>
#include <optional>
#include <chrono>
#include <functional>
#include <poll.h>
#include <string>
#include <utility>

namespace ccsb::init {
namespace {

namespace rules = ccsb::broker;

class fd_t {
public:
  fd_t() = default;
  explicit fd_t(int fd) : fd_(fd) {}
  fd_t(fd_t&& o) noexcept : fd_(std::exchange(o.fd_, -1)) {}
  fd_t& operator=(fd_t&& o) noexcept {
    if (this != &o) {
      reset();
      fd_ = std::exchange(o.fd_, -1);
    }
    return *this;
  }
  ~fd_t() { reset(); }
  void reset(int fd = -1) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = fd;
  }
  int get() const { return fd_; }
  explicit operator bool() const { return fd_ >= 0; }

private:
  int fd_{-1};
};

// The answer to notification `id`: `val`, or the errno `err`.
void send_reply(int listener, std::uint64_t id, long long val, int err) {
  seccomp_notif_resp resp{};
  resp.id = id;
  resp.val = err ? 0 : val;
  resp.error = err ? -err : 0;
  resp.flags = 0;
  (void)::ioctl(listener, SECCOMP_IOCTL_NOTIF_SEND, &resp);
}

constexpr unsigned kPidfdThread = O_EXCL; // PIDFD_THREAD (6.9+)
constexpr long kSysFchmodat2 = 452;        // the same number on every architecture (6.6+)
constexpr int kMaxLinks = 40;

std::string fd_path(int fd) {
  char link[64];
  std::snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
  char buf[PATH_MAX + 1];
  ssize_t n = ::readlink(link, buf, PATH_MAX);
  if (n <= 0) return {};
  return std::string(buf, static_cast<std::size_t>(n));
}

std::optional<std::string> read_link_at(int dir, const std::string& name) {
  char buf[PATH_MAX + 1];
  ssize_t n = ::readlinkat(dir, name.c_str(), buf, PATH_MAX);
  if (n < 0) return std::nullopt;
  return std::string(buf, static_cast<std::size_t>(n));
}

bool all_digits(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The caller's view of a few /proc/TID/status fields.
struct proc_status {
  mode_t umask{022};
  pid_t tgid{-1};
};

std::optional<proc_status> read_status(pid_t tid) {
  char p[64];
  std::snprintf(p, sizeof p, "/proc/%d/status", tid);
  fd_t f(::open(p, O_RDONLY | O_CLOEXEC));
  if (!f) return std::nullopt;
  char buf[4096];
  ssize_t n = ::read(f.get(), buf, sizeof buf - 1);
  if (n <= 0) return std::nullopt;
  buf[n] = '\0';
  proc_status s;
  bool have_umask = false;
  if (const char* u = std::strstr(buf, "\nUmask:\t")) {
    s.umask = static_cast<mode_t>(std::strtoul(u + 8, nullptr, 8));
    have_umask = true;
  }
  if (const char* t = std::strstr(buf, "\nTgid:\t")) s.tgid = static_cast<pid_t>(std::strtol(t + 7, nullptr, 10));
  if (!have_umask || s.tgid <= 0) return std::nullopt;
  return s;
}

// The argv of `tid`'s parent process (empty when it cannot be read).
std::vector<std::string> parent_argv(pid_t tid) {
  std::vector<std::string> argv;
  char p[64];
  std::snprintf(p, sizeof p, "/proc/%d/status", tid);
  fd_t f(::open(p, O_RDONLY | O_CLOEXEC));
  if (!f) return argv;
  char buf[4096];
  ssize_t n = ::read(f.get(), buf, sizeof buf - 1);
  if (n <= 0) return argv;
  buf[n] = '\0';
  const char* pp = std::strstr(buf, "\nPPid:\t");
  const long ppid = pp ? std::strtol(pp + 7, nullptr, 10) : 0;
  if (ppid <= 0) return argv;
  std::snprintf(p, sizeof p, "/proc/%ld/cmdline", ppid);
  fd_t c(::open(p, O_RDONLY | O_CLOEXEC));
  if (!c) return argv;
  std::string text;
  char chunk[4096];
  while (text.size() < 64 * 1024) {
    ssize_t k = ::read(c.get(), chunk, sizeof chunk);
    if (k <= 0) break;
    text.append(chunk, static_cast<std::size_t>(k));
  }
  for (std::size_t i = 0; i < text.size();) {
    std::size_t j = text.find('\0', i);
    if (j == std::string::npos) j = text.size();
    argv.push_back(text.substr(i, j - i));
    i = j + 1;
  }
  return argv;
}

// T2: the sockets of the host's network namespace that could take a
// connection to `dst` now (net_decide.hpp `receiver`): TCP listeners or UDP
// sockets (any state) with its port, of both families for an IPv4
// destination (a dual-stack IPv6 socket takes IPv4 too), through sock_diag
// (NETLINK_SOCK_DIAG). Empty when the kernel cannot be asked or for
// another protocol: no socket is then the session's own alone.
std::vector<ccsb::broker::receiver> receivers_of(const ccsb::broker::endpoint& dst, int protocol) {
  std::vector<ccsb::broker::receiver> out;
  if (protocol != IPPROTO_TCP && protocol != IPPROTO_UDP) return out;
  fd_t nl(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_SOCK_DIAG));
  if (!nl) return out;
  std::vector<int> families{AF_INET6};
  if (ccsb::broker::is_v4(dst)) families.push_back(AF_INET);
  std::vector<ccsb::broker::receiver> found;
  for (int family : families) {
    struct {
      nlmsghdr h;
      inet_diag_req_v2 r;
    } q{};
    q.h.nlmsg_len = sizeof q;
    q.h.nlmsg_type = SOCK_DIAG_BY_FAMILY;
    q.h.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    q.r.sdiag_family = static_cast<std::uint8_t>(family);
    q.r.sdiag_protocol = static_cast<std::uint8_t>(protocol);
    q.r.idiag_states = protocol == IPPROTO_TCP ? (1U << 10 /* TCP_LISTEN */) : ~0U;
    sockaddr_nl kernel{};
    kernel.nl_family = AF_NETLINK;
    if (::sendto(nl.get(), &q, sizeof q, 0, reinterpret_cast<sockaddr*>(&kernel), sizeof kernel) != sizeof q)
      return out;
    for (bool done = false; !done;) {
      alignas(nlmsghdr) char buf[32768];
      ssize_t n = ::recv(nl.get(), buf, sizeof buf, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return out;
      auto len = static_cast<unsigned>(n);
      for (auto* h = reinterpret_cast<nlmsghdr*>(buf); NLMSG_OK(h, len); h = NLMSG_NEXT(h, len)) {
        if (h->nlmsg_type == NLMSG_DONE) {
          done = true;
          break;
        }
        if (h->nlmsg_type == NLMSG_ERROR) return out;
        if (h->nlmsg_type != SOCK_DIAG_BY_FAMILY || h->nlmsg_len < NLMSG_LENGTH(sizeof(inet_diag_msg))) continue;
        const auto* m = static_cast<const inet_diag_msg*>(NLMSG_DATA(h));
        if (ntohs(m->id.idiag_sport) != dst.port) continue;
        ccsb::broker::receiver r;
        r.ep.port = dst.port;
        r.inode = m->idiag_inode;
        if (m->idiag_family == AF_INET) {
          const auto* a = reinterpret_cast<const std::uint8_t*>(m->id.idiag_src);
          r.ep.addr = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a[0], a[1], a[2], a[3]};
        } else {
          std::memcpy(r.ep.addr.data(), m->id.idiag_src, 16);
        }
        int alen = static_cast<int>(h->nlmsg_len - NLMSG_LENGTH(sizeof *m));
        for (auto* at = reinterpret_cast<const rtattr*>(m + 1); RTA_OK(at, alen); at = RTA_NEXT(at, alen))
          if (at->rta_type == INET_DIAG_SKV6ONLY && RTA_PAYLOAD(at) >= 1)
            r.v6only = *static_cast<const std::uint8_t*>(RTA_DATA(at)) != 0;
        found.push_back(r);
      }
    }
  }
  return found;
}

// What a path names, resolved the way the kernel would for the caller.
struct target {
  fd_t dir;             // O_PATH directory that holds the final name
  std::string last;     // final component ("." when the path names a directory)
  std::string full;     // absolute kernel path of the final name
  bool exists{false};
  struct stat st {};
  // A followed magic link of the caller (/proc/<caller>/fd/N, cwd, root,
  // exe, map_files/*): `obj` is the object it named when the broker opened
  // it, once; `full` and `st` are that object's, and `last` is
  // /proc/self/fd/<obj>, absolute, so every *at call on (dir, last) reaches
  // that same object and nothing the link names later.
  bool magic{false};
  fd_t obj;
};

} // namespace

// What the broker keeps about one calling thread (notify_loop.hpp, "Caller
// facts"). Erased only once its pidfd says the thread exited.
struct broker::caller_facts {
  fd_t pidfd; // PIDFD_THREAD: readable once the thread has exited
  pid_t tgid{-1};
  std::optional<mode_t> umask;
  bool alive() const {
    pollfd p{pidfd.get(), POLLIN, 0};
    return ::poll(&p, 1, 0) == 0;
  }
};

namespace {
// Each entry holds a descriptor; ccsb-init's descriptor limit is the
// command's (often 1024), so the table stays small. Forgetting an entry is
// always safe: its facts are read again when needed.
constexpr std::size_t kMaxCallers = 256;
} // namespace

// A call waiting for its socket (see call::wait_for), or for the helper
// that performs a blocking open (call::open_waiting).
struct broker::pending_op {
  std::uint64_t id{0};
  std::shared_ptr<fd_t> sock; // our copy of the caller's socket; the helper's end of the word
  short events{POLLOUT};      // what makes `sock` ready
  fd_t caller;                // the caller's pidfd: readable once it died (the call is then dropped)
  fd_t helper;                // the helper's pidfd: SIGKILLed when the call is dropped
  std::function<attempt_result()> attempt;
  // The answer once done (the default: send_reply with the result).
  std::function<void(const attempt_result&)> complete;
  attempt_result at_deadline{true, 0, EAGAIN};
  std::chrono::steady_clock::time_point deadline{std::chrono::steady_clock::time_point::max()};
  std::chrono::steady_clock::time_point retry{};
  std::chrono::microseconds backoff{500};
  std::chrono::microseconds max_backoff{20000};
  pending_op() = default;
  pending_op(const pending_op&) = delete;
  pending_op& operator=(const pending_op&) = delete;
  ~pending_op() {
    if (helper) (void)::syscall(SYS_pidfd_send_signal, helper.get(), SIGKILL, nullptr, 0);
  }
};

namespace {
// Calls waiting in helpers at once, per broker: each holds two of
// ccsb-init's descriptors and one process of the sandbox. One more fails
// with EAGAIN.
constexpr std::size_t kMaxWaitingCalls = 64;
} // namespace

// One notification being answered.
struct call {
  broker& b;
  seccomp_notif& req;
  pid_t tid;
  broker::caller_facts* facts{nullptr}; // this thread's cached facts, if any
  bool looked_up{false};
  fd_t own_pidfd; // without a cache entry (no thread pidfds): this call's own
  std::optional<proc_status> status;

  call(broker& br, seccomp_notif& r) : b(br), req(r), tid(static_cast<pid_t>(r.pid)) {}

  bool valid() { return ::ioctl(b.listener_, SECCOMP_IOCTL_NOTIF_ID_VALID, &req.id) == 0; }

  void reply(long long val, int err) { send_reply(b.listener_, req.id, val, err); }

  // Copies `addr` for `len` bytes of the caller's memory (process_vm_readv).
  int read_mem(std::uint64_t addr, void* out, std::size_t len) {
    if (len == 0) return 0;
    if (addr == 0) return EFAULT;
    iovec local{out, len}, remote{reinterpret_cast<void*>(addr), len};
    ssize_t n = ::process_vm_readv(tid, &local, 1, &remote, 1, 0);
    if (n == static_cast<ssize_t>(len)) return 0;
    if (n < 0 && (errno == EPERM || errno == EACCES)) return EACCES;
    if (n < 0 && errno == ESRCH) return ESRCH;
    return EFAULT;
  }

  // A NUL-terminated string, page by page (a string may end right before an
  // unmapped page), at most PATH_MAX bytes.
  int read_string(std::uint64_t addr, std::string& out) {
    out.clear();
    if (addr == 0) return EFAULT;
    char buf[4096];
    while (out.size() < PATH_MAX) {
      std::size_t want = 4096 - (addr % 4096);
      iovec local{buf, want}, remote{reinterpret_cast<void*>(addr), want};
      ssize_t n = ::process_vm_readv(tid, &local, 1, &remote, 1, 0);
      if (n <= 0) {
        if (n < 0 && (errno == EPERM || errno == EACCES)) return EACCES;
        return n < 0 && errno == ESRCH ? ESRCH : EFAULT;
      }
      if (void* z = std::memchr(buf, 0, static_cast<std::size_t>(n))) {
        out.append(buf, static_cast<std::size_t>(static_cast<char*>(z) - buf));
        return 0;
      }
      out.append(buf, static_cast<std::size_t>(n));
      addr += static_cast<std::uint64_t>(n);
    }
    return ENAMETOOLONG;
  }

  // The caller's cache entry: the one kept for this TID while its thread
  // lives, else a new one around a fresh thread pidfd. nullptr when the
  // kernel has no thread pidfds (or no descriptor is left).
  broker::caller_facts* known() {
    if (looked_up) return facts;
    looked_up = true;
    auto& callers = b.callers_;
    if (auto it = callers.find(tid); it != callers.end()) {
      if (it->second->alive()) return facts = it->second.get();
      callers.erase(it);
    }
    if (callers.size() >= kMaxCallers)
      std::erase_if(callers, [](const auto& kv) { return !kv.second->alive(); });
    if (callers.size() >= kMaxCallers) callers.clear(); // all alive: start over
    long fd = ::syscall(SYS_pidfd_open, tid, kPidfdThread);
    if (fd < 0) return nullptr;
    auto f = std::make_unique<broker::caller_facts>();
    f->pidfd.reset(static_cast<int>(fd));
    facts = f.get();
    callers.emplace(tid, std::move(f));
    return facts;
  }

  // A pidfd of the caller (for pidfd_getfd), or -errno.
  int caller_pidfd() {
    if (auto* f = known()) return f->pidfd.get();
    if (own_pidfd) return own_pidfd.get();
    long fd = ::syscall(SYS_pidfd_open, tid, kPidfdThread);
    if (fd < 0) fd = ::syscall(SYS_pidfd_open, tid, 0);
    if (fd < 0) return errno == ESRCH ? -ESRCH : -EACCES;
    own_pidfd.reset(static_cast<int>(fd));
    return own_pidfd.get();
  }

  // The caller's descriptor `remote` as one of ours (pidfd_getfd).
  int fetch(int remote, fd_t& out) {
    int pfd = caller_pidfd();
    if (pfd < 0) return -pfd;
    long fd = ::syscall(SYS_pidfd_getfd, pfd, remote, 0);
    if (fd < 0) return errno == EBADF ? EBADF : (errno == ESRCH ? ESRCH : EACCES);
    out.reset(static_cast<int>(fd));
    return 0;
  }

  // What a relative path starts from: the caller's cwd or its dirfd.
  int base(int dirfd, const std::string& path, fd_t& out) {
    if (!path.empty() && path.front() == '/') {
      out.reset();
      return 0;
    }
    if (dirfd == AT_FDCWD) {
      char p[64];
      std::snprintf(p, sizeof p, "/proc/%d/cwd", tid);
      int fd = ::open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
      if (fd < 0) return errno == ENOENT ? ESRCH : EACCES;
      out.reset(fd);
      return 0;
    }
    return fetch(dirfd, out);
  }

  // /proc/TID/status, read at most once per call.
  proc_status* caller_status() {
    if (!status) status = read_status(tid);
    return status ? &*status : nullptr;
  }

  // The caller's tgid (-1 when unknown): cached per thread.
  pid_t caller_tgid() {
    broker::caller_facts* f = known();
    if (f && f->tgid > 0) return f->tgid;
    proc_status* s = caller_status();
    if (!s) return -1;
    // Kept only if the thread the pidfd names lived across the read.
    if (f && f->alive()) f->tgid = s->tgid;
    return s->tgid;
  }

  // Is `last` in directory `dpath` a magic link of the caller's own:
  // /proc/<caller>[/task/<caller>]/{cwd,root,exe} or .../{fd,map_files}/*?
  // (Another process's links are followed as text, like any symlink.)
  bool is_caller_magic(std::string_view d, std::string_view last) {
    if (d.substr(0, 6) != "/proc/") return false;
    const pid_t tgid = caller_tgid();
    if (tgid <= 0) return false;
    auto me = [&](std::string_view n) {
      return all_digits(n) && (std::to_string(tid) == n || std::to_string(tgid) == n);
    };
    d.remove_prefix(6);
    auto slash = d.find('/');
    if (!me(d.substr(0, slash))) return false;
    d = slash == std::string_view::npos ? std::string_view() : d.substr(slash);
    if (d.substr(0, 6) == "/task/") {
      std::string_view t = d.substr(6);
      slash = t.find('/');
      if (!me(t.substr(0, slash))) return false;
      d = slash == std::string_view::npos ? std::string_view() : t.substr(slash);
    }
    if (d.empty()) return last == "cwd" || last == "root" || last == "exe";
    return d == "/fd" || d == "/map_files";
  }

  // The object a magic link names, fetched once: the broker's own open of
  // the link (O_PATH: the kernel resolves it to the object, never by its
  // text), read back as the object's path and stat.
  int fetch_magic(int dir, const std::string& last, target& t) {
    int fd = ::openat(dir, last.c_str(), O_PATH | O_CLOEXEC);
    if (fd < 0) return errno;
    t.obj.reset(fd);
    if (::fstat(fd, &t.st) != 0) return errno;
    t.magic = true;
    t.exists = true;
    t.full = fd_path(fd);
    t.last = "/proc/self/fd/" + std::to_string(fd);
    return 0;
  }

  // The directory part `dir` of a path (from `from`) holds a link the
  // kernel refused to cross with RESOLVE_NO_MAGICLINKS: walks it component
  // by component up to the first symlink. A magic link of the caller's is
  // replaced by its object (fetch_magic) and `rest` continues from there;
  // any other symlink by its text. Out: where resolution goes on.
  int split_at_link(int from, const std::string& dir, const std::string& rest, fd_t& cur, std::string& path) {
    open_how step{};
    step.flags = O_PATH | O_NOFOLLOW | O_CLOEXEC;
    step.resolve = RESOLVE_NO_MAGICLINKS;
    fd_t at;
    long d = ::syscall(SYS_openat2, from, dir.front() == '/' ? "/" : ".", &step, sizeof step);
    if (d < 0) return errno;
    at.reset(static_cast<int>(d));
    std::size_t i = 0;
    while (i < dir.size()) {
      std::size_t j = dir.find('/', i);
      if (j == std::string::npos) j = dir.size();
      std::string comp = dir.substr(i, j - i);
      i = j + 1;
      if (comp.empty() || comp == ".") continue;
      struct stat st;
      if (comp != ".." && ::fstatat(at.get(), comp.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0) return errno;
      if (comp != ".." && S_ISLNK(st.st_mode)) {
        std::string tail = (i < dir.size() ? dir.substr(i) + "/" : std::string()) + rest;
        std::string apath = fd_path(at.get());
        if (is_caller_magic(apath, comp)) {
          target m;
          if (int e = fetch_magic(at.get(), comp, m)) return e;
          cur = std::move(m.obj);
          path = tail;
          return 0;
        }
        auto to = link_text(at.get(), apath, comp);
        if (!to) return errno;
        cur = std::move(at);
        path = *to + "/" + tail;
        return 0;
      }
      long n = ::syscall(SYS_openat2, at.get(), comp.c_str(), &step, sizeof step);
      if (n < 0) return errno;
      at.reset(static_cast<int>(n));
    }
    return ELOOP;
  }

  // The text of symlink `name` in `dir` (kernel path `dpath`), where
  // /proc/self and /proc/thread-self reached on the way (not spelt at the
  // start of a path) mean the caller's, not the broker's.
  std::optional<std::string> link_text(int dir, const std::string& dpath, const std::string& name) {
    if (dpath == "/proc" && (name == "self" || name == "thread-self")) return rewrite_self("/proc/" + name);
    return read_link_at(dir, name);
  }

  // Is `p` in the broker's own /proc/PID (what /proc/self means to it)?
  static bool in_own_proc(const std::string& p) {
    static const std::string own = "/proc/" + std::to_string(::getpid());
    return p.compare(0, own.size(), own) == 0 && (p.size() == own.size() || p[own.size()] == '/');
  }

  std::string rewrite_self(const std::string& p) {
    auto swap = [&](std::string_view pre, const std::string& with) -> std::optional<std::string> {
      if (p.compare(0, pre.size(), pre) == 0 && (p.size() == pre.size() || p[pre.size()] == '/'))
        return with + p.substr(pre.size());
      return std::nullopt;
    };
    std::string t = std::to_string(tid);
    if (auto r = swap("/proc/self", "/proc/" + t)) return *r;
    if (auto r = swap("/proc/thread-self", "/proc/" + t + "/task/" + t)) return *r;
    return p;
  }

  // Resolves `path` from `start` (empty: absolute) as the kernel would;
  // `follow`: a final symlink is followed (and may dangle). A bare name
  // needs no second open of a directory to start from: `start_is_dir` says
  // `start` is one (the cwd); else a start that fstat shows to be one is
  // used as it is, and any other goes through openat2, which fails it with
  // ENOTDIR as the kernel would. A magic link of the caller's, as the final
  // name (followed) or on the way (/proc/self/fd/N/sub, /proc/self/cwd/.env),
  // is replaced by the object it names, fetched once (fetch_magic): what is
  // decided and what is acted on are that one object.
  int resolve(fd_t start, std::string path, bool follow, target& t, bool start_is_dir = false) {
    fd_t cur = std::move(start);
    bool cur_is_dir = start_is_dir && cur;
    for (int hops = 0;; ++hops) {
      if (path.empty()) return ENOENT;
      path = rewrite_self(path);
      bool trailing = false;
      while (path.size() > 1 && path.back() == '/') {
        path.pop_back();
        trailing = true;
      }
      std::string dir, last;
      auto slash = path.rfind('/');
      if (path == "/") {
        dir = "/";
        last = ".";
      } else if (slash == std::string::npos) {
        dir = ".";
        last = path;
      } else {
        dir = slash == 0 ? "/" : path.substr(0, slash);
        last = path.substr(slash + 1);
      }
      open_how how{};
      how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
      how.resolve = RESOLVE_NO_MAGICLINKS;
      int from = dir.front() == '/' ? AT_FDCWD : cur.get();
      if (from < 0 && from != AT_FDCWD) return EBADF;
      fd_t dfd;
      struct stat cst;
      if (dir == "." && cur && !cur_is_dir && ::fstat(cur.get(), &cst) == 0) cur_is_dir = S_ISDIR(cst.st_mode);
      if (dir == "." && cur_is_dir) {
        dfd = std::move(cur);
      } else {
        long d = ::syscall(SYS_openat2, from, dir.c_str(), &how, sizeof how);
        if (d < 0 && errno == ELOOP) {
          if (hops >= kMaxLinks) return ELOOP;
          if (int e = split_at_link(from, dir, trailing ? last + "/" : last, cur, path)) return e;
          cur_is_dir = false;
          continue;
        }
        if (d < 0) return errno;
        dfd.reset(static_cast<int>(d));
        // /proc/self or /proc/thread-self crossed as a link on the way
        // (/dev/fd -> /proc/self/fd): openat2 followed it as the broker's
        // own. Walked again link by link (split_at_link: link_text makes it
        // the caller's); a path that spells the broker's /proc/PID without
        // a link keeps it (decided as another process's, check).
        if (hops < kMaxLinks && in_own_proc(fd_path(dfd.get()))) {
          fd_t again;
          std::string rest;
          const int e = split_at_link(from, dir, trailing ? last + "/" : last, again, rest);
          if (e == 0) {
            cur = std::move(again);
            path = std::move(rest);
            cur_is_dir = false;
            continue;
          }
          if (e != ELOOP) return e;
        }
      }
      if (last == "." || last == "..") {
        long d2 = ::syscall(SYS_openat2, dfd.get(), last.c_str(), &how, sizeof how);
        if (d2 < 0) return errno;
        dfd.reset(static_cast<int>(d2));
        last = ".";
      }
      std::string dpath = fd_path(dfd.get());
      if (dpath.empty() || dpath.front() != '/') return ENOENT;
      t.full = last == "." ? dpath : (dpath == "/" ? "/" + last : dpath + "/" + last);
      t.exists = ::fstatat(dfd.get(), last.c_str(), &t.st, AT_SYMLINK_NOFOLLOW) == 0;
      if (!t.exists && errno != ENOENT) return errno;
      t.magic = false;
      if (t.exists && S_ISLNK(t.st.st_mode) && (follow || trailing)) {
        if (is_caller_magic(dpath, last)) {
          if (int e = fetch_magic(dfd.get(), last, t)) return e;
          t.dir = std::move(dfd);
          return 0;
        }
        if (hops >= kMaxLinks) return ELOOP;
        auto to = link_text(dfd.get(), dpath, last);
        if (!to) return errno;
        cur = std::move(dfd);
        cur_is_dir = true;
        path = *to;
        continue;
      }
      t.dir = std::move(dfd);
      t.last = last;
      return 0;
    }
  }

  // Resolve a path argument (read once) relative to a dirfd argument.
  int resolve_arg(int dirfd, std::uint64_t addr, bool follow, target& t, std::string* raw = nullptr) {
    std::string path;
    if (int e = read_string(addr, path)) return e;
    if (raw) *raw = path;
    fd_t start;
    if (int e = base(dirfd, path, start)) return e;
    // One check covers the string and the base: a thread still waiting now
    // was alive, with this TID, across both reads.
    if (!valid()) return ESRCH;
    // The cwd was opened O_DIRECTORY; a fetched dirfd is checked only if a
    // bare name needs it (resolve).
    return resolve(std::move(start), path, follow, t, dirfd == AT_FDCWD);
  }

  // Denied: report and answer.
  bool deny(const rules::verdict& v, int err = EACCES) {
    b.stats_.denied++;
    if (b.violation_) b.violation_(v);
    reply(0, v.errno_value ? v.errno_value : err);
    return true;
  }

  // The mode of a file the broker is about to create for the caller
  // (decide_setid); false (and answered, EPERM) when denied.
  bool check_new_mode(const target& t, mode_t mode) {
    auto v = rules::decide_setid(t.full.empty() ? t.last : t.full, false, 0, mode);
    return v || !deny(v);
  }

  // The decision for a resolved name; false (and answered) when denied.
  bool check(const target& t, rules::op o) {
    // An object without a name (pipe:, socket:, anon_inode:, an unlinked or
    // O_TMPFILE file) has nothing a rule could protect; a named one is
    // decided by the path read back from the broker's own descriptor.
    if (t.magic && (t.full.empty() || t.full.front() != '/' || t.st.st_nlink == 0)) return true;
    // /proc: writable only below the caller's own /proc/PID.
    if (t.full == "/proc" || t.full.rfind("/proc/", 0) == 0) {
      const pid_t tgid = caller_tgid();
      std::string_view rest = std::string_view(t.full).substr(std::min<std::size_t>(t.full.size(), 6));
      std::string_view first = rest.substr(0, rest.find('/'));
      bool own = tgid > 0 && all_digits(first) && (first == std::to_string(tid) || first == std::to_string(tgid)) &&
                 rest.size() > first.size();
      if (!own) return !deny(rules::verdict::deny(rules::kActionWrite, t.full, "X1: /proc of another process"));
      return true;
    }
    auto v = rules::decide(b.rules_, o, t.full);
    if (!v) return !deny(v);
    // The new branch of a `git worktree add` below a root (decide.hpp,
    // "`git worktree add` inside a writable root").
    if (o == rules::op::create && rules::is_branch_lock(b.rules_, t.full) && rules::is_git_worktree_add(parent_argv(tid)))
      return !deny(rules::verdict::deny(rules::kActionCreate, t.full, std::string(rules::kWorktreeAddReason)));
    // A magic link's object is known by its kernel path only: its directory
    // is opened for the git facts (check_git_dir_path).
    return t.magic ? check_git_dir_path(t.full) : check_git_dir(t, o, false);
  }

  // A rename, link or symlink puts something at `t`: over an ancestor of an
  // absent write-denied name it is denied (decide_over_absent); false (and
  // answered) then.
  bool check_placement(const target& t) {
    auto v = rules::decide_over_absent(b.rules_, t.exists ? rules::op::replace : rules::op::create, t.full);
    if (!v) return !deny(v);
    return true;
  }

  // decide_into_git for `path`; false (and answered) when denied.
  bool check_into_git(const std::string& path) {
    auto v = rules::decide_into_git(b.rules_, path);
    if (!v) return !deny(v);
    return true;
  }

  // A directory or symlink placed at `t`: decide_into_git, and the same
  // for a git directory known by its HEAD.
  bool check_into_git(const target& t) {
    return check_into_git(t.full) && check_git_dir(t, t.exists ? rules::op::replace : rules::op::create, true);
  }

  // ---- facts for decide_git_dir (decide.hpp, "Git directories by content") ----

  // `rel` from `dir` names something; an error other than ENOENT counts as
  // yes (fail closed: a yes only denies more).
  static bool holds(int dir, const std::string& rel) {
    struct stat st {};
    return ::fstatat(dir, rel.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT;
  }

  // The facts about `t`, on the broker's descriptor of its directory: which
  // of git_probes hold HEAD (reached by "../" from that descriptor: `t.full`
  // is its kernel path, so each probe is an ancestor of it), and, for a
  // new HEAD, whether the names git reads lie beside it.
  rules::git_facts git_facts_of(const target& t, rules::op o, bool subtree) {
    rules::git_facts f;
    const std::string dpath = t.last == "." ? t.full : t.full.substr(0, std::max<std::size_t>(1, t.full.rfind('/')));
    auto depth = [](const std::string& p) { return p == "/" ? std::size_t{0} : rules::path_components(p).size(); };
    for (const auto& a : rules::git_probes(b.rules_, t.full, subtree)) {
      std::string rel;
      for (std::size_t i = depth(a); i < depth(dpath); ++i) rel += "../";
      if (holds(t.dir.get(), rel + std::string(rules::kGitHead))) f.head_dirs.push_back(a);
    }
    if (o == rules::op::create && t.last == rules::kGitHead)
      for (auto n : rules::kGitDirNames) f.beside_git_names = f.beside_git_names || holds(t.dir.get(), std::string(n));
    return f;
  }

  // decide_git_dir for `t`; false (and answered) when denied.
  bool check_git_dir(const target& t, rules::op o, bool subtree) {
    auto v = rules::decide_git_dir(b.rules_, o, t.full, git_facts_of(t, o, subtree), subtree);
    if (!v) return !deny(v);
    return true;
  }

  // The same for a name known only by its kernel path (what a /proc/PID/fd
  // link names, reopened for writing): its directory is opened without
  // following anything; one that cannot be is denied (fail closed).
  bool check_git_dir_path(const std::string& full) {
    if (rules::git_probes(b.rules_, full, false).empty()) return true;
    target t;
    t.full = full;
    t.last = full.substr(full.rfind('/') + 1);
    const std::string dir = full.substr(0, std::max<std::size_t>(1, full.rfind('/')));
    open_how how{};
    how.flags = O_PATH | O_DIRECTORY | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long d = ::syscall(SYS_openat2, AT_FDCWD, dir.c_str(), &how, sizeof how);
    if (d < 0 || fd_path(static_cast<int>(d)) != dir) {
      if (d >= 0) ::close(static_cast<int>(d));
      return !deny(rules::verdict::deny(rules::kActionWrite, full,
                                        "X1: the directory of a reopened name cannot be checked (fail closed)"));
    }
    t.dir.reset(static_cast<int>(d));
    return check_git_dir(t, rules::op::write, false);
  }

  // A rename moves the directory `from` to `to`: denied when it holds HEAD.
  bool check_moved_dir(const target& from, const target& to) {
    if (!b.rules_.git || !from.exists || !S_ISDIR(from.st.st_mode) || from.last == ".") return true;
    if (!holds(from.dir.get(), from.last + "/" + std::string(rules::kGitHead))) return true;
    rules::git_facts f;
    f.moves_head_dir = true;
    auto v = rules::decide_git_dir(b.rules_, to.exists ? rules::op::replace : rules::op::create, to.full, f, true);
    if (!v) return !deny(v);
    return true;
  }

  // ---- facts for remove_fails / rename_fails (decide.hpp, "Calls that fail on their own") ----

  // What the broker sees of `t` on its own descriptors; `listed`: whether a
  // directory is empty is read too. A directory it cannot read counts as
  // empty: the call is then decided (and reported) as any other.
  static rules::name_facts name_facts_of(const target& t, bool listed) {
    rules::name_facts n;
    n.exists = t.exists;
    n.is_dir = t.exists && S_ISDIR(t.st.st_mode);
    n.empty_dir = true;
    if (!n.is_dir || !listed) return n;
    int fd = ::openat(t.dir.get(), t.last.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return n;
    DIR* dp = ::fdopendir(fd);
    if (!dp) {
      ::close(fd);
      return n;
    }
    while (const dirent* e = ::readdir(dp))
      if (std::strcmp(e->d_name, ".") != 0 && std::strcmp(e->d_name, "..") != 0) {
        n.empty_dir = false;
        break;
      }
    ::closedir(dp);
    return n;
  }

  struct umask_scope {
    mode_t old;
    explicit umask_scope(mode_t m) : old(::umask(m)) {}
    ~umask_scope() { ::umask(old); }
  };

  // The caller's umask (0777 when unknown: fail closed, nothing the caller
  // did not allow). Cached per thread while no umask() is in flight.
  mode_t caller_umask() {
    broker::caller_facts* f = known();
    const bool cacheable = f && b.umask_in_flight_.empty();
    if (cacheable && f->umask) return *f->umask;
    proc_status* s = caller_status();
    if (!s) return 0777;
    if (cacheable && f->alive()) {
      f->umask = s->umask;
      f->tgid = s->tgid;
    }
    return s->umask;
  }

  // umask(): observed, never decided. Every cached umask is forgotten and
  // the caller is "in flight" until its next notification; then the call
  // runs (CONTINUE: nothing in the caller's memory is involved).
  void do_umask() {
    for (auto& [t, f] : b.callers_) f->umask.reset();
    (void)known();
    if (std::find(b.umask_in_flight_.begin(), b.umask_in_flight_.end(), tid) == b.umask_in_flight_.end())
      b.umask_in_flight_.push_back(tid);
    seccomp_notif_resp resp{};
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    (void)::ioctl(b.listener_, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }

  // A notification from a thread proves its earlier umask() returned; a
  // thread whose pidfd says it exited has nothing in flight either. One
  // without a cache entry stays (umask is then read from /proc each call).
  void settle_umask_in_flight() {
    if (b.umask_in_flight_.empty()) return;
    std::erase_if(b.umask_in_flight_, [&](pid_t t) {
      if (t == tid) return true;
      auto it = b.callers_.find(t);
      return it != b.callers_.end() && !it->second->alive();
    });
  }

  // ---- the calls ----

  void do_open(int dirfd, std::uint64_t path_addr, int flags, mode_t mode) {
    const bool tmpfile = (flags & O_TMPFILE) == O_TMPFILE;
    const bool creat = (flags & O_CREAT) != 0 && !tmpfile;
    const bool follow = !(flags & O_NOFOLLOW) && !(creat && (flags & O_EXCL));
    target t;
    if (int e = resolve_arg(dirfd, path_addr, follow || tmpfile, t)) return reply(0, e);
    const bool writes = (flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC);
    if (tmpfile) {
      // An unnamed file in a directory: nothing is named until linkat.
    } else if (creat && (flags & O_EXCL) && t.exists && !t.magic) {
      return reply(0, EEXIST); // O_CREAT|O_EXCL on an existing name, symlink or not
    } else if (t.exists || t.magic) {
      if (writes && !check(t, rules::op::write)) return;
    } else if (creat) {
      if (!check(t, rules::op::create)) return;
    }
    // The mode of a creation, also when the name exists now: the act below
    // comes later, and must never create with a mode that was not checked.
    if ((tmpfile || creat) && !check_new_mode(t, mode)) return;
    // /dev/tty, by name or through a magic link to it: the caller's
    // controlling terminal, not the broker's (controlling_tty).
    if (t.exists && !tmpfile && !(flags & O_PATH) && is_dev_tty(t.st))
      if (int e = controlling_tty(t)) return reply(0, e);
    // O_NOCTTY: the broker (PID 1, a session leader without a terminal)
    // must never make a terminal it opens for the caller its own.
    int oflags = flags | O_CLOEXEC | O_NOCTTY;
    if (t.magic) oflags &= ~(O_CREAT | O_EXCL | O_NOFOLLOW);
    else if (!tmpfile && t.last != ".") oflags |= O_NOFOLLOW;
    // A name that existed when it was decided on is only opened: if it is
    // gone by the act (another thread, another session's broker, the host
    // unlinked it), the caller gets ENOENT instead of a new file that was
    // decided on as a write of an existing one (a P7 name, or a FIFO whose
    // open waits in a helper and creates later).
    if (creat && t.exists && !t.magic) oflags &= ~O_CREAT;
    if (!valid()) return;
    // The broker never waits in an open (a FIFO without its partner, a
    // file whose lease is being broken, a device): it opens with
    // O_NONBLOCK, and an open that would have waited waits in a helper
    // (open_waiting). A FIFO opened only for reading is not tried here
    // first: that open would pair with a waiting writer before the caller
    // holds the file.
    const bool may_wait = !(flags & (O_NONBLOCK | O_PATH));
    const bool read_only = (flags & O_ACCMODE) == O_RDONLY;
    if (may_wait && read_only && !t.magic && t.exists && S_ISFIFO(t.st.st_mode))
      return open_waiting(t.dir.get(), t.last, oflags, mode, flags);
    int fd;
    {
      umask_scope u(caller_umask());
      fd = ::openat(t.dir.get(), t.last.c_str(), oflags | (may_wait ? O_NONBLOCK : 0), mode);
    }
    if (fd < 0) {
      const int e = errno;
      struct stat now {};
      // EAGAIN: a lease being broken, a device that would wait; ENXIO: a
      // FIFO without a reader (a socket or a missing device gives it too).
      // A magic link's object is reopened by the helper through
      // /proc/self/fd/<obj>: the helper keeps that descriptor.
      if (may_wait && (e == EAGAIN || (e == ENXIO && ::fstatat(t.dir.get(), t.last.c_str(), &now,
                                                                t.magic ? 0 : AT_SYMLINK_NOFOLLOW) == 0 &&
                                        S_ISFIFO(now.st_mode))))
        return open_waiting(t.dir.get(), t.last, oflags, mode, flags, t.magic ? t.obj.get() : -1);
      return reply(0, e);
    }
    fd_t f(fd);
    if (may_wait) {
      struct stat st {};
      // The name became a FIFO after the check: the helper opens the very
      // file again, as the caller asked.
      if (read_only && ::fstat(fd, &st) == 0 && S_ISFIFO(st.st_mode))
        return open_waiting(-1, "/proc/self/fd/" + std::to_string(fd), oflags & ~(O_CREAT | O_EXCL | O_NOFOLLOW),
                            mode, flags, fd);
      const int fl = ::fcntl(fd, F_GETFL);
      if (fl < 0 || ::fcntl(fd, F_SETFL, fl & ~O_NONBLOCK) != 0) return reply(0, errno);
    }
    inject(b.listener_, req.id, std::move(f), flags);
  }

  // ---- /dev/tty ----

  // The character device /dev/tty (5:0): "the opening process's controlling
  // terminal", which the kernel resolves in the process that opens it.
  static bool is_dev_tty(const struct stat& st) {
    return S_ISCHR(st.st_mode) && ::major(st.st_rdev) == 5 && ::minor(st.st_rdev) == 0;
  }

  // The caller's controlling terminal: tty_nr, field 7 of /proc/TID/stat
  // (the kernel's new_encode_dev, which glibc's major()/minor() read); 0
  // without one, -1 when unreadable. The notification id is re-checked
  // before the open that uses it (do_open), so a reused TID is never
  // trusted.
  long long caller_tty_nr() {
    char p[64];
    std::snprintf(p, sizeof p, "/proc/%d/stat", tid);
    fd_t f(::open(p, O_RDONLY | O_CLOEXEC));
    if (!f) return -1;
    char buf[1024];
    ssize_t n = ::read(f.get(), buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    // comm (field 2) may hold spaces and ')': the fields after the last ')'.
    const char* rest = std::strrchr(buf, ')');
    if (!rest) return -1;
    char state = 0;
    long ppid = 0, pgrp = 0, session = 0;
    long long tty = 0;
    if (std::sscanf(rest + 1, " %c %ld %ld %ld %lld", &state, &ppid, &pgrp, &session, &tty) != 5) return -1;
    // Printed as an int: a pty above index 4095 reads negative.
    return static_cast<long long>(static_cast<std::uint32_t>(tty));
  }

  // `t` names /dev/tty: it becomes the caller's controlling terminal, the
  // Unix98 pty slave of the sandbox's devpts instance (the one ccsb-init
  // gives the command, T4, and every pty the command makes: mounts and new
  // namespaces are denied, so no other devpts is reachable inside, and
  // --new-session leaves the launcher's terminal outside). It is opened
  // O_PATH, checked (a character device of a devpts whose st_rdev is the
  // caller's tty_nr) and taken as a magic link's object: do_open reopens it
  // through /proc/self/fd/<obj> with the caller's flags (plus O_NOCTTY), in
  // a helper if that would wait. ENXIO without a controlling terminal, as
  // the kernel answers; EACCES (fail closed) for a terminal the broker
  // cannot name or that is not the caller's.
  int controlling_tty(target& t) {
    const long long nr = caller_tty_nr();
    if (nr < 0) return EACCES;
    if (nr == 0) return ENXIO;
    const dev_t want = static_cast<dev_t>(nr);
    const unsigned maj = ::major(want), min = ::minor(want);
    // Unix98 pty slaves: majors 136-143 (the kernel numbers them all 136
    // with a 20-bit minor now; 137-143 are the historical 256-per-major).
    if (maj < 136 || maj > 143) return EACCES;
    const std::string name = "/dev/pts/" + std::to_string((maj - 136) * 256 + min);
    open_how how{};
    how.flags = O_PATH | O_CLOEXEC;
    how.resolve = RESOLVE_NO_SYMLINKS | RESOLVE_NO_MAGICLINKS;
    long fd = ::syscall(SYS_openat2, AT_FDCWD, name.c_str(), &how, sizeof how);
    // Gone meanwhile (its master closed: the session lost it), as the
    // kernel would answer then.
    if (fd < 0) return errno == ENOENT ? ENXIO : EACCES;
    fd_t obj(static_cast<int>(fd));
    constexpr long kDevptsMagic = 0x1cd1;
    struct stat st {};
    struct statfs sf {};
    if (::fstat(obj.get(), &st) != 0 || !S_ISCHR(st.st_mode) || ::major(st.st_rdev) != maj ||
        ::minor(st.st_rdev) != min || ::fstatfs(obj.get(), &sf) != 0 || sf.f_type != kDevptsMagic)
      return EACCES;
    t.full = name;
    t.st = st;
    t.exists = true;
    t.magic = true;
    t.last = "/proc/self/fd/" + std::to_string(obj.get());
    t.obj = std::move(obj);
    return 0;
  }

  // The opened file `f` as the answer to notification `id`: installed in
  // the caller (ADDFD), the broker's own reference dropped, and only then
  // the answer sent. With ADDFD_FLAG_SEND the caller could run on while
  // the broker still held the file: a file it wrote and closed stayed open
  // for writing a moment longer (execve gave ETXTBSY, F_SETLEASE EAGAIN).
  // A caller that died meanwhile gets nothing.
  static void inject(int listener, std::uint64_t id, fd_t f, int flags) {
    seccomp_notif_addfd add{};
    add.id = id;
    add.flags = 0;
    add.srcfd = static_cast<std::uint32_t>(f.get());
    add.newfd = 0;
    add.newfd_flags = (flags & O_CLOEXEC) ? O_CLOEXEC : 0;
    const int remote = ::ioctl(listener, SECCOMP_IOCTL_NOTIF_ADDFD, &add);
    const int err = remote < 0 ? errno : 0;
    f.reset();
    if (remote < 0) {
      if (err != ENOENT) send_reply(listener, id, 0, err);
      return;
    }
    send_reply(listener, id, remote, 0);
  }

  // An open that waits (for a FIFO's partner, a lease break) is performed
  // by a helper (run_waiting) as the broker would: `name` relative to `dir`
  // (-1: absolute), the caller's umask.
  void open_waiting(int dir, const std::string& name, int oflags, mode_t mode, int flags, int reopen = -1) {
    const mode_t um = caller_umask();
    const int listener = b.listener_;
    const std::uint64_t id = req.id;
    run_waiting(
        [dir, name, oflags, mode, um]() -> int {
          ::umask(um);
          int fd = ::openat(dir < 0 ? AT_FDCWD : dir, name.c_str(), oflags, mode);
          return fd < 0 ? -errno : fd;
        },
        {dir, reopen},
        [listener, id, flags](const broker::attempt_result& r) {
          if (r.error || r.value < 0) return send_reply(listener, id, 0, r.error ? r.error : EINTR);
          inject(listener, id, fd_t(static_cast<int>(r.value)), flags);
        });
  }

  // A call that may wait in the kernel is made by a helper: a child of
  // ccsb-init that runs `act` (a descriptor, 0, or -errno) with only the
  // descriptors `keep` and sends the answer back. The call waits in
  // b.pending_ for that word, so the exec server goes on serving
  // (timeouts, kills, other execs); `complete` answers it. A caller that
  // dies meanwhile (a kill, a timeout) is noticed through its pidfd: the
  // helper is killed and the call abandoned.
  void run_waiting(const std::function<int()>& act, std::initializer_list<int> keep,
                   std::function<void(const broker::attempt_result&)> complete) {
    const auto waiting = std::count_if(b.pending_.begin(), b.pending_.end(),
                                       [](const auto& p) { return static_cast<bool>(p->helper); });
    if (static_cast<std::size_t>(waiting) >= kMaxWaitingCalls) return reply(0, EAGAIN);
    int watch = caller_pidfd();
    if (watch < 0) return reply(0, -watch);
    fd_t caller(::fcntl(watch, F_DUPFD_CLOEXEC, 3));
    if (!caller) return reply(0, EMFILE);
    int sp[2];
    if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return reply(0, errno);
    fd_t mine(sp[0]), theirs(sp[1]);
    std::vector<int> kept(keep);
    kept.push_back(theirs.get());
    int pidfd = -1;
    // A raw clone (fork's copy without its handlers): the server is
    // single-threaded, and the child only makes its call, sends and exits.
    long pid = ::syscall(SYS_clone, CLONE_PIDFD | SIGCHLD, nullptr, &pidfd, nullptr, nullptr);
    if (pid == 0) helper_main(act, kept, theirs.get());
    if (pid < 0) return reply(0, EAGAIN);
    fd_t helper(pidfd);
    theirs.reset();
    auto op = std::make_unique<broker::pending_op>();
    op->id = req.id;
    op->sock = std::make_shared<fd_t>(std::move(mine));
    op->events = POLLIN;
    op->caller = std::move(caller);
    op->helper = std::move(helper);
    auto word = op->sock;
    op->attempt = [word]() -> broker::attempt_result { return receive_word(word->get()); };
    op->complete = std::move(complete);
    // A backstop: the pidfd and the word wake the call; the retry only
    // re-checks that the notification is still pending.
    op->max_backoff = std::chrono::seconds(1);
    op->retry = std::chrono::steady_clock::now() + op->backoff;
    b.pending_.push_back(std::move(op));
  }

  // In the helper: never returns. Every descriptor but `keep` is closed
  // first (a copy of a session's socket would keep it open).
  [[noreturn]] static void helper_main(const std::function<int()>& act, std::vector<int> keep, int out) {
    std::sort(keep.begin(), keep.end());
    unsigned lo = 3;
    for (int k : keep) {
      if (k < 0) continue;
      if (static_cast<unsigned>(k) > lo) (void)::syscall(SYS_close_range, lo, static_cast<unsigned>(k) - 1, 0U);
      lo = std::max(lo, static_cast<unsigned>(k) + 1);
    }
    (void)::syscall(SYS_close_range, lo, ~0U, 0U);
    const int r = act();
    int err = r < 0 ? -r : 0;
    iovec iov{&err, sizeof err};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    if (r > 0) {
      m.msg_control = control;
      m.msg_controllen = sizeof control;
      cmsghdr* c = CMSG_FIRSTHDR(&m);
      c->cmsg_level = SOL_SOCKET;
      c->cmsg_type = SCM_RIGHTS;
      c->cmsg_len = CMSG_LEN(sizeof(int));
      std::memcpy(CMSG_DATA(c), &r, sizeof r);
    }
    (void)::sendmsg(out, &m, MSG_NOSIGNAL);
    ::_exit(0);
  }

  // The helper's word: not yet, its errno, or done (value: the file it
  // sent, else -1); a helper that ended without one (killed) fails the call
  // with EINTR.
  static broker::attempt_result receive_word(int sock) {
    int err = 0;
    iovec iov{&err, sizeof err};
    msghdr m{};
    m.msg_iov = &iov;
    m.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int))] = {};
    m.msg_control = control;
    m.msg_controllen = sizeof control;
    ssize_t n = ::recvmsg(sock, &m, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return {false, 0, 0};
    int fd = -1;
    for (cmsghdr* c = n > 0 ? CMSG_FIRSTHDR(&m) : nullptr; c; c = CMSG_NXTHDR(&m, c))
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS && c->cmsg_len == CMSG_LEN(sizeof(int)))
        std::memcpy(&fd, CMSG_DATA(c), sizeof fd);
    if (n != static_cast<ssize_t>(sizeof err)) {
      if (fd >= 0) ::close(fd);
      return {true, 0, EINTR};
    }
    if (fd >= 0 && err) ::close(fd);
    if (err) return {true, 0, err};
    return {true, fd, 0};
  }

  void do_mkdir(int dirfd, std::uint64_t path_addr, mode_t mode) {
    target t;
    if (int e = resolve_arg(dirfd, path_addr, false, t)) return reply(0, e);
    if (!t.exists && !check(t, rules::op::create)) return;
    umask_scope u(caller_umask());
    int r = ::mkdirat(t.dir.get(), t.last.c_str(), mode);
    reply(r, r < 0 ? errno : 0);
  }

  void do_mknod(int dirfd, std::uint64_t path_addr, mode_t mode, dev_t dev) {
    target t;
    if (int e = resolve_arg(dirfd, path_addr, false, t)) return reply(0, e);
    if (!check_new_mode(t, mode) || (!t.exists && !check(t, rules::op::create))) return;
    umask_scope u(caller_umask());
    int r = ::mknodat(t.dir.get(), t.last.c_str(), mode, dev);
    reply(r, r < 0 ? errno : 0);
  }

  // A loose object named in a linked worktree's common dir (decide.hpp,
  // "Linked worktrees of a protected checkout"): the broker copies `s` to a
  // file of its own beside `d`, checks that the copy inflates to an object
  // whose SHA-1 is `id` (git_object.hpp), and links that file to `d`; so
  // the session holds no descriptor of, and no other name for, the object.
  // `rename`: `s` goes, as rename would have it.
  void place_object(const target& s, const target& d, const std::string& id, bool rename) {
    auto refuse = [&](std::string why) {
      return deny(rules::verdict::deny(rules::kActionCreate, d.full, "X1: object " + id + ": " + why));
    };
    if (!s.exists || s.magic || !S_ISREG(s.st.st_mode)) return (void)refuse("only a regular file becomes an object");
    fd_t in(::openat(s.dir.get(), s.last.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC));
    if (!in) return reply(0, errno);
    static unsigned serial = 0;
    const std::string tmp = "tmp_obj_ccsb_" + std::to_string(::getpid()) + "_" + std::to_string(++serial);
    fd_t out(::openat(d.dir.get(), tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0444));
    if (!out) return reply(0, errno);
    z_stream z{};
    const bool inflating = inflateInit(&z) == Z_OK;
    bool ok = inflating;
    rules::sha1 h;
    std::string head;
    std::uint64_t total = 0;
    int zr = Z_OK;
    std::vector<unsigned char> buf(1 << 16), inflated(1 << 16);
    while (ok) {
      ssize_t n = ::read(in.get(), buf.data(), buf.size());
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) break;
      for (ssize_t off = 0; off < n;) {
        ssize_t w = ::write(out.get(), buf.data() + off, static_cast<std::size_t>(n - off));
        if (w <= 0) { ok = false; break; }
        off += w;
      }
      z.next_in = buf.data();
      z.avail_in = static_cast<uInt>(n);
      while (ok && z.avail_in > 0 && zr != Z_STREAM_END) {
        z.next_out = inflated.data();
        z.avail_out = static_cast<uInt>(inflated.size());
        zr = inflate(&z, Z_NO_FLUSH);
        if (zr != Z_OK && zr != Z_STREAM_END) ok = false;
        const std::size_t got = inflated.size() - z.avail_out;
        if (head.size() < 64) head.append(reinterpret_cast<const char*>(inflated.data()), std::min<std::size_t>(got, 64));
        h.update(inflated.data(), got);
        total += got;
      }
    }
    if (inflating) inflateEnd(&z);
    out.reset();
    ok = ok && zr == Z_STREAM_END && rules::loose_object_header_ok(head, total) && h.hex() == id;
    if (!ok) {
      ::unlinkat(d.dir.get(), tmp.c_str(), 0);
      return (void)refuse("its content does not inflate to an object with that id");
    }
    int r = ::linkat(d.dir.get(), tmp.c_str(), d.dir.get(), d.last.c_str(), 0);
    const int err = errno;
    ::unlinkat(d.dir.get(), tmp.c_str(), 0);
    if (r == 0 && rename) ::unlinkat(s.dir.get(), s.last.c_str(), 0);
    reply(r, r < 0 ? err : 0);
  }

  void do_symlink(std::uint64_t target_addr, int dirfd, std::uint64_t path_addr) {
    std::string contents;
    if (int e = read_string(target_addr, contents)) return reply(0, e);
    target t;
    if (int e = resolve_arg(dirfd, path_addr, false, t)) return reply(0, e);
    if (!t.exists) {
      if (!check(t, rules::op::create) || !check_placement(t) || !check_into_git(t)) return;
    }
    int r = ::symlinkat(contents.c_str(), t.dir.get(), t.last.c_str());
    reply(r, r < 0 ? errno : 0);
  }

  void do_unlink(int dirfd, std::uint64_t path_addr, int flags) {
    target t;
    if (int e = resolve_arg(dirfd, path_addr, false, t)) return reply(0, e);
    // "." (a path ending in . or ..): unlinkat refuses it whatever it names.
    if (t.exists && t.last != ".") {
      if (int e = rules::remove_fails(flags & AT_REMOVEDIR, name_facts_of(t, flags & AT_REMOVEDIR))) return reply(0, e);
      if (!check(t, rules::op::remove)) return;
    }
    int r = ::unlinkat(t.dir.get(), t.last.c_str(), flags & AT_REMOVEDIR);
    reply(r, r < 0 ? errno : 0);
  }

  void do_truncate(std::uint64_t path_addr, off_t len) {
    target t;
    if (int e = resolve_arg(AT_FDCWD, path_addr, true, t)) return reply(0, e);
    if ((t.exists || t.magic) && !check(t, rules::op::write)) return;
    std::string via;
    fd_t hold;
    if (t.magic) {
      via = t.last;
    } else {
      int fd = ::openat(t.dir.get(), t.last.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (fd < 0) return reply(0, errno);
      hold.reset(fd);
      via = "/proc/self/fd/" + std::to_string(fd);
    }
    // truncate() waits until a lease on the file is broken (up to
    // lease-break-time). A write open with O_NONBLOCK says EAGAIN then, and
    // the helper truncates; while the broker holds that open no lease can
    // be taken, so its own truncate() does not wait.
    fd_t writer;
    struct stat st {};
    if (::stat(via.c_str(), &st) == 0 && S_ISREG(st.st_mode)) {
      writer.reset(::open(via.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC));
      if (!writer && errno == EAGAIN) {
        const int listener = b.listener_;
        const std::uint64_t id = req.id;
        return run_waiting([via, len]() -> int { return ::truncate(via.c_str(), len) == 0 ? 0 : -errno; },
                           {hold.get(), t.dir.get(), t.magic ? t.obj.get() : -1},
                           [listener, id](const broker::attempt_result& r) {
                             if (r.value >= 0) ::close(static_cast<int>(r.value));
                             send_reply(listener, id, 0, r.error);
                           });
      }
    }
    int r = ::truncate(via.c_str(), len);
    reply(r, r < 0 ? errno : 0);
  }

  void do_rename(int odir, std::uint64_t oaddr, int ndir, std::uint64_t naddr, unsigned flags) {
    target s, d;
    if (int e = resolve_arg(odir, oaddr, false, s)) return reply(0, e);
    if (int e = resolve_arg(ndir, naddr, false, d)) return reply(0, e);
    const bool exchange = flags & RENAME_EXCHANGE;
    // "." on either side: renameat2 refuses it (EBUSY) whatever it names.
    const bool dot = s.last == "." || d.last == ".";
    if (!dot) {
      const bool noreplace = flags & RENAME_NOREPLACE;
      if (int e = rules::rename_fails(name_facts_of(s, false), name_facts_of(d, true), exchange, noreplace))
        return reply(0, e);
    }
    if (!dot && !(check_moved_dir(s, d) && (!exchange || check_moved_dir(d, s)))) return;
    if (s.exists && !check(s, exchange ? rules::op::replace : rules::op::remove)) return;
    if (const std::string id = rules::linked_object_id(b.rules_, d.full); !id.empty() && !d.exists && !exchange)
      return check_placement(d) ? place_object(s, d, id, true) : void();
    if (!check(d, d.exists ? rules::op::replace : rules::op::create) || !check_placement(d)) return;
    if (exchange && !check_placement(s)) return;
    // A directory or a symlink (a subtree, or a redirect to one) moved into
    // a git directory: decide_into_git.
    auto tree = [](const target& x) { return x.exists && (S_ISDIR(x.st.st_mode) || S_ISLNK(x.st.st_mode)); };
    if (tree(s) && !check_into_git(d)) return;
    if (exchange && tree(d) && !check_into_git(s)) return;
    // A directory moved out of a createAllow exception (P7).
    auto is_dir = [](const target& x) { return x.exists && S_ISDIR(x.st.st_mode); };
    if (is_dir(s))
      if (auto v = rules::decide_move_out(b.rules_, s.full, d.full); !v) return (void)deny(v);
    if (exchange && is_dir(d))
      if (auto v = rules::decide_move_out(b.rules_, d.full, s.full); !v) return (void)deny(v);
    long r = ::syscall(SYS_renameat2, s.dir.get(), s.last.c_str(), d.dir.get(), d.last.c_str(), flags);
    reply(r, r < 0 ? errno : 0);
  }

  void do_link(int odir, std::uint64_t oaddr, int ndir, std::uint64_t naddr, int flags) {
    std::string oldpath;
    if (int e = read_string(oaddr, oldpath)) return reply(0, e);
    target d;
    if (int e = resolve_arg(ndir, naddr, false, d)) return reply(0, e);
    if (d.exists) return reply(0, EEXIST); // linkat never replaces
    const std::string object_id = rules::linked_object_id(b.rules_, d.full);
    if ((object_id.empty() && !check(d, rules::op::create)) || !check_placement(d)) return;
    if (!object_id.empty() && (flags & AT_EMPTY_PATH) && oldpath.empty()) return (void)check(d, rules::op::create);
    if ((flags & AT_EMPTY_PATH) && oldpath.empty()) {
      fd_t src;
      if (int e = (odir == AT_FDCWD ? base(AT_FDCWD, ".", src) : fetch(odir, src))) return reply(0, e);
      if (!valid()) return;
      target st;
      st.magic = true;
      st.full = fd_path(src.get());
      if (::fstat(src.get(), &st.st) != 0) return reply(0, errno);
      if (!check(st, rules::op::write)) return;
      if (!S_ISREG(st.st.st_mode) && !check_into_git(d)) return; // an O_PATH descriptor of a symlink
      std::string via = "/proc/self/fd/" + std::to_string(src.get());
      int r = ::linkat(AT_FDCWD, via.c_str(), d.dir.get(), d.last.c_str(), AT_SYMLINK_FOLLOW);
      return reply(r, r < 0 ? errno : 0);
    }
    fd_t start;
    if (int e = base(odir, oldpath, start)) return reply(0, e);
    if (!valid()) return;
    target s;
    if (int e = resolve(std::move(start), oldpath, flags & AT_SYMLINK_FOLLOW, s)) return reply(0, e);
    // A magic link of the caller's names its object even without
    // AT_SYMLINK_FOLLOW (link("/proc/self/fd/N", NEW) links an O_TMPFILE).
    if (s.exists && !s.magic && S_ISLNK(s.st.st_mode) && is_caller_magic(fd_path(s.dir.get()), s.last))
      if (int e = fetch_magic(s.dir.get(), s.last, s)) return reply(0, e);
    if ((s.exists || s.magic) && !check(s, rules::op::write)) return;
    if (!object_id.empty()) return place_object(s, d, object_id, false);
    // A hard link to a symlink is a redirect too (a magic link's object, an
    // O_PATH descriptor of a symlink, is stat'ed as itself).
    if ((s.exists || s.magic) && !S_ISREG(s.st.st_mode) && !check_into_git(d)) return;
    int r = ::linkat(s.dir.get(), s.last.c_str(), d.dir.get(), d.last.c_str(), s.magic ? AT_SYMLINK_FOLLOW : 0);
    reply(r, r < 0 ? errno : 0);
  }

  // ---- access changes (chmod, chown, extended attributes) ----

  // The object a path-or-descriptor call acts on, fetched once: `by_fd`:
  // the caller's descriptor itself (pidfd_getfd; an O_PATH one fails the
  // act with EBADF as the kernel would); else the resolved name opened
  // O_PATH (the final symlink followed unless AT_SYMLINK_NOFOLLOW), or with
  // AT_EMPTY_PATH and "" the dirfd's object. false when answered.
  bool attr_object(bool by_fd, int dirfd, std::uint64_t path_addr, int at_flags, fd_t& obj) {
    if (by_fd) {
      if (int e = fetch(dirfd, obj)) return reply(0, e), false;
      return valid();
    }
    std::string path;
    if (int e = read_string(path_addr, path)) return reply(0, e), false;
    if (path.empty() && (at_flags & AT_EMPTY_PATH)) {
      if (int e = (dirfd == AT_FDCWD ? base(AT_FDCWD, ".", obj) : fetch(dirfd, obj))) return reply(0, e), false;
      return valid();
    }
    fd_t start;
    if (int e = base(dirfd, path, start)) return reply(0, e), false;
    if (!valid()) return false;
    target t;
    if (int e = resolve(std::move(start), path, !(at_flags & AT_SYMLINK_NOFOLLOW), t, dirfd == AT_FDCWD))
      return reply(0, e), false;
    if (t.magic) {
      obj = std::move(t.obj);
      return true;
    }
    if (!t.exists) return reply(0, ENOENT), false;
    int fd = ::openat(t.dir.get(), t.last.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return reply(0, errno), false;
    obj.reset(fd);
    return true;
  }

  // decide_attr on the object itself (its path read back from the broker's
  // descriptor); false when answered. No name (pipe:, anon_inode:, an
  // unlinked file): nothing to protect.
  bool check_attr(int obj, rules::attr_kind kind, mode_t new_mode, struct stat& st) {
    if (::fstat(obj, &st) != 0) return reply(0, errno), false;
    std::string p = fd_path(obj);
    if (p.empty()) return reply(0, EACCES), false;
    if (p.front() != '/' || st.st_nlink == 0) {
      // Without a name only the set-id rule applies: an O_TMPFILE file is
      // linked in later.
      if (kind == rules::attr_kind::mode)
        if (auto v = rules::decide_setid(p, S_ISDIR(st.st_mode), st.st_mode, new_mode); !v) return !deny(v);
      return true;
    }
    rules::attr_change c{kind, S_ISDIR(st.st_mode), st.st_mode, new_mode};
    auto v = rules::decide_attr(b.rules_, p, c);
    if (!v) return !deny(v);
    return true;
  }

  static std::string self_fd(int fd) { return "/proc/self/fd/" + std::to_string(fd); }

  void do_chmod(bool by_fd, int dirfd, std::uint64_t path_addr, mode_t mode, int at_flags) {
    if (at_flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) return reply(0, EINVAL);
    fd_t obj;
    struct stat st;
    if (!attr_object(by_fd, dirfd, path_addr, at_flags, obj) || !check_attr(obj.get(), rules::attr_kind::mode, mode, st))
      return;
    int r;
    if (by_fd) r = ::fchmod(obj.get(), mode);
    else if (S_ISLNK(st.st_mode)) return reply(0, EOPNOTSUPP); // a symlink's mode is not changed
    else r = ::chmod(self_fd(obj.get()).c_str(), mode);
    reply(r, r < 0 ? errno : 0);
  }

  void do_chown(bool by_fd, int dirfd, std::uint64_t path_addr, uid_t uid, gid_t gid, int at_flags) {
    if (at_flags & ~(AT_SYMLINK_NOFOLLOW | AT_EMPTY_PATH)) return reply(0, EINVAL);
    fd_t obj;
    struct stat st;
    if (!attr_object(by_fd, dirfd, path_addr, at_flags, obj) || !check_attr(obj.get(), rules::attr_kind::owner, 0, st))
      return;
    int r = by_fd ? ::fchown(obj.get(), uid, gid) : ::fchownat(obj.get(), "", uid, gid, AT_EMPTY_PATH);
    reply(r, r < 0 ? errno : 0);
  }

  // setxattr family (`value_addr` 0 and `remove`: removexattr); the name
  // and value are read once and the broker sets them on the object.
  void do_xattr(bool by_fd, bool follow, int dirfd, std::uint64_t path_addr, std::uint64_t name_addr,
                std::uint64_t value_addr, std::uint64_t size, int xflags, bool remove) {
    std::string name;
    if (int e = read_string(name_addr, name)) return reply(0, e);
    if (name.empty() || name.size() > XATTR_NAME_MAX) return reply(0, ERANGE);
    std::vector<char> value;
    if (!remove) {
      if (size > XATTR_SIZE_MAX) return reply(0, E2BIG);
      value.resize(static_cast<std::size_t>(size));
      if (int e = read_mem(value_addr, value.data(), value.size())) return reply(0, e);
    }
    fd_t obj;
    struct stat st;
    const auto kind = !remove && rules::is_acl_name(name) ? rules::attr_kind::acl_set : rules::attr_kind::xattr;
    if (!attr_object(by_fd, dirfd, path_addr, follow ? 0 : AT_SYMLINK_NOFOLLOW, obj) ||
        !check_attr(obj.get(), kind, 0, st))
      return;
    int r;
    if (by_fd) {
      r = remove ? ::fremovexattr(obj.get(), name.c_str())
                 : ::fsetxattr(obj.get(), name.c_str(), value.data(), value.size(), xflags);
    } else {
      // /proc/self/fd/<obj> reaches the object itself (a symlink object is
      // not followed further), so the l- variant of the call is used.
      std::string via = self_fd(obj.get());
      r = remove ? ::lremovexattr(via.c_str(), name.c_str())
                 : ::lsetxattr(via.c_str(), name.c_str(), value.data(), value.size(), xflags);
    }
    reply(r, r < 0 ? errno : 0);
  }

  // ---- limits ----

  // prlimit64 with a pid and a new limit (the filter lets pid 0 and pure
  // reads run): decide_prlimit, then CONTINUE. Only the pid is decided (a
  // register, not the caller's memory), and the process that matters, the
  // supervisor at PID 1, can never be replaced by another under that pid.
  void do_prlimit(pid_t target) {
    if (target < 0) return reply(0, ESRCH);
    rules::prlimit_facts f;
    f.target = target;
    const pid_t tgid = caller_tgid();
    f.target_is_caller = target == tid || target == tgid || (tgid > 0 && same_thread_group(target, tgid));
    f.same_pid_namespace = same_pid_namespace();
    f.supervisor_filters = seccomp_filters("/proc/self/status");
    if (!f.target_is_caller && target > 0)
      f.target_filters = seccomp_filters("/proc/" + std::to_string(target) + "/status");
    if (!f.target_is_caller && target > 0 && f.target_filters < 0 && f.same_pid_namespace &&
        ::kill(target, 0) != 0 && errno == ESRCH)
      return reply(0, ESRCH);
    auto v = rules::decide_prlimit(f);
    if (!v) return (void)deny(v, EPERM);
    seccomp_notif_resp resp{};
    resp.id = req.id;
    resp.flags = SECCOMP_USER_NOTIF_FLAG_CONTINUE;
    (void)::ioctl(b.listener_, SECCOMP_IOCTL_NOTIF_SEND, &resp);
  }

  bool same_thread_group(pid_t target, pid_t tgid) {
    struct stat st;
    std::string p = "/proc/" + std::to_string(tgid) + "/task/" + std::to_string(target);
    return ::stat(p.c_str(), &st) == 0;
  }

  bool same_pid_namespace() {
    struct stat mine, theirs;
    std::string p = "/proc/" + std::to_string(tid) + "/ns/pid";
    return ::stat("/proc/self/ns/pid", &mine) == 0 && ::stat(p.c_str(), &theirs) == 0 && mine.st_dev == theirs.st_dev &&
           mine.st_ino == theirs.st_ino;
  }

  // The Seccomp_filters count of a /proc/PID/status, -1 when unreadable.
  static int seccomp_filters(const std::string& status) {
    fd_t f(::open(status.c_str(), O_RDONLY | O_CLOEXEC));
    if (!f) return -1;
    char buf[4096];
    ssize_t n = ::read(f.get(), buf, sizeof buf - 1);
    if (n <= 0) return -1;
    buf[n] = '\0';
    const char* s = std::strstr(buf, "\nSeccomp_filters:\t");
    if (!s) return -1;
    return static_cast<int>(std::strtol(s + 18, nullptr, 10));
  }

  // ---- sockets ----

  static int sock_opt(int fd, int level, int name) {
    int v = 0;
    socklen_t l = sizeof v;
    return ::getsockopt(fd, level, name, &v, &l) == 0 ? v : -1;
  }

  static bool is_blocking(int fd) {
    int fl = ::fcntl(fd, F_GETFL);
    return fl >= 0 && !(fl & O_NONBLOCK);
  }

  // T2: does the kernel route `e` to the host itself? A UDP socket
  // "connected" there (no packet is sent) gets the destination itself as
  // its source address exactly when the route is local. Fail closed: a
  // probe that cannot run says yes.
  static bool host_local(const rules::endpoint& e) {
    const bool v4 = rules::is_v4(e);
    fd_t s(::socket(v4 ? AF_INET : AF_INET6, SOCK_DGRAM | SOCK_CLOEXEC, 0));
    if (!s) return true;
    sockaddr_storage to{}, from{};
    socklen_t len;
    if (v4) {
      auto* in = reinterpret_cast<sockaddr_in*>(&to);
      in->sin_family = AF_INET;
      in->sin_port = htons(e.port == 0 ? 9 : e.port);
      std::memcpy(&in->sin_addr, e.addr.data() + 12, 4);
      len = sizeof(sockaddr_in);
    } else {
      auto* in6 = reinterpret_cast<sockaddr_in6*>(&to);
      in6->sin6_family = AF_INET6;
      in6->sin6_port = htons(e.port == 0 ? 9 : e.port);
      std::memcpy(&in6->sin6_addr, e.addr.data(), 16);
      len = sizeof(sockaddr_in6);
    }
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&to), len) != 0)
      return !(errno == ENETUNREACH || errno == EHOSTUNREACH); // no route: not the host's
    socklen_t flen = sizeof from;
    if (::getsockname(s.get(), reinterpret_cast<sockaddr*>(&from), &flen) != 0) return true;
    auto src = rules::endpoint_of(&from, flen);
    return !src || src->addr == e.addr;
  }

  // What the kernel gets as the destination of a connect, sendto or
  // sendmsg, once decided: a copy of the caller's address, or for a
  // pathname Unix socket /proc/self/fd/N naming `pin`, an O_PATH descriptor
  // of the very inode that was checked.
  struct destination {
    sockaddr_storage ss{};
    socklen_t len{0};
    fd_t pin;
  };

  // Decides `in` (len bytes, 0: none) for socket `sock`; false when the call
  // is answered (denied, or failed as the kernel would fail it).
  bool decide_destination(int sock, const sockaddr_storage& in, socklen_t len, destination& d) {
    std::memcpy(&d.ss, &in, sizeof in);
    d.len = len;
    if (len < sizeof(sa_family_t)) return true;
    const std::size_t path_off = offsetof(sockaddr_un, sun_path);
    if (in.ss_family == AF_UNIX && len > path_off) {
      const auto* un = reinterpret_cast<const sockaddr_un*>(&in);
      if (un->sun_path[0] == '\0') {
        std::string name(un->sun_path + 1, len - path_off - 1);
        const auto& names = b.sockets_->abstract_names;
        bool own = std::find(names.begin(), names.end(), name) != names.end();
        auto v = rules::decide_abstract(b.rules_, name, own);
        if (!v) return !deny(v, EPERM);
        return true;
      }
      std::string path(un->sun_path, strnlen(un->sun_path, len - path_off));
      fd_t start;
      if (int e = base(AT_FDCWD, path, start)) return reply(0, e), false;
      if (!valid()) return false;
      target t;
      if (int e = resolve(std::move(start), path, true, t)) return reply(0, e), false;
      if (!t.exists) return reply(0, ENOENT), false;
      int pin = t.magic ? ::fcntl(t.obj.get(), F_DUPFD_CLOEXEC, 0)
                        : ::openat(t.dir.get(), t.last.c_str(), O_PATH | O_NOFOLLOW | O_CLOEXEC);
      if (pin < 0) return reply(0, errno), false;
      d.pin.reset(pin);
      struct stat st {};
      if (::fstat(pin, &st) != 0) return reply(0, errno), false;
      if (!S_ISSOCK(st.st_mode)) return reply(0, ECONNREFUSED), false;
      const auto& own_paths = b.sockets_->unix_paths;
      bool own = std::any_of(own_paths.begin(), own_paths.end(),
                             [&](const created_socket& c) { return c.dev == st.st_dev && c.ino == st.st_ino; });
      auto v = rules::decide_unix_connect(b.rules_, t.full, own);
      if (!v) return !deny(v, EPERM);
      sockaddr_un local{};
      local.sun_family = AF_UNIX;
      std::snprintf(local.sun_path, sizeof local.sun_path, "/proc/self/fd/%d", pin);
      std::memset(&d.ss, 0, sizeof d.ss);
      std::memcpy(&d.ss, &local, sizeof local);
      d.len = static_cast<socklen_t>(path_off + std::strlen(local.sun_path) + 1);
      return true;
    }
    if (b.rules_.host_net && (in.ss_family == AF_INET || in.ss_family == AF_INET6)) {
      auto ep = rules::endpoint_of(&in, len);
      if (!ep) return true; // the kernel answers EINVAL
      bool local = rules::classify(ep->addr) == rules::addr_class::ordinary && host_local(*ep);
      const int protocol = sock_opt(sock, SOL_SOCKET, SO_PROTOCOL);
      const auto& own = b.sockets_->inet;
      std::vector<rules::receiver> receivers;
      if (std::any_of(own.begin(), own.end(), [&](const rules::own_binding& o) { return o.ep.port == ep->port; }))
        receivers = receivers_of(*ep, protocol);
      auto v = rules::decide_inet(b.rules_, *ep, protocol, local, own, receivers);
      if (!v) return !deny(v, EPERM);
    }
    return true;
  }

  // A call that would make the broker wait (a connect in progress, a full
  // send buffer on a blocking socket) waits in b.pending_ instead: the
  // server polls its socket and retries it (broker::resume), so the broker
  // goes on answering the session's other calls meanwhile. SO_SNDTIMEO
  // bounds the wait as the kernel would.
  void wait_for(std::shared_ptr<fd_t> sock, std::function<broker::attempt_result()> attempt,
                broker::attempt_result at_deadline) {
    auto op = std::make_unique<broker::pending_op>();
    op->id = req.id;
    op->sock = std::move(sock);
    op->attempt = std::move(attempt);
    op->at_deadline = at_deadline;
    timeval tv{};
    socklen_t tl = sizeof tv;
    const auto now = std::chrono::steady_clock::now();
    if (::getsockopt(op->sock->get(), SOL_SOCKET, SO_SNDTIMEO, &tv, &tl) == 0 && (tv.tv_sec || tv.tv_usec))
      op->deadline = now + std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec);
    op->retry = now + op->backoff;
    b.pending_.push_back(std::move(op));
  }

  // A send, without waiting; one that would wait on a blocking socket waits
  // in b.pending_. The broker sends with MSG_NOSIGNAL and raises the SIGPIPE
  // of an EPIPE in the calling thread itself, as the kernel would have
  // (unless the caller asked for MSG_NOSIGNAL).
  void finish_send(std::shared_ptr<fd_t> sock, int flags, std::function<ssize_t(int)> send) {
    const pid_t tgid = caller_tgid(), caller = tid;
    auto attempt = [send = std::move(send), flags, tgid, caller]() -> broker::attempt_result {
      ssize_t n = send(flags | MSG_DONTWAIT | MSG_NOSIGNAL);
      int err = n < 0 ? errno : 0;
      if (n < 0 && (err == EAGAIN || err == EWOULDBLOCK)) return {false, 0, err};
      if (n < 0 && err == EPIPE && !(flags & MSG_NOSIGNAL) && tgid > 0)
        (void)::syscall(SYS_tgkill, tgid, caller, SIGPIPE);
      return {true, n, err};
    };
    auto first = attempt();
    if (first.done || (flags & MSG_DONTWAIT) || !is_blocking(sock->get())) return reply(first.value, first.error);
    wait_for(std::move(sock), std::move(attempt), {true, 0, EAGAIN});
  }

  // At most this much of one send is copied: a stream socket sends a prefix
  // (a short write), a datagram larger than this fails with EMSGSIZE.
  static constexpr std::size_t kMaxSend = 1U << 20;

  int send_size(int sock, std::uint64_t want, std::size_t& n) {
    if (want <= kMaxSend) return n = static_cast<std::size_t>(want), 0;
    if (sock_opt(sock, SOL_SOCKET, SO_TYPE) != SOCK_STREAM) return EMSGSIZE;
    n = kMaxSend;
    return 0;
  }

  // After a bind the broker performed: what the session now holds.
  void record_binding(int sock, const target* t) {
    if (t) {
      struct stat st {};
      if (::fstatat(t->dir.get(), t->last.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0)
        b.sockets_->unix_paths.push_back({t->full, st.st_dev, st.st_ino});
      return;
    }
    if (!b.rules_.host_net) return;
    sockaddr_storage ss{};
    socklen_t len = sizeof ss;
    if (::getsockname(sock, reinterpret_cast<sockaddr*>(&ss), &len) != 0) return;
    const std::size_t path_off = offsetof(sockaddr_un, sun_path);
    if (ss.ss_family == AF_UNIX && len > path_off + 1 && reinterpret_cast<sockaddr_un*>(&ss)->sun_path[0] == '\0') {
      b.sockets_->abstract_names.emplace_back(reinterpret_cast<sockaddr_un*>(&ss)->sun_path + 1, len - path_off - 1);
      return;
    }
    if (auto ep = rules::endpoint_of(&ss, len)) {
      struct stat st {};
      rules::own_binding o{*ep, sock_opt(sock, SOL_SOCKET, SO_PROTOCOL), false,
                           ::fstat(sock, &st) == 0 ? static_cast<std::uint64_t>(st.st_ino) : 0};
      if (ss.ss_family == AF_INET6) o.v6only = sock_opt(sock, IPPROTO_IPV6, IPV6_V6ONLY) == 1;
      b.sockets_->inet.push_back(o);
    }
  }

  // The address argument (read once) and our copy of the socket of a bind,
  // connect or sendto; false when the call is answered.
  bool sock_args(int sockfd, std::uint64_t addr, std::uint64_t addrlen, sockaddr_storage& ss, fd_t& sock) {
    if (addrlen > sizeof ss) return reply(0, EINVAL), false;
    if (int e = read_mem(addr, &ss, static_cast<std::size_t>(addrlen))) return reply(0, e), false;
    if (int e = fetch(sockfd, sock)) return reply(0, e), false;
    return true;
  }

  // bind: a pathname is checked as a created name (X1) and bound relative
  // to the resolved directory; anything else is bound as asked, by the
  // broker (the address may change in the caller's memory after the read).
  void do_bind(int sockfd, std::uint64_t addr, std::uint64_t addrlen) {
    sockaddr_storage ss{};
    fd_t sock;
    if (!sock_args(sockfd, addr, addrlen, ss, sock) || !valid()) return;
    const auto* un = reinterpret_cast<const sockaddr_un*>(&ss);
    const std::size_t path_off = offsetof(sockaddr_un, sun_path);
    if (!(addrlen > path_off && ss.ss_family == AF_UNIX && un->sun_path[0] != '\0')) {
      int r = ::bind(sock.get(), reinterpret_cast<sockaddr*>(&ss), static_cast<socklen_t>(addrlen));
      if (r == 0) record_binding(sock.get(), nullptr);
      return reply(r, r < 0 ? errno : 0);
    }
    std::string path(un->sun_path, strnlen(un->sun_path, static_cast<std::size_t>(addrlen) - path_off));
    fd_t start;
    if (int e = base(AT_FDCWD, path, start)) return reply(0, e);
    if (!valid()) return;
    target t;
    if (int e = resolve(std::move(start), path, false, t)) return reply(0, e);
    if (!check(t, rules::op::create)) return;
    sockaddr_un local{};
    local.sun_family = AF_UNIX;
    if (t.last.size() >= sizeof local.sun_path) return reply(0, ENAMETOOLONG);
    std::memcpy(local.sun_path, t.last.c_str(), t.last.size() + 1);
    if (::fchdir(t.dir.get()) != 0) return reply(0, errno);
    int r;
    int err = 0;
    {
      umask_scope u(caller_umask());
      r = ::bind(sock.get(), reinterpret_cast<sockaddr*>(&local), sizeof local);
      if (r < 0) err = errno;
    }
    (void)::chdir("/");
    if (r == 0) record_binding(sock.get(), &t);
    reply(r, err);
  }

  void do_connect(int sockfd, std::uint64_t addr, std::uint64_t addrlen) {
    sockaddr_storage ss{};
    fd_t sock;
    if (!sock_args(sockfd, addr, addrlen, ss, sock) || !valid()) return;
    auto d = std::make_shared<destination>();
    if (!decide_destination(sock.get(), ss, static_cast<socklen_t>(addrlen), *d)) return;
    auto s = std::make_shared<fd_t>(std::move(sock));
    const int fl = ::fcntl(s->get(), F_GETFL);
    const bool blocking = fl >= 0 && !(fl & O_NONBLOCK);
    // A blocking socket is connected without blocking: O_NONBLOCK on the
    // (shared) file only for the call itself; the caller's thread is inside
    // connect meanwhile.
    auto try_connect = [s, d, fl, blocking]() -> broker::attempt_result {
      if (blocking) (void)::fcntl(s->get(), F_SETFL, fl | O_NONBLOCK);
      int r = ::connect(s->get(), reinterpret_cast<const sockaddr*>(&d->ss), d->len);
      int err = r < 0 ? errno : 0;
      if (blocking) (void)::fcntl(s->get(), F_SETFL, fl);
      return {true, r, err};
    };
    auto first = try_connect();
    if (!blocking || (first.error != EINPROGRESS && first.error != EAGAIN)) return reply(first.value, first.error);
    if (first.error == EAGAIN) {
      // A Unix listener with a full backlog: the connect is tried again.
      return wait_for(s, [try_connect]() -> broker::attempt_result {
        auto r = try_connect();
        return r.error == EAGAIN ? broker::attempt_result{false, 0, EAGAIN} : r;
      }, {true, 0, EAGAIN});
    }
    // In progress: done once the socket is writable, with its SO_ERROR.
    wait_for(s, [s]() -> broker::attempt_result {
      pollfd p{s->get(), POLLOUT, 0};
      if (::poll(&p, 1, 0) <= 0) return {false, 0, EINPROGRESS};
      int err = 0;
      socklen_t l = sizeof err;
      if (::getsockopt(s->get(), SOL_SOCKET, SO_ERROR, &err, &l) != 0) err = errno;
      return {true, err ? -1 : 0, err};
    }, {true, 0, EINPROGRESS});
  }

  void do_sendto(int sockfd, std::uint64_t buf, std::uint64_t len, int flags, std::uint64_t addr,
                 std::uint64_t addrlen) {
    sockaddr_storage ss{};
    fd_t sock;
    if (!sock_args(sockfd, addr, addrlen, ss, sock)) return;
    std::size_t n = 0;
    if (int e = send_size(sock.get(), len, n)) return reply(0, e);
    auto data = std::make_shared<std::vector<char>>(n);
    if (int e = read_mem(buf, data->data(), n)) return reply(0, e);
    if (!valid()) return;
    auto d = std::make_shared<destination>();
    if (!decide_destination(sock.get(), ss, static_cast<socklen_t>(addrlen), *d)) return;
    auto s = std::make_shared<fd_t>(std::move(sock));
    finish_send(s, flags, [s, d, data](int fl) {
      return ::sendto(s->get(), data->data(), data->size(), fl, reinterpret_cast<const sockaddr*>(&d->ss), d->len);
    });
  }

  // sendmsg: the header, the destination, the data (gathered into one
  // buffer) and the control messages are copied once; SCM_RIGHTS entries
  // are the caller's descriptors, fetched and passed on as ours.
  // `len_out` (sendmmsg): where the length sent goes in the caller's
  // memory; the call then answers 1.
  void do_sendmsg(int sockfd, std::uint64_t msgp, int flags, std::uint64_t len_out = 0) {
    msghdr m{};
    if (int e = read_mem(msgp, &m, sizeof m)) return reply(0, e);
    if (m.msg_iovlen > UIO_MAXIOV) return reply(0, EMSGSIZE);
    sockaddr_storage ss{};
    socklen_t namelen = m.msg_name ? m.msg_namelen : 0;
    if (namelen > sizeof ss) return reply(0, EINVAL);
    if (int e = read_mem(reinterpret_cast<std::uint64_t>(m.msg_name), &ss, namelen)) return reply(0, e);
    std::vector<iovec> iov(m.msg_iovlen);
    if (int e = read_mem(reinterpret_cast<std::uint64_t>(m.msg_iov), iov.data(), iov.size() * sizeof(iovec)))
      return reply(0, e);
    std::uint64_t total = 0;
    for (const auto& v : iov) total += v.iov_len;
    fd_t sock;
    if (int e = fetch(sockfd, sock)) return reply(0, e);
    std::size_t n = 0;
    if (int e = send_size(sock.get(), total, n)) return reply(0, e);
    auto data = std::make_shared<std::vector<char>>(n);
    for (std::size_t i = 0, at = 0; i < iov.size() && at < n; ++i) {
      std::size_t take = std::min<std::size_t>(iov[i].iov_len, n - at);
      if (int e = read_mem(reinterpret_cast<std::uint64_t>(iov[i].iov_base), data->data() + at, take)) return reply(0, e);
      at += take;
    }
    constexpr std::size_t kMaxControl = 64U << 10;
    if (m.msg_controllen > kMaxControl) return reply(0, ENOBUFS);
    auto control = std::make_shared<std::vector<char>>(m.msg_control ? m.msg_controllen : 0);
    if (int e = read_mem(reinterpret_cast<std::uint64_t>(m.msg_control), control->data(), control->size()))
      return reply(0, e);
    if (!valid()) return;
    auto passed = std::make_shared<std::vector<fd_t>>();
    if (int e = translate_rights(*control, *passed)) return reply(0, e);
    auto d = std::make_shared<destination>();
    if (!decide_destination(sock.get(), ss, namelen, *d)) return;
    auto s = std::make_shared<fd_t>(std::move(sock));
    const pid_t caller = tid;
    finish_send(s, flags, [s, d, data, control, passed, len_out, caller](int fl) -> ssize_t {
      iovec one{data->data(), data->size()};
      msghdr out{};
      out.msg_name = d->len ? &d->ss : nullptr;
      out.msg_namelen = d->len;
      out.msg_iov = &one;
      out.msg_iovlen = 1;
      out.msg_control = control->empty() ? nullptr : control->data();
      out.msg_controllen = control->size();
      ssize_t n = ::sendmsg(s->get(), &out, fl);
      if (n < 0 || len_out == 0) return n;
      unsigned int sent = static_cast<unsigned int>(n);
      iovec local{&sent, sizeof sent}, remote{reinterpret_cast<void*>(len_out), sizeof sent};
      if (::process_vm_writev(caller, &local, 1, &remote, 1, 0) != static_cast<ssize_t>(sizeof sent)) {
        errno = EFAULT;
        return -1;
      }
      return 1;
    });
  }

  // sendmmsg: its first message as sendmsg (do_sendmsg, with msg_len
  // written back); none asked: 0, as the kernel answers.
  void do_sendmmsg(int sockfd, std::uint64_t msgvec, unsigned int vlen, int flags) {
    if (vlen == 0) return reply(0, 0);
    do_sendmsg(sockfd, msgvec + offsetof(mmsghdr, msg_hdr), flags, msgvec + offsetof(mmsghdr, msg_len));
  }

  // SCM_RIGHTS in a copied control buffer: each caller descriptor becomes
  // ours (kept open in `keep` until the send is done). A malformed header
  // fails as the kernel fails it (EINVAL).
  int translate_rights(std::vector<char>& control, std::vector<fd_t>& keep) {
    std::size_t at = 0;
    while (at + sizeof(cmsghdr) <= control.size()) {
      cmsghdr h;
      std::memcpy(&h, control.data() + at, sizeof h);
      if (h.cmsg_len < CMSG_LEN(0) || h.cmsg_len > control.size() - at) return EINVAL;
      if (h.cmsg_level == SOL_SOCKET && h.cmsg_type == SCM_RIGHTS) {
        std::size_t count = (h.cmsg_len - CMSG_LEN(0)) / sizeof(int);
        char* fds = control.data() + at + CMSG_LEN(0);
        for (std::size_t i = 0; i < count; ++i) {
          int theirs;
          std::memcpy(&theirs, fds + i * sizeof(int), sizeof theirs);
          fd_t mine;
          if (int e = fetch(theirs, mine)) return e == EBADF ? EBADF : e;
          int ours = mine.get();
          std::memcpy(fds + i * sizeof(int), &ours, sizeof ours);
          keep.push_back(std::move(mine));
        }
      }
      at += CMSG_ALIGN(h.cmsg_len);
    }
    return 0;
  }

  void dispatch() {
    const auto& a = req.data.args;
    auto i = [&](int k) { return static_cast<int>(a[k]); };
    settle_umask_in_flight();
    switch (req.data.nr) {
    case SYS_umask: return do_umask();
#ifdef SYS_open
    case SYS_open: return do_open(AT_FDCWD, a[0], i(1), static_cast<mode_t>(a[2]));
#endif
    case SYS_openat: return do_open(i(0), a[1], i(2), static_cast<mode_t>(a[3]));
#ifdef SYS_creat
    case SYS_creat: return do_open(AT_FDCWD, a[0], O_CREAT | O_WRONLY | O_TRUNC, static_cast<mode_t>(a[1]));
#endif
#ifdef SYS_mkdir
    case SYS_mkdir: return do_mkdir(AT_FDCWD, a[0], static_cast<mode_t>(a[1]));
#endif
    case SYS_mkdirat: return do_mkdir(i(0), a[1], static_cast<mode_t>(a[2]));
#ifdef SYS_mknod
    case SYS_mknod: return do_mknod(AT_FDCWD, a[0], static_cast<mode_t>(a[1]), static_cast<dev_t>(a[2]));
#endif
    case SYS_mknodat: return do_mknod(i(0), a[1], static_cast<mode_t>(a[2]), static_cast<dev_t>(a[3]));
#ifdef SYS_symlink
    case SYS_symlink: return do_symlink(a[0], AT_FDCWD, a[1]);
#endif
    case SYS_symlinkat: return do_symlink(a[0], i(1), a[2]);
#ifdef SYS_unlink
    case SYS_unlink: return do_unlink(AT_FDCWD, a[0], 0);
#endif
#ifdef SYS_rmdir
    case SYS_rmdir: return do_unlink(AT_FDCWD, a[0], AT_REMOVEDIR);
#endif
    case SYS_unlinkat: return do_unlink(i(0), a[1], i(2));
    case SYS_truncate: return do_truncate(a[0], static_cast<off_t>(a[1]));
#ifdef SYS_rename
    case SYS_rename: return do_rename(AT_FDCWD, a[0], AT_FDCWD, a[1], 0);
#endif
#ifdef SYS_renameat
    case SYS_renameat: return do_rename(i(0), a[1], i(2), a[3], 0);
#endif
    case SYS_renameat2: return do_rename(i(0), a[1], i(2), a[3], static_cast<unsigned>(a[4]));
#ifdef SYS_link
    case SYS_link: return do_link(AT_FDCWD, a[0], AT_FDCWD, a[1], 0);
#endif
    case SYS_linkat: return do_link(i(0), a[1], i(2), a[3], i(4));
    case SYS_bind: return do_bind(i(0), a[1], a[2] & 0xffffffffu);
    case SYS_connect: return do_connect(i(0), a[1], a[2] & 0xffffffffu);
    case SYS_sendto: return do_sendto(i(0), a[1], a[2], i(3), a[4], a[5] & 0xffffffffu);
    case SYS_sendmsg: return do_sendmsg(i(0), a[1], i(2));
#ifdef SYS_chmod
    case SYS_chmod: return do_chmod(false, AT_FDCWD, a[0], static_cast<mode_t>(a[1]), 0);
#endif
    case SYS_fchmod: return do_chmod(true, i(0), 0, static_cast<mode_t>(a[1]), 0);
    case SYS_fchmodat: return do_chmod(false, i(0), a[1], static_cast<mode_t>(a[2]), 0);
    case kSysFchmodat2: return do_chmod(false, i(0), a[1], static_cast<mode_t>(a[2]), i(3));
#ifdef SYS_chown
    case SYS_chown: return do_chown(false, AT_FDCWD, a[0], static_cast<uid_t>(a[1]), static_cast<gid_t>(a[2]), 0);
#endif
#ifdef SYS_lchown
    case SYS_lchown:
      return do_chown(false, AT_FDCWD, a[0], static_cast<uid_t>(a[1]), static_cast<gid_t>(a[2]), AT_SYMLINK_NOFOLLOW);
#endif
    case SYS_fchown: return do_chown(true, i(0), 0, static_cast<uid_t>(a[1]), static_cast<gid_t>(a[2]), 0);
    case SYS_fchownat: return do_chown(false, i(0), a[1], static_cast<uid_t>(a[2]), static_cast<gid_t>(a[3]), i(4));
    case SYS_setxattr: return do_xattr(false, true, AT_FDCWD, a[0], a[1], a[2], a[3], i(4), false);
    case SYS_lsetxattr: return do_xattr(false, false, AT_FDCWD, a[0], a[1], a[2], a[3], i(4), false);
    case SYS_fsetxattr: return do_xattr(true, false, i(0), 0, a[1], a[2], a[3], i(4), false);
    case SYS_removexattr: return do_xattr(false, true, AT_FDCWD, a[0], a[1], 0, 0, 0, true);
    case SYS_lremovexattr: return do_xattr(false, false, AT_FDCWD, a[0], a[1], 0, 0, 0, true);
    case SYS_fremovexattr: return do_xattr(true, false, i(0), 0, a[1], 0, 0, 0, true);
    case SYS_prlimit64: return do_prlimit(i(0));
    case SYS_sendmmsg: return do_sendmmsg(i(0), a[1], static_cast<unsigned int>(a[2]), i(3));
    default: return reply(0, ENOSYS);
    }
  }
};

broker::broker(int listener, ccsb::broker::rule_set r, socket_registry sockets,
               std::function<void(const ccsb::broker::verdict&)> v)
    : listener_(listener), rules_(std::move(r)), violation_(std::move(v)), sockets_(std::move(sockets)) {
  seccomp_notif_sizes sizes{};
  if (::syscall(SYS_seccomp, SECCOMP_GET_NOTIF_SIZES, 0, &sizes) != 0) {
    sizes.seccomp_notif = sizeof(seccomp_notif);
    sizes.seccomp_notif_resp = sizeof(seccomp_notif_resp);
  }
  req_buf_.assign(std::max<std::size_t>(sizes.seccomp_notif, sizeof(seccomp_notif)), 0);
  resp_buf_.assign(std::max<std::size_t>(sizes.seccomp_notif_resp, sizeof(seccomp_notif_resp)), 0);
}

broker::~broker() {
  if (listener_ >= 0) ::close(listener_);
}

std::vector<std::pair<int, short>> broker::waiting_fds() const {
  std::vector<std::pair<int, short>> v;
  for (const auto& p : pending_) {
    v.emplace_back(p->sock->get(), p->events);
    if (p->caller) v.emplace_back(p->caller.get(), static_cast<short>(POLLIN));
  }
  return v;
}

std::optional<std::chrono::steady_clock::time_point> broker::next_wakeup() const {
  std::optional<std::chrono::steady_clock::time_point> t;
  for (const auto& p : pending_) {
    auto w = std::min(p->retry, p->deadline);
    if (!t || w < *t) t = w;
  }
  return t;
}

void broker::resume(const std::vector<int>& ready) {
  const auto now = std::chrono::steady_clock::now();
  std::erase_if(pending_, [&](const std::unique_ptr<pending_op>& p) {
    auto is_ready = [&](int fd) { return std::find(ready.begin(), ready.end(), fd) != ready.end(); };
    const bool woke = is_ready(p->sock->get()) || (p->caller && is_ready(p->caller.get()));
    if (woke || now >= p->retry) {
      // A caller that died (a kill, a timeout) has no call left to answer.
      if (::ioctl(listener_, SECCOMP_IOCTL_NOTIF_ID_VALID, &p->id) != 0) return true;
      auto r = p->attempt();
      if (r.done) {
        if (p->complete) p->complete(r);
        else send_reply(listener_, p->id, r.value, r.error);
        return true;
      }
      p->backoff = std::min(p->backoff * 2, p->max_backoff);
      p->retry = now + p->backoff;
    }
    if (now >= p->deadline) {
      send_reply(listener_, p->id, p->at_deadline.value, p->at_deadline.error);
      return true;
    }
    return false;
  });
}

bool broker::handle_one() {
  std::fill(req_buf_.begin(), req_buf_.end(), 0);
  auto* req = reinterpret_cast<seccomp_notif*>(req_buf_.data());
  if (::ioctl(listener_, SECCOMP_IOCTL_NOTIF_RECV, req) != 0) {
    // EINTR: a signal; ENOENT: the caller died before we got it.
    return errno == EINTR || errno == ENOENT;
  }
  stats_.handled++;
  call c(*this, *req);
  c.dispatch();
  return true;
}

} // namespace ccsb::init
