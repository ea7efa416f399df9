// ccsb-guest-agent — PID 1 of the microvm backend's guest (X4,
// docs/microvm.md), started by the initramfs's /init once the modules are
// loaded. It serves the launcher over the virtio-serial port ccsb.ctl
// (ccsb/protocol/guest.hpp):
//
//   1. says hello (protocol version, guest kernel), then takes the set-up:
//      9p shares and symlinks of the guest's root;
//   2. builds that root on a tmpfs (/sysroot): the shares (read-only ones
//      mounted MS_RDONLY; QEMU serves them readonly=on as well, so a guest
//      root that remounts them still cannot write), /proc, /sys, /dev, /tmp
//      and an empty HOME; brings up lo (the VM has no NIC); chroots into it;
//      makes the P5 paths the host names read-only (a read-only bind of
//      each over itself); starts the egress relay when the VM has the
//      egress port (egress_relay.hpp: the proxy listeners on lo, before any
//      command) and says ready;
//   3. runs each exec as the unprivileged guest user the host names (never
//      guest root: it can neither remount a share nor unmount a P5 bind),
//      with no_new_privs, in its own session and process group, stdout and
//      stderr on pipes it relays as output messages, and reports its exit
//      after its last output; reaps every orphan (it is PID 1);
//   4. on poweroff (or when the port closes) kills what runs, syncs and
//      powers the VM off.
//
// Static (like ccsb-init): the initramfs has no C library.
#include "ccsb/protocol/guest.hpp"
#include "egress_relay.hpp"

#include <dirent.h>
#include <fcntl.h>
#include <net/if.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <grp.h>
#include <sys/mount.h>
#include <sys/prctl.h>
#include <sys/reboot.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <map>
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

std::string read_text(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return {};
  char buf[256];
  ssize_t n = ::read(fd, buf, sizeof buf - 1);
  ::close(fd);
  if (n <= 0) return {};
  std::string s(buf, static_cast<std::size_t>(n));
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

// /dev/vportNpM of the port named `name` (virtio_console names it in sysfs;
// no udev here to make /dev/virtio-ports/NAME).
std::string find_port(std::string_view name) {
  for (int attempt = 0; attempt < 500; ++attempt) {
    if (DIR* d = ::opendir("/sys/class/virtio-ports")) {
      std::string found;
      while (dirent* e = ::readdir(d)) {
        if (e->d_name[0] == '.') continue;
        if (read_text(std::string("/sys/class/virtio-ports/") + e->d_name + "/name") == name)
          found = std::string("/dev/") + e->d_name;
      }
      ::closedir(d);
      if (!found.empty() && ::access(found.c_str(), F_OK) == 0) return found;
    }
    ::usleep(10000);
  }
  return {};
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

struct running {
  pid_t pid{-1};
  int out{-1};
  int err{-1};
  bool reaped{false};
  int status{0};
};
std::map<ccsb::protocol::exec_id, running> execs;
g::user identity{65534, 65534};

void start_exec(const g::exec& e) {
  int out[2], err[2], status[2];
  if (::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0 || ::pipe2(status, O_CLOEXEC) != 0) {
    send(g::exec_failed{e.id, 125, err_text("pipe")});
    return;
  }
  pid_t pid = ::fork();
  if (pid == 0) {
    sigset_t none;
    sigemptyset(&none);
    ::sigprocmask(SIG_SETMASK, &none, nullptr);
    ::setsid();
    int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    ::dup2(out[1], 1);
    ::dup2(err[1], 2);
    auto fail = [&](int code) {
      int report[2] = {code, errno};
      ssize_t ignored = ::write(status[1], report, sizeof report);
      (void)ignored;
      ::_exit(code);
    };
    if (::chdir(e.workdir.c_str()) != 0) fail(125);
    if (::setgroups(0, nullptr) != 0 || ::setresgid(identity.gid, identity.gid, identity.gid) != 0 ||
        ::setresuid(identity.uid, identity.uid, identity.uid) != 0 || ::prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0)
      fail(125);
    std::vector<char*> argv, envp;
    for (const auto& a : e.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    for (const auto& v : e.env) envp.push_back(const_cast<char*>(v.c_str()));
    envp.push_back(nullptr);
    ::environ = envp.data();
    ::execvpe(argv[0], argv.data(), envp.data());
    fail(errno == ENOENT ? 127 : 126);
  }
  ::close(out[1]);
  ::close(err[1]);
  ::close(status[1]);
  if (pid < 0) {
    ::close(out[0]);
    ::close(err[0]);
    ::close(status[0]);
    send(g::exec_failed{e.id, 125, err_text("fork")});
    return;
  }
  int report[2] = {0, 0};
  ssize_t n;
  do n = ::read(status[0], report, sizeof report);
  while (n < 0 && errno == EINTR);
  ::close(status[0]);
  if (n == static_cast<ssize_t>(sizeof report)) {
    ::waitpid(pid, nullptr, 0);
    ::close(out[0]);
    ::close(err[0]);
    errno = report[1];
    std::string why = report[0] == 125 ? err_text("cannot enter the workdir " + e.workdir + " as the guest user")
                                       : err_text("cannot run \"" + e.argv[0] + "\"");
    send(g::exec_failed{e.id, report[0], why});
    return;
  }
  ::fcntl(out[0], F_SETFL, O_NONBLOCK);
  ::fcntl(err[0], F_SETFL, O_NONBLOCK);
  execs[e.id] = running{pid, out[0], err[0], false, 0};
  send(g::started{e.id, pid});
}

// Relays what is readable on fd; closes it at EOF.
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
    ::close(fd);
    fd = -1;
    return;
  }
}

void finish_done() {
  for (auto it = execs.begin(); it != execs.end();) {
    auto& r = it->second;
    if (r.reaped && r.out < 0 && r.err < 0) {
      bool sig = WIFSIGNALED(r.status);
      send(g::exited{it->first, sig, sig ? WTERMSIG(r.status) : WEXITSTATUS(r.status)});
      it = execs.erase(it);
    } else {
      ++it;
    }
  }
}

void reap() {
  for (;;) {
    int st = 0;
    pid_t p = ::waitpid(-1, &st, WNOHANG);
    if (p <= 0) return;
    for (auto& [id, r] : execs)
      if (r.pid == p) {
        r.reaped = true;
        r.status = st;
      }
  }
}

[[noreturn]] void shut_down() {
  for (auto& [id, r] : execs)
    if (!r.reaped) ::kill(-r.pid, SIGKILL);
  power_off();
}

} // namespace

