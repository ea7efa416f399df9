// etc_view_bench — what the /etc view (ccsb/launch/etc_view.hpp; issue 9)
// costs a launch: the key computed on every launch, the whole acquisition
// of a cached view, and one build.
//
//   etc_view_bench [--runs N]
//
// In-process, on this host's /etc, as the launcher does it (the spec
// profile's manifest, this euid's run-dir base). Printed per case: median,
// p90 and min in microseconds over N runs:
//   manifest          minimal_etc(): lstat of each listed path (the renderer does the same)
//   key               the manifest plus the key, with the listing of the cached view (a launch)
//   key, no listing   the same, reading every directory (the first launch after a change)
//   acquire (cached)  find, check and hold the cached view, then the sweep (a launch's whole cost)
//   build             acquire with no cached view: the key read whole, the view built and
//                     published (what a change of the host's /etc, or a reboot, costs one launch)
// Not run by ctest.
#include "ccsb/etc_manifest.hpp"
#include "ccsb/launch/etc_view.hpp"
#include "ccsb/launch/host.hpp"
#include "ccsb/launch/run_dir.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

namespace {

void report(const char* what, std::vector<double> us) {
  std::sort(us.begin(), us.end());
  auto at = [&](double p) { return us[static_cast<std::size_t>(p * static_cast<double>(us.size() - 1))]; };
  std::printf("%-20s median %8.1f us   p90 %8.1f us   min %8.1f us\n", what, at(0.5), at(0.9), us.front());
}

std::vector<double> time_runs(int runs, const std::function<bool()>& f) {
  std::vector<double> out;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    if (!f()) {
      std::fprintf(stderr, "etc_view_bench: a run failed\n");
      std::exit(1);
    }
    out.push_back(std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - t0).count());
  }
  return out;
}

} // namespace

int main(int argc, char** argv) {
  int runs = 200;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--runs") == 0 && i + 1 < argc) runs = std::atoi(argv[++i]);
    else {
      std::fprintf(stderr, "usage: etc_view_bench [--runs N]\n");
      return 2;
    }
  }
  if (runs < 1) runs = 1;
  auto base = ccsb::launch::run_dir_base();
  if (!base) {
    std::fprintf(stderr, "etc_view_bench: %s\n", base.err().what().c_str());
    return 1;
  }
  ccsb::policy pol;
  pol.network.kind = ccsb::network_kind::proxied; // the spec profile's /etc
  auto manifest = [&] { return ccsb::minimal_etc(pol, ccsb::launch::lstat_kind); };
  {
    auto v = ccsb::launch::acquire_etc_view(manifest(), *base); // cached from here on
    if (!v) {
      std::fprintf(stderr, "etc_view_bench: %s\n", v.err().what().c_str());
      return 1;
    }
    std::printf("view %s (%s)\n", v->path.c_str(), v->built ? "built now" : "cached");
    auto k = ccsb::launch::etc_view_key_of(manifest(), {}, *base);
    if (k)
      std::printf("%zu listed entries, %zu masks, key text %zu bytes\n", manifest().entries.size(),
                  manifest().masks.size(), k->text.size());
  }
  report("manifest", time_runs(runs, [&] { return !manifest().entries.empty(); }));
  report("key", time_runs(runs, [&] { return static_cast<bool>(ccsb::launch::etc_view_key_of(manifest(), {}, *base)); }));
  report("key, no listing", time_runs(runs, [&] { return static_cast<bool>(ccsb::launch::etc_view_key_of(manifest())); }));
  report("acquire (cached)", time_runs(runs, [&] {
           auto v = ccsb::launch::acquire_etc_view(manifest(), *base);
           return v && !v->built;
         }));
  // Each run: the cached view removed (untimed), then one launch's acquire.
  std::vector<double> build;
  for (int i = 0; i < std::min(runs, 20); ++i) {
    (void)ccsb::launch::sweep_etc_views(*base);
    build.push_back(time_runs(1, [&] {
                      auto v = ccsb::launch::acquire_etc_view(manifest(), *base);
                      return v && v->built && v->published;
                    }).front());
  }
  report("build", build);
  return 0;
}
