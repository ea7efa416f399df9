// egressd/resolver.hpp — c-ares driven by the Asio loop (N8).
//
// One channel for the whole process. c-ares tells us which sockets it wants
// watched (ARES_OPT_SOCK_STATE_CB); we wait on them with Asio descriptors and
// call ares_process_fd, plus one steady_timer from ares_timeout. c-ares owns
// and closes its sockets, so descriptors are released, never closed.
// No search domains, no HOSTALIASES, no /etc/hosts, no address sorting.
#pragma once

#include "address_class.hpp"

#include "ccsb/result.hpp"

#include "net.hpp"

#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

struct ares_channeldata;
struct ares_addrinfo;

namespace egressd {

struct resolve_result {
  std::string error; // empty on success, else e.g. "dns: Domain name not found"
  std::vector<ip_address> addresses;
};

class resolver {
public:
  explicit resolver(asio::io_context& io) : io_(io), timer_(io) {}
  ~resolver();
  resolver(const resolver&) = delete;
  resolver& operator=(const resolver&) = delete;

  // servers_csv: "" for the system's resolv.conf, else "IP:PORT".
  ccsb::result<void> init(const std::string& servers_csv, unsigned timeout_ms);

  // Completion signature: void(resolve_result). The handler always runs from
  // the io_context (never inside a c-ares call).
  template <class Token>
  auto async_resolve(std::string name, Token&& token) {
    return asio::async_initiate<Token, void(resolve_result)>(
        [this](auto handler, std::string n) {
          using H = decltype(handler);
          auto* op = new query_op<H>(std::move(handler), io_.get_executor());
          start(n, op);
        },
        token, std::move(name));
  }

private:
  struct query_base {
    virtual ~query_base() = default;
    virtual void complete(resolve_result r) = 0;
  };
  template <class H>
  struct query_op final : query_base {
    query_op(H h, asio::io_context::executor_type ex) : handler(std::move(h)), fallback(ex) {}
    void complete(resolve_result r) override {
      auto ex = asio::get_associated_executor(handler, fallback);
      asio::post(ex, [h = std::move(handler), r = std::move(r)]() mutable { std::move(h)(std::move(r)); });
    }
    H handler;
    asio::io_context::executor_type fallback;
  };
  struct watch {
    explicit watch(asio::io_context& io, int fd) : d(io, fd), fd(fd) {}
    asio::posix::stream_descriptor d;
    int fd;
    bool want_read{false}, want_write{false};
    bool read_pending{false}, write_pending{false};
    bool alive{true};
  };

  void start(const std::string& name, query_base* op);
  static void on_sock_state(void* data, int fd, int readable, int writable);
  static void on_result(void* arg, int status, int timeouts, ares_addrinfo* res);
  void arm(const std::shared_ptr<watch>& w);
  void reschedule();

  asio::io_context& io_;
  asio::steady_timer timer_;
  ares_channeldata* channel_{nullptr};
  std::unordered_map<int, std::shared_ptr<watch>> watches_;
};

} // namespace egressd
