// bench_egressd — egressd measured side by side with direct loopback TCP and
// with tinyproxy, in one run, printed as one table with ratios and targets:
//   (a) bulk throughput through a CONNECT tunnel (download of --bytes),
//   (b) added latency of CONNECT setup over a direct connect (p50, p99),
//   (c) idle RSS, and RSS growth per idle tunnel with --tunnels open,
//   (d) exec-to-ready time,
//   (e) (a) and (b) through tinyproxy,
//   (f) the cost of egressd's confinement (X3): (a), (b), (c) and (d) for the
//       default (confined) egressd next to `egressd --no-confine`, measured
//       interleaved in the same run; and every egressd's stderr is scanned
//       for seccomp denials (a system call missing from the allowlist),
//   (g) fairness (N8: one busy tunnel cannot delay the others' bytes): the
//       round trip of a 4-byte echo on an open tunnel and the setup of a new
//       request, idle and while 20 bulk downloads run through the same
//       egressd, as a ratio to idle, with the bulk throughput next to it;
//       with --compare-egressd PATH (e.g. a build of main) the same figure
//       for that binary in the same run. --fairness-only runs just (g).
// A plain program rather than Google Benchmark: it times several processes
// against each other. Runs inside a private network namespace with only
// loopback (same harness as tests/egressd). Not run by ctest.
//
//   bench_egressd [--bytes N] [--iterations N] [--tunnels N] [--reps N] [--egressd PATH]
//                 [--compare-egressd PATH] [--bulk N] [--fairness-only 1]
#include "support.hpp"

#include <sys/epoll.h>

#include <cinttypes>
#include <cstdio>
#include <optional>

using namespace etest;

namespace {

struct bench_options {
  std::uint64_t bytes = 1ull << 30;
  int iterations = 2000;
  int tunnels = 10000;
  int reps = 3;
  int exec_runs = 20;
  std::string egressd = egressd_path();
  std::string compare; // --compare-egressd: another egressd for the fairness figure
  int bulk = 20;       // bulk tunnels in the fairness figure
  bool fairness_only = false;
};

double now_us() {
  return std::chrono::duration<double, std::micro>(clock_type::now().time_since_epoch()).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  auto i = static_cast<std::size_t>(p * static_cast<double>(v.size() - 1) + 0.5);
  return v[std::min(i, v.size() - 1)];
}

int listen_loopback(uint16_t& port, int backlog = 4096) {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1;
  ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 || ::listen(fd, backlog) != 0)
    fatal(errno_text("bench listen"));
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  port = ntohs(sa.sin_port);
  return fd;
}

// Single-threaded epoll echo server (latency upstream): no thread creation
// per connection to blur the numbers.
class echo_server {
public:
  echo_server() {
    lfd_.reset(listen_loopback(port_));
    ep_.reset(::epoll_create1(EPOLL_CLOEXEC));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.fd = lfd_.get();
    ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, lfd_.get(), &ev);
    thread_ = std::thread([this] { loop(); });
  }
  ~echo_server() {
    stop_ = true;
    thread_.join();
  }
  uint16_t port() const { return port_; }

private:
  void loop() {
    epoll_event evs[256];
    char buf[65536];
    while (!stop_) {
      int n = ::epoll_wait(ep_.get(), evs, 256, 50);
      for (int i = 0; i < n; ++i) {
        int fd = evs[i].data.fd;
        if (fd == lfd_.get()) {
          int c = ::accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
          if (c < 0) continue;
          int one = 1;
          ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
          epoll_event ev{};
          ev.events = EPOLLIN;
          ev.data.fd = c;
          ::epoll_ctl(ep_.get(), EPOLL_CTL_ADD, c, &ev);
          continue;
        }
        ssize_t got = ::recv(fd, buf, sizeof buf, 0);
        if (got <= 0) {
          ::close(fd);
          continue;
        }
        ::send(fd, buf, static_cast<std::size_t>(got), MSG_NOSIGNAL);
      }
    }
  }
  unique_fd lfd_, ep_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// Throughput upstream: every accepted connection gets `bytes` bytes, then EOF.
