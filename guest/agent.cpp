// ccsb-guest-agent — PID 1 of the microvm backend's guest (X4,
// docs/microvm.md), started by the initramfs's /init once the modules are
// loaded. It serves the launcher over the virtio-serial port ccsb.ctl
// (ccsb/protocol/guest.hpp):
//
//   1. says hello (protocol version, guest kernel), then takes the set-up:
//      9p shares and symlinks of the guest's root;
//   2. builds that root on a tmpfs (/sysroot): the shares (read-only ones
//      mounted MS_RDONLY; QEMU serves them readonly=on as well, so a guest
//      root that remounts them still cannot write), /proc, /sys, /dev, a
//      devpts of its own, /tmp and an empty HOME; brings up lo (the VM has
//      no NIC); chroots into it;
//      makes the P5 paths the host names read-only (a read-only bind of
//      each over itself); starts the egress relay when the VM has the
//      egress port (egress_relay.hpp: the proxy listeners on lo, before any
//      command);
//   3. starts the guest's supervisor: ccsb-init (copied from the initramfs
//      to the read-only /run/ccsb/ccsb-init), as the unprivileged guest user
//      the host names (never guest root: it can neither remount a share nor
//      unmount a P5 bind), with no_new_privs and the L6 baseline seccomp
//      filter (the build's precompiled program), PID 1 of a PID and mount
//      namespace of its own, with the options the host sent (`supervise`:
//      the X1 broker's rules, the Landlock ruleset); says ready once it is;
//   4. relays each exec to it over the supervisor protocol (seqpacket, the
//      descriptors with the message): pipes for stdin, stdout and stderr, or
//      a terminal it opens in the guest; the host's stdin chunks (each
//      acknowledged once written), resize and kill; relays output, started,
//      exited (after the last output), exec-failed, violation and landlock
//      back; reaps every orphan (it is PID 1);
//   5. on poweroff (or when the port closes) kills the supervisor (its PID
//      namespace ends with it), syncs and powers the VM off.
//
// Static (like ccsb-init): the initramfs has no C library.
#include "ccsb/protocol/guest.hpp"
#if !CCSB_PRECOMPILED_BPF
#error "the guest agent needs the build's precompiled L6 program (a native build: init/CMakeLists.txt)"
#endif
#include <ccsb/precompiled_bpf.hpp>
#include "ccsb/render/bwrap/layout.hpp"
#include "ccsb/sys/seqpacket.hpp"
#include "egress_relay.hpp"
#include "ports.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <grp.h>
#include <sys/mount.h>
#include <linux/seccomp.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/mman.h>
#include <sched.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace g = ccsb::protocol::guest;

namespace {

int port = -1;

void say(const std::string& line) { std::fprintf(stderr, "ccsb-agent: %s\n", line.c_str()); }

[[noreturn]] void power_off() {
  ::sync();
  ::reboot(RB_POWER_OFF);
  ::_exit(1); // PID 1 exiting panics the kernel; panic=-1 and -no-reboot end the VM
}

bool send(const g::agent_message& m) {
  const std::string f = g::encode(m);
  std::size_t off = 0;
  while (off < f.size()) {
    ssize_t w = ::write(port, f.data() + off, f.size() - off);
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno == EAGAIN) {
      pollfd p{port, POLLOUT, 0};
      ::poll(&p, 1, -1);
      continue;
    }
    if (w <= 0) return false;
    off += static_cast<std::size_t>(w);
  }
  return true;
}

int mkdirs(const std::string& path) {
  for (std::size_t i = 1; i <= path.size(); ++i) {
    if (i != path.size() && path[i] != '/') continue;
    std::string p = path.substr(0, i);
    if (::mkdir(p.c_str(), 0755) != 0 && errno != EEXIST) return -1;
  }
  return 0;
}

std::string err_text(const std::string& what) { return what + ": " + std::strerror(errno); }

// ccsb-init in the guest's root where the native sandbox has it
// (layout.hpp's kGuestInit: the session's read-only /run/ccsb, inside the
// Landlock rx paths), copied there from the initramfs before the chroot.
const std::string kInitPath(ccsb::kGuestInit);

