// N3 matcher benchmark: decision time of the compiled domain_set versus a
// naive linear scan over the same patterns, at 10, 1,000 and 100,000
// patterns, for hits and misses, measured in one run and printed side by
// side. Target (issue 2): <= 50 ns per decision at 100,000 patterns and
// >= 100x faster than the linear scan there.
//
//   build/bin/bench_domain            (add --benchmark_min_time=0.2 for a quicker run)
#include "ccsb/egress.hpp"

#include <benchmark/benchmark.h>

#include <cstdio>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace {

// A realistic mix: 60% exact names, 30% leading wildcards, 10% middle.
std::vector<std::string> make_patterns(std::size_t n) {
  std::vector<std::string> out;
  out.reserve(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string id = std::to_string(i);
    switch (i % 10) {
    case 0: case 1: case 2: case 3: case 4: case 5:
      out.push_back("api" + id + ".service" + std::to_string(i % 97) + ".example.com");
      break;
    case 6: case 7: case 8:
      out.push_back("*.tenant" + id + ".example.net");
      break;
    default:
      out.push_back("bedrock.*.region" + id + ".example.org");
    }
  }
  return out;
}

// 256 hosts cycle through the matcher: in a proxy the host being checked was
// just normalised and is hot; the pattern table is what is cold.
constexpr std::size_t kHosts = 256;

std::vector<ccsb::host> make_hosts(std::size_t n, bool hits) {
  std::mt19937 rng(42);
  std::vector<ccsb::host> out;
  for (std::size_t k = 0; k < kHosts; ++k) {
    std::size_t i = rng() % n;
    std::string id = std::to_string(i);
    std::string h;
    if (hits) {
      switch (i % 10) {
      case 0: case 1: case 2: case 3: case 4: case 5:
        h = "api" + id + ".service" + std::to_string(i % 97) + ".example.com";
        break;
      case 6: case 7: case 8:
        h = "a.b.tenant" + id + ".example.net";
        break;
      default:
        h = "bedrock.us-east-1.region" + id + ".example.org";
      }
    } else {
      h = "www" + id + ".unlisted" + std::to_string(k) + ".example.com";
    }
    out.push_back(*ccsb::parse_host(h));
  }
  return out;
}

struct fixture {
  ccsb::domain_set set;
  std::vector<ccsb::host> hits, misses;
};

const fixture& get(std::size_t n) {
  static std::map<std::size_t, fixture> cache;
  auto it = cache.find(n);
  if (it == cache.end()) {
    fixture f;
    f.set = std::move(*ccsb::domain_set::compile(make_patterns(n)));
    f.hits = make_hosts(n, true);
    f.misses = make_hosts(n, false);
    it = cache.emplace(n, std::move(f)).first;
  }
  return it->second;
}

template <bool Compiled, bool Hits> void BM_match(benchmark::State& state) {
  const auto& f = get(static_cast<std::size_t>(state.range(0)));
  const auto& hosts = Hits ? f.hits : f.misses;
  std::size_t i = 0, found = 0;
  for (auto _ : state) {
    const auto& h = hosts[i++ % kHosts];
    const ccsb::domain_pattern* p = Compiled ? f.set.match(h) : f.set.match_linear(h);
    found += p != nullptr;
    benchmark::DoNotOptimize(p);
  }
  if (found != static_cast<std::size_t>(Hits ? state.iterations() : 0)) state.SkipWithError("wrong match result");
}

// The whole decision a proxy makes per request: normalise the raw host text,
// then the deny list, then the allowlist (baseline + session patterns).
void BM_decide_raw(benchmark::State& state) {
  auto n = static_cast<std::size_t>(state.range(0));
  auto pol = *ccsb::egress_policy::compile({make_patterns(n), {}, true, true});
  std::vector<std::string> raw;
  for (const auto& h : get(n).hits) raw.emplace_back(h.str());
  std::size_t i = 0;
  for (auto _ : state) benchmark::DoNotOptimize(pol.decide(std::string_view(raw[i++ % kHosts])));
}

class table_reporter : public benchmark::ConsoleReporter {
public:
  std::map<std::string, double> ns;
  void ReportRuns(const std::vector<Run>& runs) override {
    for (const auto& r : runs) ns[r.benchmark_name()] = r.GetAdjustedRealTime();
    ConsoleReporter::ReportRuns(runs);
  }
};

} // namespace

BENCHMARK_TEMPLATE(BM_match, true, true)->Name("compiled/hit")->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK_TEMPLATE(BM_match, false, true)->Name("linear/hit")->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK_TEMPLATE(BM_match, true, false)->Name("compiled/miss")->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK_TEMPLATE(BM_match, false, false)->Name("linear/miss")->Arg(10)->Arg(1000)->Arg(100000);
BENCHMARK(BM_decide_raw)->Name("decide_raw/hit")->Arg(10)->Arg(100000);

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  table_reporter rep;
  benchmark::RunSpecifiedBenchmarks(&rep);
  std::printf("\n%-10s %-5s %14s %14s %10s\n", "patterns", "kind", "compiled ns", "linear ns", "speed-up");
  for (const char* kind : {"hit", "miss"}) {
    for (int n : {10, 1000, 100000}) {
      std::string suffix = std::string("/") + kind + "/" + std::to_string(n);
      double c = rep.ns["compiled" + suffix], l = rep.ns["linear" + suffix];
      if (c > 0 && l > 0) std::printf("%-10d %-5s %14.1f %14.1f %9.0fx\n", n, kind, c, l, l / c);
    }
  }
  std::printf("targets: compiled <= 50 ns at 100000 patterns; >= 100x the linear scan there\n");
  benchmark::Shutdown();
}
