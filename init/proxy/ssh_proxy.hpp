// init/proxy/ssh_proxy.hpp — ssh's ProxyCommand inside the sandbox (N2, B2):
//
//   ccsb-init --ssh-proxy IPv4:PORT HOST PORT
//
// (GIT_SSH_COMMAND names it with %h %p). Connects to the session's SOCKS5
// proxy at IPv4:PORT, asks for HOST:PORT by name (the proxy resolves it and
// applies the allowlist), then relays standard input to the tunnel and the
// tunnel to standard output until both directions end. A refusal is said in
// words on stderr, and a denial by the allowlist reads differently from a
// port that refused or a name that did not resolve:
//   ccsb: egress to HOST:PORT is denied by this session's network allowlist
//   ccsb: HOST:PORT refused the connection
// Exit status: 0 when the tunnel ran, 1 for a refusal, 2 for bad arguments.
#pragma once

#include <string>

namespace ccsb::init {

int run_ssh_proxy(const std::string& proxy, const std::string& host, const std::string& port);

// The sentence for a SOCKS5 reply code (RFC 1928 section 6).
std::string socks_refusal_text(unsigned code, const std::string& target);

} // namespace ccsb::init
