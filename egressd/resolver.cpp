#include "resolver.hpp"

#include <ares.h>

#include <arpa/inet.h>
#include <cstring>
#include <netinet/in.h>

namespace egressd {

resolver::~resolver() {
  if (channel_) {
    // Pending queries complete with ARES_EDESTRUCTION; their handlers are
    // posted to the (stopped) io_context and destroyed with it.
    ares_destroy(channel_);
    channel_ = nullptr;
  }
  for (auto& [fd, w] : watches_) {
    w->alive = false;
    (void)w->d.release();
  }
  watches_.clear();
  ares_library_cleanup();
}

ccsb::result<void> resolver::init(const std::string& servers_csv, unsigned timeout_ms) {
  int rc = ares_library_init(ARES_LIB_INIT_ALL);
  if (rc != ARES_SUCCESS)
    return ccsb::make_error(ccsb::errc::io_error, "dns", std::string("ares_library_init: ") + ares_strerror(rc));
  ares_options opts{};
  int mask = ARES_OPT_FLAGS | ARES_OPT_SOCK_STATE_CB | ARES_OPT_TIMEOUTMS | ARES_OPT_TRIES |
             ARES_OPT_LOOKUPS | ARES_OPT_SORTLIST | ARES_OPT_DOMAINS;
  opts.flags = ARES_FLAG_NOSEARCH | ARES_FLAG_NOALIASES;
  opts.sock_state_cb = [](void* data, ares_socket_t fd, int r, int w) { on_sock_state(data, fd, r, w); };
  opts.sock_state_cb_data = this;
  // Two tries; c-ares doubles the per-try timeout, so the total is ~timeout.
  opts.timeout = static_cast<int>(timeout_ms / 3 > 50 ? timeout_ms / 3 : 50);
  opts.tries = 2;
  char lookups[] = "b"; // DNS only: no hosts file
  opts.lookups = lookups;
  opts.sortlist = nullptr;
  opts.nsort = 0;
  opts.domains = nullptr;
  opts.ndomains = 0;
  rc = ares_init_options(&channel_, &opts, mask);
  if (rc != ARES_SUCCESS)
    return ccsb::make_error(ccsb::errc::io_error, "dns", std::string("ares_init_options: ") + ares_strerror(rc));
  if (!servers_csv.empty()) {
    rc = ares_set_servers_ports_csv(channel_, servers_csv.c_str());
    if (rc != ARES_SUCCESS)
      return ccsb::make_error(ccsb::errc::invalid_argument, "dnsServer",
                              "'" + servers_csv + "': " + ares_strerror(rc));
  }
  return ccsb::ok();
}

void resolver::start(const std::string& name, query_base* op) {
  ares_addrinfo_hints hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = ARES_AI_NOSORT;
  ares_getaddrinfo(channel_, name.c_str(), nullptr, &hints, &resolver::on_result, op);
  reschedule();
}

void resolver::on_result(void* arg, int status, int /*timeouts*/, ares_addrinfo* res) {
  auto* op = static_cast<query_base*>(arg);
  resolve_result r;
  if (status != ARES_SUCCESS) {
    r.error = std::string("dns: ") + ares_strerror(status);
  } else if (res) {
    for (auto* n = res->nodes; n; n = n->ai_next) {
      if (n->ai_family == AF_INET && n->ai_addr) {
        const auto* sa = reinterpret_cast<const sockaddr_in*>(n->ai_addr);
        r.addresses.push_back(ip_address::from_bytes(reinterpret_cast<const std::uint8_t*>(&sa->sin_addr), false));
      } else if (n->ai_family == AF_INET6 && n->ai_addr) {
        const auto* sa = reinterpret_cast<const sockaddr_in6*>(n->ai_addr);
        r.addresses.push_back(ip_address::from_bytes(sa->sin6_addr.s6_addr, true));
      }
    }
    if (r.addresses.empty()) r.error = "dns: no addresses";
  } else {
    r.error = "dns: no answer";
  }
  if (res) ares_freeaddrinfo(res);
  op->complete(std::move(r));
  delete op;
}

void resolver::on_sock_state(void* data, int fd, int readable, int writable) {
  auto* self = static_cast<resolver*>(data);
  auto it = self->watches_.find(fd);
  if (!readable && !writable) {
    if (it != self->watches_.end()) {
      it->second->alive = false;
      (void)it->second->d.release(); // c-ares closes the socket itself
      self->watches_.erase(it);
    }
    return;
  }
  if (it == self->watches_.end())
    it = self->watches_.emplace(fd, std::make_shared<watch>(self->io_, fd)).first;
  it->second->want_read = readable != 0;
  it->second->want_write = writable != 0;
  self->arm(it->second);
}

void resolver::arm(const std::shared_ptr<watch>& w) {
  if (w->want_read && !w->read_pending) {
    w->read_pending = true;
    w->d.async_wait(asio::posix::descriptor_base::wait_read, [this, w](std::error_code ec) {
      w->read_pending = false;
      if (!w->alive || ec) return;
      ares_process_fd(channel_, w->fd, ARES_SOCKET_BAD);
      if (w->alive) arm(w);
      reschedule();
    });
  }
  if (w->want_write && !w->write_pending) {
    w->write_pending = true;
    w->d.async_wait(asio::posix::descriptor_base::wait_write, [this, w](std::error_code ec) {
      w->write_pending = false;
      if (!w->alive || ec) return;
      ares_process_fd(channel_, ARES_SOCKET_BAD, w->fd);
      if (w->alive) arm(w);
      reschedule();
    });
  }
}

void resolver::reschedule() {
  timeval tv{};
  if (!ares_timeout(channel_, nullptr, &tv)) {
    timer_.cancel();
    return;
  }
  timer_.expires_after(std::chrono::seconds(tv.tv_sec) + std::chrono::microseconds(tv.tv_usec));
  timer_.async_wait([this](std::error_code ec) {
    if (ec) return;
    ares_process_fd(channel_, ARES_SOCKET_BAD, ARES_SOCKET_BAD);
    reschedule();
  });
}

} // namespace egressd
