// ccsb/baseline.hpp — the curated baseline domain lists (N4, N5).
//
// Every entry says why it is there. The allowlist covers LLM providers, git
// hosting and the package registries of Python, Rust, Go, Ruby, Java and .NET.
// The JavaScript registry and the Debian archive are deliberately not in the
// baseline: a deployment that needs them adds them with egressAllowlist /
// --allow (see docs/design.md, "Egress baseline").
#pragma once

#include <string_view>

namespace ccsb {

struct listed_domain {
  std::string_view pattern;
  std::string_view why;
};

inline constexpr listed_domain kBaselineAllowedDomains[] = {
    // LLM providers: the agents talk to their model APIs.
    {"api.anthropic.com", "Anthropic API (Claude models)"},
    {"api.openai.com", "OpenAI API"},
    {"generativelanguage.googleapis.com", "Google Gemini API"},
    {"aiplatform.googleapis.com", "Google Vertex AI global endpoint"},
    {"bedrock.*.amazonaws.com", "Amazon Bedrock control plane, one region label"},
    {"bedrock-runtime.*.amazonaws.com", "Amazon Bedrock model invocation, one region label"},
    {"api.mistral.ai", "Mistral API"},
    {"api.cohere.com", "Cohere API"},
    {"api.groq.com", "Groq API"},
    {"api.deepseek.com", "DeepSeek API"},
    {"openrouter.ai", "OpenRouter model router"},
    // Git hosting other than GitHub (GitHub is kGithubDomains).
    {"gitlab.com", "GitLab.com git over HTTPS and SSH"},
    {"registry.gitlab.com", "GitLab container and package registry"},
    {"bitbucket.org", "Bitbucket git over HTTPS and SSH"},
    {"api.bitbucket.org", "Bitbucket REST API"},
    {"codeberg.org", "Codeberg (Forgejo) git hosting"},
    {"git.sr.ht", "SourceHut git hosting"},
    // Python packages.
    {"pypi.org", "Python Package Index: simple index and metadata"},
    {"files.pythonhosted.org", "Python Package Index: package files"},
    // Rust crates.
    {"crates.io", "Rust crate registry API"},
    {"index.crates.io", "Rust sparse crate index"},
    {"static.crates.io", "Rust crate downloads"},
    {"static.rust-lang.org", "rustup toolchain downloads"},
    // Go modules.
    {"proxy.golang.org", "Go module proxy"},
    {"sum.golang.org", "Go checksum database"},
    // Ruby gems.
    {"rubygems.org", "RubyGems registry"},
    {"index.rubygems.org", "RubyGems compact index"},
    // Java.
    {"repo.maven.apache.org", "Maven Central"},
    {"repo1.maven.org", "Maven Central (legacy name)"},
    {"plugins.gradle.org", "Gradle plugin portal"},
    {"services.gradle.org", "Gradle wrapper distributions"},
    // .NET.
    {"api.nuget.org", "NuGet v3 API"},
    {"globalcdn.nuget.org", "NuGet package downloads"},
};

inline constexpr listed_domain kGithubDomains[] = {
    {"github.com", "GitHub web, git over HTTPS and SSH"},
    {"api.github.com", "GitHub REST and GraphQL API"},
    {"codeload.github.com", "GitHub archive downloads"},
    {"uploads.github.com", "GitHub release asset uploads"},
    {"raw.githubusercontent.com", "raw file contents"},
    {"objects.githubusercontent.com", "release assets and LFS objects"},
    {"release-assets.githubusercontent.com", "release asset downloads"},
    {"ghcr.io", "GitHub container registry"},
    {"pkg-containers.githubusercontent.com", "GitHub container registry blobs"},
};

// Checked before every allow; a match always denies (N5).
inline constexpr listed_domain kBaselineDeniedDomains[] = {
    // Cloud instance metadata services: they hand out instance credentials.
    {"169.254.169.254", "metadata service of AWS, GCP, Azure, Oracle, OpenStack, DigitalOcean, Hetzner"},
    {"fd00:ec2::254", "AWS instance metadata over IPv6"},
    {"169.254.170.2", "AWS ECS task metadata and credentials"},
    {"169.254.170.23", "AWS EKS pod identity agent"},
    {"fd00:ec2::23", "AWS EKS pod identity agent over IPv6"},
    {"instance-data", "AWS metadata short name"},
    {"instance-data.ec2.internal", "AWS metadata name"},
    {"metadata", "GCP and others: metadata short name"},
    {"metadata.google.internal", "GCP metadata name"},
    {"metadata.goog", "GCP metadata name"},
    {"168.63.129.16", "Azure WireServer (platform agent channel)"},
    {"100.100.100.200", "Alibaba Cloud metadata service"},
    {"192.0.0.192", "Oracle Cloud legacy metadata address"},
    {"metadata.tencentyun.com", "Tencent Cloud metadata name"},
    {"localhost", "the host's own services; never reached through the proxy"},
    // Telemetry sinks: nothing a sandboxed command needs, a channel for data.
    {"statsig.anthropic.com", "Anthropic client telemetry"},
    {"api.statsig.com", "Statsig feature-flag telemetry"},
    {"featuregates.org", "Statsig telemetry"},
    {"statsigapi.net", "Statsig telemetry"},
    {"*.ingest.sentry.io", "Sentry error telemetry ingestion"},
    {"*.ingest.us.sentry.io", "Sentry error telemetry ingestion (US)"},
    {"*.ingest.de.sentry.io", "Sentry error telemetry ingestion (EU)"},
    {"api.segment.io", "Segment analytics"},
    {"api.mixpanel.com", "Mixpanel analytics"},
    {"api2.amplitude.com", "Amplitude analytics"},
    {"browser-intake-datadoghq.com", "Datadog browser telemetry"},
    {"http-intake.logs.datadoghq.com", "Datadog log intake"},
    {"api.honeycomb.io", "Honeycomb telemetry"},
};

} // namespace ccsb