// The initramfs's /ccsb-init at `to` (mode 0555, root's, its directory
// read-only afterwards).
std::string install_init(const std::string& to) {
  const std::string dir = to.substr(0, to.rfind('/'));
  if (mkdirs(dir) != 0) return err_text("mkdir " + dir);
  int in = ::open("/ccsb-init", O_RDONLY | O_CLOEXEC);
  if (in < 0) return err_text("the guest image's /ccsb-init");
  int out = ::open(to.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0555);
  if (out < 0) {
    ::close(in);
    return err_text("create " + to);
  }
  char buf[65536];
  ssize_t n;
  bool ok = true;
  while ((n = ::read(in, buf, sizeof buf)) > 0)
    if (::write(out, buf, static_cast<std::size_t>(n)) != n) ok = false;
  ok = ok && n == 0 && ::fchmod(out, 0555) == 0;
  ::close(in);
  ::close(out);
  if (!ok) return err_text("copy /ccsb-init to " + to);
  if (::mount(dir.c_str(), dir.c_str(), nullptr, MS_BIND, nullptr) != 0 ||
      ::mount(nullptr, dir.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV, nullptr) != 0)
    return err_text("making " + dir + " read-only");
  return {};
}

// The guest's root: a tmpfs with the links, the kernel and tmpfs file
// systems, then the shares (a bind below /tmp lands on the guest's /tmp).
std::string build_root(const std::vector<g::share>& shares, const std::vector<g::link>& links) {
  const std::string root = "/sysroot";
  if (::mount("tmpfs", root.c_str(), "tmpfs", MS_NOSUID, "mode=0755") != 0) return err_text("tmpfs on /sysroot");
  for (const auto& l : links) {
    std::string at = root + l.guest_path;
    if (mkdirs(at.substr(0, at.rfind('/'))) != 0) return err_text("mkdir for " + l.guest_path);
    if (::symlink(l.target.c_str(), at.c_str()) != 0) return err_text("symlink " + l.guest_path);
  }
  struct fs {
    const char* what;
    const char* type;
    const char* at;
    unsigned long flags;
    const char* opts;
  };
  const fs kernel_fs[] = {
      {"proc", "proc", "/proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, ""},
      {"sysfs", "sysfs", "/sys", MS_NOSUID | MS_NODEV | MS_NOEXEC | MS_RDONLY, ""},
      {"devtmpfs", "devtmpfs", "/dev", MS_NOSUID | MS_NOEXEC, "mode=0755"},
      // The terminals ccsb-init opens (T4): /dev/ptmx finds this instance.
      {"devpts", "devpts", "/dev/pts", MS_NOSUID | MS_NOEXEC, "newinstance,ptmxmode=0666,mode=0620"},
      {"tmpfs", "tmpfs", "/tmp", MS_NOSUID | MS_NODEV, "mode=1777"},
      {"tmpfs", "tmpfs", "/root", MS_NOSUID | MS_NODEV, "mode=0700"},
      {"tmpfs", "tmpfs", "/run", MS_NOSUID | MS_NODEV, "mode=0755"},
  };
  for (const auto& f : kernel_fs) {
    std::string at = root + f.at;
    if (mkdirs(at) != 0) return err_text(std::string("mkdir ") + f.at);
    if (::mount(f.what, at.c_str(), f.type, f.flags, f.opts) != 0) return err_text(std::string("mounting ") + f.at);
  }
  for (const auto& s : shares) {
    std::string at = root + s.guest_path;
    if (mkdirs(at) != 0) return err_text("mkdir " + s.guest_path);
    unsigned long flags = MS_NOSUID | MS_NODEV | (s.writable ? 0 : MS_RDONLY);
    // cache=none: a write is on the host when write(2) returns (the host
    // sees the workspace as the command leaves it).
    const std::string opts = "trans=virtio,version=9p2000.L,msize=262144,cache=none";
    if (::mount(s.tag.c_str(), at.c_str(), "9p", flags, opts.c_str()) != 0)
      return err_text("mounting share " + s.tag + " at " + s.guest_path);
  }
  if (auto why = install_init(root + kInitPath); !why.empty()) return why;
  if (::chdir(root.c_str()) != 0 || ::chroot(".") != 0 || ::chdir("/") != 0) return err_text("chroot");
  return {};
}

// P5: each existing path read-only, in the chrooted guest root. A symlink is
// left alone (a bind would follow it to wherever it points).
std::string protect_paths(const std::vector<g::protect>& paths) {
  for (const auto& p : paths) {
    struct stat st{};
    if (::lstat(p.guest_path.c_str(), &st) != 0 || S_ISLNK(st.st_mode)) continue;
    if (::mount(p.guest_path.c_str(), p.guest_path.c_str(), nullptr, MS_BIND | MS_REC, nullptr) != 0 ||
        ::mount(nullptr, p.guest_path.c_str(), nullptr, MS_BIND | MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV,
                nullptr) != 0)
      return err_text("making " + p.guest_path + " read-only");
  }
  return {};
}

void loopback_up() {
  int s = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (s < 0) return;
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  if (::ioctl(s, SIOCGIFFLAGS, &ifr) == 0) {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    ::ioctl(s, SIOCSIFFLAGS, &ifr);
  }
  ::close(s);
}

// --- the guest's supervisor -------------------------------------------------

g::user identity{65534, 65534}; // the unprivileged guest user (the host's `user`)
int sup = -1;            // the exec channel to the guest's ccsb-init
pid_t sup_pid = -1;
bool sup_ready = false;

// ccsb-init, as the guest user with no_new_privs, PID 1 of a PID namespace
// of its own with a /proc of that namespace (its kill of an exec's session
// reads /proc), given its options in a memfd (--options-fd, as bwrap's
// ccsb-init gets them). The agent is guest root and needs no user namespace
// or bwrap for this: the guest kernel is the sandbox's own.
std::string start_supervisor(const g::supervise& v) {
  auto blob = ccsb::protocol::to_options_blob(v.args);
  if (!blob) return "the supervisor's options: " + blob.err().what();
  int opts = static_cast<int>(::syscall(SYS_memfd_create, "ccsb-init-options", MFD_CLOEXEC));
  if (opts < 0) return err_text("memfd_create");
  if (::write(opts, blob->data(), blob->size()) != static_cast<ssize_t>(blob->size()) || ::lseek(opts, 0, SEEK_SET) != 0)
    return err_text("writing the supervisor's options");
  int sp[2];
  if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sp) != 0) return err_text("socketpair (supervisor)");
  long pid = ::syscall(SYS_clone, CLONE_NEWPID | CLONE_NEWNS | SIGCHLD, nullptr, nullptr, nullptr, nullptr);
  if (pid < 0) return err_text("clone (the supervisor's PID namespace)");
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    const int ch = ::fcntl(sp[1], F_DUPFD, 10), of = ::fcntl(opts, F_DUPFD, 10);
    if (ch < 0 || of < 0 || ::dup2(ch, g::kSupervisorChannelFd) < 0 || ::dup2(of, g::kSupervisorChannelFd + 1) < 0)
      ::_exit(125);
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    if (::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0 ||
        ::mount("proc", "/proc", "proc", MS_NOSUID | MS_NODEV | MS_NOEXEC, nullptr) != 0 ||
        ::setgroups(0, nullptr) != 0 || ::setresgid(identity.gid, identity.gid, identity.gid) != 0 ||
        ::setresuid(identity.uid, identity.uid, identity.uid) != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 ||
        ::chdir("/") != 0) {
      say(err_text("entering the supervisor's namespaces as the guest user"));
      ::_exit(125);
    }
    // L6: the baseline filter bwrap applies before it execs ccsb-init on a
    // host (no new namespaces, no ptrace, no keyctl, no bpf, ...): the guest
    // kernel is the boundary, and this keeps its attack surface the host's
    // sandbox has. Inherited by everything ccsb-init starts.
    sock_fprog l6{static_cast<unsigned short>(std::size(ccsb::precompiled::kBaseline)),
                  const_cast<sock_filter*>(ccsb::precompiled::kBaseline)};
    if (::prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &l6) != 0) {
      say(err_text("applying the L6 seccomp filter"));
      ::_exit(125);
    }
    const std::string fd = std::to_string(g::kSupervisorChannelFd + 1);
    char* argv[] = {const_cast<char*>("ccsb-init"), const_cast<char*>("--options-fd"), const_cast<char*>(fd.c_str()),
                    nullptr};
    char* envp[] = {nullptr}; // every exec carries its complete environment
    ::execve(kInitPath.c_str(), argv, envp);
    say(err_text("exec ccsb-init"));
    ::_exit(125);
  }
  ::close(sp[1]);
  ::close(opts);
  sup = sp[0];
  sup_pid = static_cast<pid_t>(pid);
  return {};
}