class source_server {
public:
  explicit source_server(std::uint64_t bytes) : bytes_(bytes) {
    lfd_.reset(listen_loopback(port_));
    thread_ = std::thread([this] { loop(); });
  }
  ~source_server() {
    stop_ = true;
    thread_.join();
    for (auto& t : workers_) t.join();
  }
  uint16_t port() const { return port_; }

private:
  void loop() {
    while (!stop_) {
      pollfd p{lfd_.get(), POLLIN, 0};
      if (::poll(&p, 1, 50) <= 0) continue;
      int c = ::accept4(lfd_.get(), nullptr, nullptr, SOCK_CLOEXEC);
      if (c < 0) continue;
      workers_.emplace_back([this, c] {
        std::string chunk(256 * 1024, 'b');
        std::uint64_t left = bytes_;
        while (left > 0) {
          std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(left, chunk.size()));
          ssize_t w = ::send(c, chunk.data(), n, MSG_NOSIGNAL);
          if (w <= 0) break;
          left -= static_cast<std::uint64_t>(w);
        }
        ::close(c);
      });
    }
  }
  std::uint64_t bytes_;
  unique_fd lfd_;
  uint16_t port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
  std::vector<std::thread> workers_;
};

// Idle-tunnel upstream in its own process (so its descriptors do not count
// against ours): accepts and holds every connection until told to stop.
struct holder {
  pid_t pid = -1;
  uint16_t port = 0;
  unique_fd control; // closing it ends the holder
};

holder start_holder() {
  holder h;
  int lfd = listen_loopback(h.port);
  int ctl[2];
  if (::pipe2(ctl, O_CLOEXEC) != 0) fatal(errno_text("pipe2"));
  h.pid = ::fork();
  if (h.pid == 0) {
    ::close(ctl[1]);
    std::vector<int> held;
    for (;;) {
      pollfd p[2] = {{lfd, POLLIN, 0}, {ctl[0], POLLIN, 0}};
      if (::poll(p, 2, -1) < 0) continue;
      if (p[1].revents) ::_exit(0);
      int c = ::accept4(lfd, nullptr, nullptr, SOCK_CLOEXEC);
      if (c >= 0) held.push_back(c);
    }
  }
  ::close(ctl[0]);
  ::close(lfd);
  h.control.reset(ctl[1]);
  return h;
}

// Lines "egressd: seccomp: denied ..." seen in any egressd's stderr (X3):
// each is a system call the allowlist is missing.
std::vector<std::string>& seccomp_denials() {
  static std::vector<std::string> d;
  return d;
}

// A proxy process (egressd or tinyproxy) with its HTTP port.
struct proxy {
  std::string name;
  pid_t pid = -1;
  uint16_t port = 0;
  std::thread drain;
  unique_fd out;
  std::unique_ptr<temp_dir> dir;
  std::string stderr_path; // egressd only
  ~proxy() {
    kill_and_reap(pid);
    if (drain.joinable()) drain.join();
    if (!stderr_path.empty()) {
      std::istringstream in(read_file(stderr_path));
      std::string line;
      while (std::getline(in, line))
        if (line.find("seccomp: denied") != std::string::npos) seccomp_denials().push_back(line);
    }
  }
};

std::vector<std::string> egressd_args(const bench_options& o, bool confined) {
  std::vector<std::string> a{o.egressd,       "--http-listen",    "127.0.0.1:0", "--socks-listen", "127.0.0.1:0",
                             "--no-baseline", "--allow-upstream", "127.0.0.0/8", "--allow",        "allowed.test",
                             "--resolve",     "allowed.test=127.0.0.1"};
  // The idle-tunnel figure opens more tunnels than the default limit allows.
  a.push_back("--max-tunnels");
  a.push_back(std::to_string(std::max(o.tunnels, 4096) + 64));
  if (!confined) a.push_back("--no-confine");
  return a;
}