int main() {
  std::string dev = find_port(g::kControlPort);
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
  bool serving = false;
  for (;;) {
    std::vector<pollfd> fds{{port, POLLIN, 0}, {sfd, POLLIN, 0}};
    std::vector<std::pair<ccsb::protocol::exec_id, int>> who;
    for (auto& [id, r] : execs) {
      if (r.out >= 0) {
        fds.push_back({r.out, POLLIN, 0});
        who.emplace_back(id, 1);
      }
      if (r.err >= 0) {
        fds.push_back({r.err, POLLIN, 0});
        who.emplace_back(id, 2);
      }
    }
    if (::poll(fds.data(), fds.size(), -1) < 0) {
      if (errno == EINTR) continue;
      shut_down();
    }
    for (std::size_t i = 2; i < fds.size(); ++i) {
      if (!fds[i].revents) continue;
      auto& r = execs[who[i - 2].first];
      drain(who[i - 2].first, who[i - 2].second == 1 ? r.out : r.err, who[i - 2].second);
    }
    if (fds[1].revents) {
      signalfd_siginfo si;
      while (::read(sfd, &si, sizeof si) > 0) {
      }
      reap();
    }
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
        else if (std::holds_alternative<g::start>(*m) && !serving) {
          std::string why = build_root(shares, links);
          if (why.empty()) why = protect_paths(protects);
          // HOME (an empty tmpfs) is the guest user's.
          if (why.empty() && ::chown("/root", identity.uid, identity.gid) != 0) why = err_text("chown /root");
          if (!why.empty()) {
            send(g::setup_failed{why});
            power_off();
          }
          loopback_up();
          if (ccsb::guest::egress_enabled())
            if (std::string e = ccsb::guest::start_egress_relay({port, sfd}); !e.empty()) {
              send(g::setup_failed{e});
              power_off();
            }
          serving = true;
          send(g::ready{});
        } else if (auto* e = std::get_if<g::exec>(&*m); e && serving) {
          if (execs.count(e->id)) send(g::exec_failed{e->id, 125, "exec id in use"});
          else start_exec(*e);
        } else if (auto* k = std::get_if<g::kill>(&*m); k && serving) {
          if (auto it = execs.find(k->id); it != execs.end() && !it->second.reaped) ::kill(-it->second.pid, k->signal);
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
