// ccsb/ccsb.hpp — the pure library in one include: spec model, host probe and
// backend selection, domain matching with the baseline lists, policy
// compilation, the session environment and both renderers. The launcher
// (ccsb/launch/*) does I/O and is included separately.
#pragma once

#include "ccsb/backend.hpp"
#include "ccsb/baseline.hpp"
#include "ccsb/domain.hpp"
#include "ccsb/egress.hpp"
#include "ccsb/environment.hpp"
#include "ccsb/host.hpp"
#include "ccsb/paths.hpp"
#include "ccsb/policy.hpp"
#include "ccsb/render/bwrap/render.hpp"
#include "ccsb/render/seatbelt/render.hpp"
#include "ccsb/result.hpp"
#include "ccsb/session_environment.hpp"
#include "ccsb/spec.hpp"
#include "ccsb/spec_json.hpp"