// Starts egressd (confined by default, or with --no-confine); returns the
// time from exec to the ready line in microseconds.
double start_egressd(const bench_options& o, proxy& p, bool confined = true) {
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) fatal(errno_text("pipe2"));
  p.dir = std::make_unique<temp_dir>();
  p.stderr_path = p.dir->file("egressd.stderr");
  unique_fd err(::open(p.stderr_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600));
  if (!err) fatal(errno_text("open egressd.stderr"));
  spawn_options so;
  so.stdout_fd = out[1];
  so.stderr_fd = err.get();
  double t0 = now_us();
  p.pid = spawn(egressd_args(o, confined), so);
  ::close(out[1]);
  line_reader lr(out[0]);
  auto line = lr.next(kWaitMs);
  double t1 = now_us();
  if (!line) fatal("egressd printed no ready line");
  auto ready = parse_event(*line);
  p.name = confined ? "egressd" : "egressd --no-confine";
  p.port = parse_listen_addr(ready.str("http")).port;
  if (!p.port) fatal("bad ready line: " + *line);
  // Keep reading events so egressd never blocks on a full pipe.
  auto reader = std::make_shared<line_reader>(std::move(lr));
  p.drain = std::thread([reader] {
    while (reader->next(3600 * 1000) || !reader->eof()) {
    }
  });
  return t1 - t0;
}

void start_tinyproxy(proxy& p, const std::vector<uint16_t>& ports) {
  std::string bin = find_tool("tinyproxy");
  p.dir = std::make_unique<temp_dir>();
  p.name = "tinyproxy";
  p.port = closed_port();
  std::string conf = "Port " + std::to_string(p.port) +
                     "\nListen 127.0.0.1\nTimeout 600\nMaxClients 20000\nAllow 127.0.0.1\nLogLevel Critical\n"
                     "LogFile \"" + p.dir->file("tinyproxy.log") + "\"\n";
  for (auto port : ports) conf += "ConnectPort " + std::to_string(port) + "\n";
  std::string path = p.dir->file("tinyproxy.conf");
  write_file(path, conf);
  p.pid = spawn({bin, "-d", "-c", path});
  auto deadline = clock_type::now() + 10s;
  while (clock_type::now() < deadline) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(p.port);
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    bool up = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    ::close(fd);
    if (up) return;
    std::this_thread::sleep_for(10ms);
  }
  fatal("tinyproxy did not start listening on port " + std::to_string(p.port));
}

// Opens a path to the upstream: direct, or CONNECT through a proxy. Returns
// the fd (tunnel ready) and any bytes that followed the CONNECT reply.
unique_fd open_path(const proxy* via, const std::string& host, uint16_t port) {
  if (!via) return tcp_connect(port);
  auto fd = tcp_connect(via->port);
  auto r = http_connect(fd.get(), host + ":" + std::to_string(port));
  if (r.status != 200) fatal(via->name + ": CONNECT " + host + " failed: " + r.status_line);
  return fd;
}

struct throughput_result {
  double mb_s = 0;
  bool ok = false;
};

throughput_result throughput(const proxy* via, const std::string& host, uint16_t port, std::uint64_t bytes,
                             int reps) {
  std::vector<double> rates;
  throughput_result res;
  res.ok = true;
  std::vector<char> buf(256 * 1024);
  for (int r = 0; r < reps; ++r) {
    double t0 = now_us();
    auto fd = open_path(via, host, port);
    std::uint64_t got = 0;
    for (;;) {
      ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
      if (n <= 0) break;
      got += static_cast<std::uint64_t>(n);
    }
    double t1 = now_us();
    if (got != bytes) res.ok = false;
    rates.push_back(static_cast<double>(got) / (t1 - t0)); // bytes/us == MB/s
  }
  res.mb_s = percentile(rates, 0.5);
  return res;
}

