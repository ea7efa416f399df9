// egressd/tunnel.hpp — a CONNECT or SOCKS tunnel once its target is
// connected (N8): the upstream's bytes are relayed at once; the client's
// first bytes go through the tunnel inspector (tunnel_check.hpp: the TLS
// server name or every HTTP request's host must be the checked target);
// once the inspector passes the stream (TLS, another protocol) the client ->
// upstream direction is relayed unread.
#pragma once

#include "dial.hpp"

#include <memory>
#include <string>

namespace egressd {

// `early`: what the client sent before the tunnel was up (after its
// request, and while dial() watched it). A refusal writes a violation
// naming the target and what the client named instead, answers a TLS
// client with a fatal unrecognized_name alert and an HTTP client whose
// first request is refused with 403 (a later one gets no answer: earlier
// responses may still be in flight), and closes both sides.
void start_tunnel(const std::shared_ptr<connection>& c, std::string early, const target& t);

} // namespace egressd