bool to_supervisor(const ccsb::protocol::launcher_message& m, const std::vector<int>& fds = {}) {
  return ccsb::sys::send_datagram(sup, ccsb::protocol::encode(m), fds);
}

// --- execs ---------------------------------------------------------------------

struct running {
  int in{-1};  // the command's stdin pipe, or the terminal's master (a copy)
  int out{-1}; // its stdout pipe, or the terminal's master
  int err{-1};
  bool terminal{false};
  bool started{false};
  std::deque<std::string> input; // stdin chunks not yet written (at most kStdinWindow)
  std::size_t written{0};        // of input.front()
  bool input_eof{false};
  std::optional<int> status; // exited, reported after the output
};
std::map<ccsb::protocol::exec_id, running> execs;

void close_fd(int& fd) {
  if (fd >= 0) ::close(fd);
  fd = -1;
}

void start_exec(const g::exec& e) {
  ccsb::protocol::exec_request rq{e.id, e.workdir, e.terminal, e.argv, e.env};
  running r;
  r.terminal = e.terminal.has_value();
  std::vector<int> theirs;
  if (!r.terminal) {
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0) return (void)send(g::exec_failed{e.id, 125, err_text("pipe")});
    if (::pipe2(out, O_CLOEXEC) != 0) {
      ::close(in[0]), ::close(in[1]);
      return (void)send(g::exec_failed{e.id, 125, err_text("pipe")});
    }
    if (::pipe2(err, O_CLOEXEC) != 0) {
      for (int fd : {in[0], in[1], out[0], out[1]}) ::close(fd);
      return (void)send(g::exec_failed{e.id, 125, err_text("pipe")});
    }
    theirs = {in[0], out[1], err[1]};
    r.in = in[1];
    r.out = out[0];
    r.err = err[0];
    for (int fd : {r.in, r.out, r.err}) ::fcntl(fd, F_SETFL, O_NONBLOCK);
  }
  const bool sent = to_supervisor(rq, theirs);
  for (int fd : theirs) ::close(fd);
  if (!sent) {
    close_fd(r.in), close_fd(r.out), close_fd(r.err);
    send(g::exec_failed{e.id, 125, err_text("the guest's supervisor is gone")});
    return;
  }
  execs[e.id] = std::move(r);
}