// Several paths, one transfer each per round, round-robin (confined and
// unconfined egressd see the same machine load).
std::vector<throughput_result> throughput_interleaved(const std::vector<std::pair<const proxy*, std::string>>& paths,
                                                      uint16_t port, std::uint64_t bytes, int reps) {
  std::vector<std::vector<double>> rates(paths.size());
  std::vector<throughput_result> out(paths.size());
  for (auto& r : out) r.ok = true;
  for (int r = 0; r < reps; ++r)
    for (std::size_t k = 0; k < paths.size(); ++k) {
      auto one = throughput(paths[k].first, paths[k].second, port, bytes, 1);
      rates[k].push_back(one.mb_s);
      out[k].ok = out[k].ok && one.ok;
    }
  for (std::size_t k = 0; k < paths.size(); ++k) out[k].mb_s = percentile(rates[k], 0.5);
  return out;
}

struct latency_result {
  double p50 = 0, p99 = 0;
};

// One setup: connect (+ CONNECT) + one echoed byte, in microseconds.
double one_setup(const proxy* via, const std::string& host, uint16_t port) {
  double t0 = now_us();
  auto fd = open_path(via, host, port);
  send_all(fd.get(), "x");
  char c;
  if (::recv(fd.get(), &c, 1, 0) != 1) fatal("echo failed");
  return now_us() - t0;
}

// The three paths are measured round-robin, so load from other processes on
// this shared machine hits all of them alike.
std::vector<latency_result> latency_interleaved(const std::vector<std::pair<const proxy*, std::string>>& paths,
                                                uint16_t port, int iterations) {
  std::vector<std::vector<double>> us(paths.size());
  for (int i = 0; i < iterations + 50; ++i)
    for (std::size_t k = 0; k < paths.size(); ++k) {
      double t = one_setup(paths[k].first, paths[k].second, port);
      if (i >= 50) us[k].push_back(t); // first 50 rounds are warm-up
    }
  std::vector<latency_result> out;
  for (auto& v : us) out.push_back({percentile(v, 0.5), percentile(v, 0.99)});
  return out;
}

long rss_kib(pid_t pid) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind("VmRSS:", 0) == 0) return std::atol(line.c_str() + 6);
  return -1;
}

std::string fmt(const char* f, double v) {
  char b[64];
  std::snprintf(b, sizeof b, f, v);
  return b;
}

void row(const std::string& metric, const std::string& direct, const std::string& eg, const std::string& tp,
         const std::string& vs_direct, const std::string& vs_tp, const std::string& target,
         const std::string& verdict) {
  std::printf("| %-34s | %12s | %12s | %12s | %10s | %10s | %-16s | %-4s |\n", metric.c_str(), direct.c_str(),
              eg.c_str(), tp.c_str(), vs_direct.c_str(), vs_tp.c_str(), target.c_str(), verdict.c_str());
}

// (g) fairness: an interactive tunnel's round trip and a new request's
// setup, idle and under `bulk` downloads through the same egressd.
struct fairness_result {
  latency_result rt_idle, rt_load, new_idle, new_load;
  double bulk_mb_s = 0;
  double single_mb_s = 0; // one download alone
  bool ok = true;
};

