// egressd/tunnel.hpp — a CONNECT or SOCKS tunnel once its target is
// connected (N8): the upstream's bytes are relayed at once; the client's
// first bytes go through the tunnel inspector (tunnel_check.hpp: the TLS
// server name or the first HTTP request's host must be the checked target)
// and only then is the client -> upstream direction relayed unread.
#pragma once

#include "dial.hpp"

#include <memory>
#include <string>

namespace egressd {

// `early`: what the client sent before the tunnel was up (after its
// request, and while dial() watched it). A refusal writes a violation
// naming the target and what the client named instead, answers a TLS
// client with a fatal unrecognized_name alert and an HTTP client with 403,
// and closes both sides.
void start_tunnel(const std::shared_ptr<connection>& c, std::string early, const target& t);

} // namespace egressd