// Relays what is readable on fd; closes it at EOF (EIO: a terminal whose
// last slave is closed).
void drain(ccsb::protocol::exec_id id, int& fd, int stream) {
  char buf[g::kMaxOutputChunk];
  for (;;) {
    ssize_t n = ::read(fd, buf, sizeof buf);
    if (n > 0) {
      send(g::output{id, stream, std::string(buf, static_cast<std::size_t>(n))});
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && errno == EAGAIN) return;
    close_fd(fd);
    return;
  }
}

// Writes the pending stdin; each chunk written whole is acknowledged (the
// host's window); a reader that is gone drops the rest, acknowledged too.
void feed_input(ccsb::protocol::exec_id id, running& r) {
  while (!r.input.empty()) {
    if (r.in >= 0) {
      const std::string& c = r.input.front();
      ssize_t w = ::write(r.in, c.data() + r.written, c.size() - r.written);
      if (w < 0 && errno == EINTR) continue;
      if (w < 0 && errno == EAGAIN) return;
      if (w > 0) {
        r.written += static_cast<std::size_t>(w);
        if (r.written < c.size()) continue;
      } else {
        close_fd(r.in);
      }
    }
    r.input.pop_front();
    r.written = 0;
    send(g::stdin_ack{id});
  }
  if (r.input_eof && !r.terminal) close_fd(r.in);
}

void finish_done() {
  for (auto it = execs.begin(); it != execs.end();) {
    auto& r = it->second;
    if (r.status && r.out < 0 && r.err < 0) {
      close_fd(r.in);
      bool sig = WIFSIGNALED(*r.status);
      send(g::exited{it->first, sig, sig ? WTERMSIG(*r.status) : WEXITSTATUS(*r.status)});
      it = execs.erase(it);
    } else {
      ++it;
    }
  }
}

[[noreturn]] void shut_down() {
  if (sup_pid > 0) ::kill(sup_pid, SIGKILL); // its PID namespace, every command in it, ends with it
  power_off();
}