fairness_result fairness(const proxy& p, uint16_t echo_port, uint16_t source_port, int bulk, uint16_t finite_port,
                         std::uint64_t single_bytes, int reps) {
  fairness_result f;
  auto single = throughput(&p, "allowed.test", finite_port, single_bytes, reps);
  f.single_mb_s = single.mb_s;
  f.ok = single.ok;
  constexpr int kRoundTrips = 200, kNew = 40;
  auto round_trips = [&](int fd, int n) {
    std::vector<double> us;
    char buf[4];
    for (int i = 0; i < n; ++i) {
      double t0 = now_us();
      if (!send_all(fd, "ping") || recv_n(fd, 4, 60000).size() != 4) {
        f.ok = false;
        break;
      }
      (void)buf;
      us.push_back(now_us() - t0);
    }
    return latency_result{percentile(us, 0.5), percentile(us, 0.99)};
  };
  auto new_requests = [&](int n) {
    std::vector<double> us;
    for (int i = 0; i < n; ++i) us.push_back(one_setup(&p, "allowed.test", echo_port));
    return latency_result{percentile(us, 0.5), percentile(us, 0.99)};
  };
  auto inter = open_path(&p, "allowed.test", echo_port);
  round_trips(inter.get(), 50); // warm-up
  f.rt_idle = round_trips(inter.get(), kRoundTrips);
  f.new_idle = new_requests(kNew);
  std::atomic<bool> stop{false};
  std::atomic<std::uint64_t> bytes{0};
  std::vector<std::thread> readers;
  for (int i = 0; i < bulk; ++i)
    readers.emplace_back([&] {
      auto fd = open_path(&p, "allowed.test", source_port);
      std::vector<char> buf(256 * 1024);
      while (!stop) {
        ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
        if (n <= 0) break;
        bytes += static_cast<std::uint64_t>(n);
      }
    });
  std::this_thread::sleep_for(300ms); // the downloads get going (not part of the figure)
  const std::uint64_t b0 = bytes;
  const double t0 = now_us();
  f.rt_load = round_trips(inter.get(), kRoundTrips);
  f.new_load = new_requests(kNew);
  const double t1 = now_us();
  f.bulk_mb_s = static_cast<double>(bytes - b0) / (t1 - t0);
  stop = true;
  for (auto& t : readers) t.join();
  return f;
}

void print_fairness(const std::vector<std::pair<std::string, fairness_result>>& runs, int bulk) {
  std::printf("\nfairness (N8): %d bulk CONNECT downloads through the same egressd; a 4-byte echo round trip on an "
              "open tunnel (200) and a new request (connect + CONNECT + 1 B echo, 40), idle and under load, as a "
              "ratio to idle; MB/s: the bulk downloads together during the load phase, and one --bytes download "
              "alone (median of --reps)\n\n",
              bulk);
  std::printf("| %-12s | %-26s | %10s | %10s | %10s | %10s | %8s | %8s | %12s |\n", "egressd", "metric", "idle p50",
              "load p50", "idle p99", "load p99", "p50 x", "p99 x", "MB/s");
  std::printf("|%s|\n", std::string(134, '-').c_str());
  for (const auto& [name, f] : runs) {
    auto line = [&](const char* m, const latency_result& idle, const latency_result& load, const std::string& mb) {
      std::printf("| %-12s | %-26s | %10s | %10s | %10s | %10s | %8s | %8s | %12s |\n", name.c_str(), m,
                  fmt("%.0f us", idle.p50).c_str(), fmt("%.0f us", load.p50).c_str(), fmt("%.0f us", idle.p99).c_str(),
                  fmt("%.0f us", load.p99).c_str(), fmt("%.1fx", load.p50 / idle.p50).c_str(),
                  fmt("%.1fx", load.p99 / idle.p99).c_str(), mb.c_str());
    };
    line("interactive round trip", f.rt_idle, f.rt_load, fmt("%.0f", f.bulk_mb_s) + " (bulk)");
    line("new request", f.new_idle, f.new_load, f.ok ? fmt("%.0f", f.single_mb_s) + " (1 alone)" : "FAILED");
  }
}

} // namespace

int main(int argc, char** argv) {
  bench_options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string a = argv[i], v = argv[i + 1];
    if (a == "--bytes") o.bytes = std::stoull(v);
    else if (a == "--iterations") o.iterations = std::stoi(v);
    else if (a == "--tunnels") o.tunnels = std::stoi(v);
    else if (a == "--egressd") o.egressd = v;
    else if (a == "--reps") o.reps = std::stoi(v);
    else if (a == "--compare-egressd") o.compare = v;
    else if (a == "--bulk") o.bulk = std::stoi(v);
    else if (a == "--fairness-only") o.fairness_only = v != "0";
    else {
      std::fprintf(stderr,
                   "usage: %s [--bytes N] [--iterations N] [--tunnels N] [--reps N] [--egressd PATH] "
                   "[--compare-egressd PATH] [--bulk N] [--fairness-only 1]\n",
                   argv[0]);
      return 2;
    }
  }
  try {
    if (::access(o.egressd.c_str(), X_OK) != 0) fatal("egressd not found at " + o.egressd);
    // Descriptors: both this process and egressd inherit the raised limit.
    rlimit rl{};
    ::getrlimit(RLIMIT_NOFILE, &rl);
    rl.rlim_cur = rl.rlim_max;
    ::setrlimit(RLIMIT_NOFILE, &rl);
    isolate_network();
    // egressd holds two descriptors per tunnel.
    int max_tunnels = static_cast<int>(std::min<rlim_t>(static_cast<rlim_t>(o.tunnels), (rl.rlim_cur - 128) / 2));
    holder hold = start_holder(); // fork before any thread exists

    // (g) fairness, this egressd and the one to compare with, alternately.
    std::vector<std::pair<std::string, fairness_result>> fair;
    {
      echo_server fecho;
      source_server endless(~std::uint64_t{0} >> 1); // until the reader closes
      source_server finite(o.bytes);
      std::vector<std::pair<std::string, std::string>> bins{{"this build", o.egressd}};
      if (!o.compare.empty()) bins.push_back({"compared", o.compare});
      std::fprintf(stderr, "fairness: %d bulk tunnels...\n", o.bulk);
      for (const auto& [name, path] : bins) {
        bench_options ob = o;
        ob.egressd = path;
        proxy fp;
        start_egressd(ob, fp);
        fp.name = name;
        fair.push_back({name, fairness(fp, fecho.port(), endless.port(), o.bulk, finite.port(), o.bytes, o.reps)});
      }
    }
    if (o.fairness_only) {
      print_fairness(fair, o.bulk);
      hold.control.reset();
      kill_and_reap(hold.pid);
      return 0;
    }

    // (d) exec-to-ready, confined and unconfined alternately.
    std::vector<double> ready_us, ready_nc_us;
    for (int i = 0; i < o.exec_runs; ++i) {
      proxy p, q;
      ready_us.push_back(start_egressd(o, p));
      ready_nc_us.push_back(start_egressd(o, q, false));
    }
    double ready_p50 = percentile(ready_us, 0.5), ready_min = percentile(ready_us, 0.0);
    double ready_nc_p50 = percentile(ready_nc_us, 0.5);

    echo_server echo;
    source_server source(o.bytes);
    std::optional<proxy> eg_slot(std::in_place), nc_slot(std::in_place);
    proxy& eg = *eg_slot;
    start_egressd(o, eg);
    long idle_rss = rss_kib(eg.pid);
    proxy& nc = *nc_slot; // the same egressd with --no-confine (f)
    start_egressd(o, nc, false);
    long nc_idle_rss = rss_kib(nc.pid);
    proxy tp;
    start_tinyproxy(tp, {echo.port(), source.port()});
    long tp_idle_rss = rss_kib(tp.pid);

    // (a)/(e) throughput.
    std::fprintf(stderr, "throughput: %" PRIu64 " bytes x %d per path...\n", o.bytes, o.reps);
    auto t_direct = throughput(nullptr, "", source.port(), o.bytes, o.reps);
    auto t_pair = throughput_interleaved({{&eg, "allowed.test"}, {&nc, "allowed.test"}}, source.port(), o.bytes,
                                         o.reps);
    auto t_eg = t_pair[0], t_nc = t_pair[1];
    auto t_tp = throughput(&tp, "127.0.0.1", source.port(), o.bytes, o.reps);

    // (b)/(e) setup latency: connect (+ CONNECT) + one echoed byte.
    std::fprintf(stderr, "latency: %d iterations per path...\n", o.iterations);
    auto lat = latency_interleaved(
        {{nullptr, ""}, {&eg, "allowed.test"}, {&nc, "allowed.test"}, {&tp, "127.0.0.1"}}, echo.port(), o.iterations);
    auto l_direct = lat[0], l_eg = lat[1], l_nc = lat[2], l_tp = lat[3];

    // (c) idle tunnels on a fresh egressd.
    std::fprintf(stderr, "idle tunnels: %d...\n", max_tunnels);
    long rss_before = 0, rss_after = 0;
    int opened = 0;
    {
      proxy fresh;
      start_egressd(o, fresh);
      rss_before = rss_kib(fresh.pid);
      std::vector<unique_fd> tunnels;
      tunnels.reserve(static_cast<std::size_t>(max_tunnels));
      for (int i = 0; i < max_tunnels; ++i) {
        auto fd = tcp_connect(fresh.port);
        auto r = http_connect(fd.get(), "allowed.test:" + std::to_string(hold.port));
        if (r.status != 200) {
          std::fprintf(stderr, "tunnel %d: %s\n", i, r.status_line.c_str());
          break;
        }
        tunnels.push_back(std::move(fd));
        ++opened;
      }
      std::this_thread::sleep_for(200ms);
      rss_after = rss_kib(fresh.pid);
    }
    hold.control.reset();
    kill_and_reap(hold.pid);
    double per_tunnel = opened ? static_cast<double>(rss_after - rss_before) / opened : 0;
    // Stop both (their stderr is scanned for seccomp denials).
    eg_slot.reset();
    nc_slot.reset();

    auto pass = [](bool b) { return std::string(b ? "PASS" : "FAIL"); };
    std::printf("\negressd benchmark (%" PRIu64 " MiB per transfer, median of %d; %d latency iterations; %d idle "
                "tunnels; loopback in a private netns)\n\n",
                o.bytes >> 20, o.reps, o.iterations, opened);
    row("metric", "direct", "egressd", "tinyproxy", "eg/direct", "eg/tinyprx", "target", "");
    std::printf("|%s|\n", std::string(150, '-').c_str());
    row("throughput, MB/s", fmt("%.0f", t_direct.mb_s), fmt("%.0f", t_eg.mb_s), fmt("%.0f", t_tp.mb_s),
        fmt("%.2fx", t_eg.mb_s / t_direct.mb_s), fmt("%.2fx", t_eg.mb_s / t_tp.mb_s), ">= 0.8x direct",
        pass(t_eg.mb_s >= 0.8 * t_direct.mb_s && t_eg.ok));
    row("setup+1B echo p50, us", fmt("%.1f", l_direct.p50), fmt("%.1f", l_eg.p50), fmt("%.1f", l_tp.p50),
        fmt("%.2fx", l_eg.p50 / l_direct.p50), fmt("%.2fx", l_eg.p50 / l_tp.p50), "", "");
    row("setup+1B echo p99, us", fmt("%.1f", l_direct.p99), fmt("%.1f", l_eg.p99), fmt("%.1f", l_tp.p99),
        fmt("%.2fx", l_eg.p99 / l_direct.p99), fmt("%.2fx", l_eg.p99 / l_tp.p99), "", "");
    row("CONNECT added p50, us", "0", fmt("%.1f", l_eg.p50 - l_direct.p50), fmt("%.1f", l_tp.p50 - l_direct.p50), "",
        fmt("%.2fx", (l_eg.p50 - l_direct.p50) / (l_tp.p50 - l_direct.p50)), "<= 50 us",
        pass(l_eg.p50 - l_direct.p50 <= 50));
    row("CONNECT added p99, us", "0", fmt("%.1f", l_eg.p99 - l_direct.p99), fmt("%.1f", l_tp.p99 - l_direct.p99), "",
        "", "", "");
    row("idle RSS, KiB", "", fmt("%.0f", static_cast<double>(idle_rss)), fmt("%.0f", static_cast<double>(tp_idle_rss)),
        "", fmt("%.2fx", static_cast<double>(idle_rss) / static_cast<double>(tp_idle_rss)), "<= 4096 KiB",
        pass(idle_rss <= 4096));
    row("RSS per idle tunnel, KiB", "", fmt("%.2f", per_tunnel), "n/a", "", "", "<= 16 KiB",
        pass(opened == max_tunnels && per_tunnel <= 16));
    row("exec-to-ready p50 (min), ms", "", fmt("%.2f", ready_p50 / 1000) + fmt(" (%.2f)", ready_min / 1000), "", "",
        "", "<= 10 ms", pass(ready_p50 <= 10000));
    std::printf("\nnotes: transfers complete: direct=%s egressd=%s tinyproxy=%s; idle tunnels %d of %d requested "
                "(RLIMIT_NOFILE %llu; egressd holds 2 descriptors per tunnel); egressd RSS %ld -> %ld KiB with the "
                "tunnels open; %u CPUs shared by client, upstream and proxy.\n",
                t_direct.ok ? "yes" : "NO", t_eg.ok ? "yes" : "NO", t_tp.ok ? "yes" : "NO", opened, o.tunnels,
                static_cast<unsigned long long>(rl.rlim_cur), rss_before, rss_after, std::thread::hardware_concurrency());

    // (f) confinement (X3): the default egressd against --no-confine.
    std::printf("\nconfinement cost (X3): default egressd (privileges + Landlock + seccomp allowlist) vs "
                "egressd --no-confine, interleaved, throughput median of %d\n\n",
                o.reps);
    std::printf("| %-34s | %12s | %12s | %10s | %-16s | %-4s |\n", "metric", "confined", "no-confine", "ratio",
                "target", "");
    std::printf("|%s|\n", std::string(105, '-').c_str());
    auto crow = [](const std::string& m, double a, double b, const char* f, const std::string& target,
                   const std::string& verdict) {
      std::printf("| %-34s | %12s | %12s | %10s | %-16s | %-4s |\n", m.c_str(), fmt(f, a).c_str(), fmt(f, b).c_str(),
                  fmt("%.3fx", b != 0 ? a / b : 0).c_str(), target.c_str(), verdict.c_str());
    };
    crow("throughput, MB/s", t_eg.mb_s, t_nc.mb_s, "%.0f", ">= 0.95x", pass(t_eg.mb_s >= 0.95 * t_nc.mb_s && t_nc.ok));
    crow("setup+1B echo p50, us", l_eg.p50, l_nc.p50, "%.1f", "<= 1.10x", pass(l_eg.p50 <= 1.10 * l_nc.p50));
    crow("setup+1B echo p99, us", l_eg.p99, l_nc.p99, "%.1f", "", "");
    crow("idle RSS, KiB", static_cast<double>(idle_rss), static_cast<double>(nc_idle_rss), "%.0f", "", "");
    crow("exec-to-ready p50, ms", ready_p50 / 1000, ready_nc_p50 / 1000, "%.2f", "", "");
    std::printf("| %-34s | %12zu | %12s | %10s | %-16s | %-4s |\n", "seccomp denials logged", seccomp_denials().size(),
                "", "", "0", pass(seccomp_denials().empty()).c_str());
    for (const auto& d : seccomp_denials()) std::printf("  %s\n", d.c_str());
    print_fairness(fair, o.bulk);
    return seccomp_denials().empty() ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "bench_egressd: %s\n", e.what());
    return 1;
  }
}