// One message of the guest's ccsb-init, relayed to the host.
void from_supervisor() {
  for (;;) {
    auto d = ccsb::sys::recv_datagram(sup, ccsb::protocol::kMaxMessage);
    if (d.error == EAGAIN) return;
    if (d.eof || d.error) {
      say("the guest's supervisor closed its channel");
      shut_down();
    }
    std::vector<int> fds = d.fds;
    auto m = d.truncated ? ccsb::result<ccsb::protocol::supervisor_message>(
                               ccsb::make_error(ccsb::errc::invalid_argument, "supervisor", "truncated message"))
                         : ccsb::protocol::decode_supervisor(d.text, fds.size());
    if (!m) {
      ccsb::sys::close_all(fds);
      say("bad message from the guest's supervisor: " + m.err().what());
      shut_down();
    }
    namespace p = ccsb::protocol;
    if (std::holds_alternative<p::supervisor_ready>(*m)) {
      sup_ready = true;
      send(g::ready{});
    } else if (auto* f = std::get_if<p::init_failed>(&*m)) {
      send(g::setup_failed{"the guest's supervisor (ccsb-init): " + f->reason});
      shut_down();
    } else if (auto* l = std::get_if<p::landlock_applied>(&*m)) {
      send(*l);
    } else if (auto* v = std::get_if<p::violation>(&*m)) {
      send(*v);
    } else if (auto* s = std::get_if<p::exec_started>(&*m)) {
      auto it = execs.find(s->id);
      if (it == execs.end()) {
        ccsb::sys::close_all(fds);
        continue;
      }
      auto& r = it->second;
      if (r.terminal) {
        if (fds.size() != 1) {
          say("a terminal exec started without its master");
          shut_down();
        }
        ::fcntl(fds[0], F_SETFL, O_NONBLOCK);
        r.out = fds[0];
        r.in = ::fcntl(fds[0], F_DUPFD_CLOEXEC, 3);
      } else {
        ccsb::sys::close_all(fds);
      }
      r.started = true;
      send(g::started{s->id, s->pid});
      feed_input(s->id, r);
    } else if (auto* f = std::get_if<p::exec_failed>(&*m)) {
      if (auto it = execs.find(f->id); it != execs.end()) {
        close_fd(it->second.in), close_fd(it->second.out), close_fd(it->second.err);
        execs.erase(it);
      }
      send(g::exec_failed{f->id, f->code, f->reason});
    } else if (auto* x = std::get_if<p::exec_exited>(&*m)) {
      auto it = execs.find(x->id);
      if (it == execs.end()) continue;
      auto& r = it->second;
      r.status = x->signaled ? x->value : (x->value << 8);
      // A terminal's last output, then its end: a job the shell left in the
      // background is hung up with it.
      if (r.terminal && r.out >= 0) {
        drain(x->id, r.out, 1);
        close_fd(r.out);
      }
      finish_done();
    }
  }
}

void reap() {
  for (;;) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p <= 0) return;
    if (p == sup_pid) {
      say("the guest's supervisor (ccsb-init) ended");
      sup_pid = -1;
      if (!sup_ready) send(g::setup_failed{"the guest's supervisor (ccsb-init) ended before it was ready"});
      shut_down();
    }
  }
}

} // namespace

int main() {
  std::string dev = ccsb::guest::find_port(g::kControlPort, 500);
  if (dev.empty()) {
    say("no virtio-serial port named ccsb.ctl");
    power_off();
  }
  port = ::open(dev.c_str(), O_RDWR | O_CLOEXEC);
  if (port < 0) {
    say(err_text("open " + dev));
    power_off();
  }
  utsname u{};
  ::uname(&u);
  send(g::hello{g::kGuestProtocol, u.release});

  sigset_t chld;
  sigemptyset(&chld);
  sigaddset(&chld, SIGCHLD);
  ::sigprocmask(SIG_BLOCK, &chld, nullptr);
  int sfd = ::signalfd(-1, &chld, SFD_CLOEXEC | SFD_NONBLOCK);

  g::frame_reader reader;
  std::vector<g::share> shares;
  std::vector<g::link> links;
  std::vector<g::protect> protects;
  std::optional<g::supervise> supervise;
  bool serving = false;
  for (;;) {
    std::vector<pollfd> fds{{port, POLLIN, 0}, {sfd, POLLIN, 0}, {sup, POLLIN, 0}};
    struct slot {
      ccsb::protocol::exec_id id;
      int stream; // 0: stdin (POLLOUT), 1, 2
    };
    std::vector<slot> who;
    for (auto& [id, r] : execs) {
      if (r.out >= 0) {
        fds.push_back({r.out, POLLIN, 0});
        who.push_back({id, 1});
      }
      if (r.err >= 0) {
        fds.push_back({r.err, POLLIN, 0});
        who.push_back({id, 2});
      }
      if (r.in >= 0 && !r.input.empty()) {
        fds.push_back({r.in, POLLOUT, 0});
        who.push_back({id, 0});
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      shut_down();
    }
    for (std::size_t i = 3; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto it = execs.find(who[i - 3].id);
      if (it == execs.end()) continue;
      auto& r = it->second;
      if (who[i - 3].stream == 0) feed_input(it->first, r);
      else drain(it->first, who[i - 3].stream == 1 ? r.out : r.err, who[i - 3].stream);
    }
    if (fds[1].revents) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) > 0) {
      }
      reap();
    }
    if (fds[2].revents) from_supervisor();
    finish_done();
    if (fds[0].revents & POLLIN) {
      char buf[65536];
      ssize_t n = ::read(port, buf, sizeof buf);
      if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (n <= 0) continue; // the host end is not connected yet, or between connections
      reader.feed(std::string_view(buf, static_cast<std::size_t>(n)));
      for (;;) {
        auto f = reader.next();
        if (!f) {
          say("bad frame from the host: " + f.err().message);
          shut_down();
        }
        if (!*f) break;
        auto m = g::decode_host(**f);
        if (!m) {
          say("bad message from the host: " + m.err().message);
          shut_down();
        }
        if (auto* s = std::get_if<g::share>(&*m); s && !serving) shares.push_back(*s);
        else if (auto* l = std::get_if<g::link>(&*m); l && !serving) links.push_back(*l);
        else if (auto* p = std::get_if<g::protect>(&*m); p && !serving) protects.push_back(*p);
        else if (auto* u = std::get_if<g::user>(&*m); u && !serving) identity = *u;
        else if (auto* v = std::get_if<g::supervise>(&*m); v && !serving && !supervise) supervise = *v;
        else if (std::holds_alternative<g::start>(*m) && !serving) {
          std::string why;
          if (!supervise) why = "no supervise message before start: the guest runs no command without its supervisor";
          if (why.empty()) why = build_root(shares, links);
          if (why.empty()) why = protect_paths(protects);
          // HOME (an empty tmpfs) is the guest user's.
          if (why.empty() && ::chown("/root", identity.uid, identity.gid) != 0) why = err_text("chown /root");
          if (why.empty()) {
            loopback_up();
            // The proxy listeners are bound before any command can run.
            if (ccsb::guest::egress_enabled()) why = ccsb::guest::start_egress_relay({port, sfd});
          }
          if (why.empty()) why = start_supervisor(*supervise);
          if (!why.empty()) {
            send(g::setup_failed{why});
            power_off();
          }
          serving = true; // `ready` once the supervisor is
        } else if (auto* e = std::get_if<g::exec>(&*m); e && sup_ready) {
          if (execs.count(e->id)) send(g::exec_failed{e->id, 125, "exec id in use"});
          else start_exec(*e);
        } else if (auto* in = std::get_if<g::input>(&*m); in && sup_ready) {
          if (auto it = execs.find(in->id); it != execs.end()) {
            if (it->second.input.size() >= g::kStdinWindow) {
              say("the host sent more stdin than its window");
              shut_down();
            }
            it->second.input.push_back(in->bytes);
            if (it->second.started) feed_input(in->id, it->second);
          } else {
            send(g::stdin_ack{in->id});
          }
        } else if (auto* eof = std::get_if<g::input_eof>(&*m); eof && sup_ready) {
          if (auto it = execs.find(eof->id); it != execs.end()) {
            it->second.input_eof = true;
            if (it->second.started) feed_input(eof->id, it->second);
          }
        } else if (auto* rs = std::get_if<g::resize>(&*m); rs && sup_ready) {
          if (auto it = execs.find(rs->id); it != execs.end() && it->second.terminal && it->second.out >= 0) {
            winsize ws{};
            ws.ws_row = rs->size.rows;
            ws.ws_col = rs->size.cols;
            ::ioctl(it->second.out, TIOCSWINSZ, &ws);
          }
        } else if (auto* k = std::get_if<g::kill>(&*m); k && sup_ready) {
          if (execs.count(k->id)) to_supervisor(ccsb::protocol::kill_request{k->id, k->signal});
        } else if (std::holds_alternative<g::poweroff>(*m)) {
          shut_down();
        } else {
          say("message out of order");
          shut_down();
        }
      }
    } else if (fds[0].revents & (POLLHUP | POLLERR)) {
      // The host closed its end: nobody is left to serve.
      if (serving) shut_down();
      ::usleep(10000);
    }
  }
}
