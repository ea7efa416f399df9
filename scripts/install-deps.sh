#!/usr/bin/env bash
# Installs every Debian package ccsb needs to build, test and benchmark.
# Idempotent: does nothing (and needs no network) when all are present.
set -euo pipefail

packages=(
  # build
  build-essential cmake pkg-config git
  # the compile cache scripts/test.sh uses for the builds its tests repeat
  ccache
  # library dependencies (SPEC §0)
  libasio-dev libc-ares-dev picojson-dev librange-v3-dev catch2 libseccomp-dev zlib1g-dev
  # run-time tool of the Linux backend (B2; the proxies need no helper, L3)
  bubblewrap
  # real clients and peers used by the tests (rule 2)
  curl openssh-client openssh-server openssl python3 iproute2 procps
  # the client tests (tests/escape/test_clients.cpp, E4): Java 17 (single-file
  # `java Foo.java` needs the JDK's compiler), Node and npm, the two Node
  # proxy routes docs/clients.md documents for Node < 22.21 (undici's ProxyAgent,
  # https-proxy-agent), wget, rsync
  openjdk-17-jdk-headless nodejs npm node-undici node-https-proxy-agent wget rsync
  # the client matrix (tests/escape/test_client_matrix.cpp, E4): pip, and Go
  # (golang-go: ~80 MB download, ~450 MB installed) against a local GOPROXY
  python3-pip golang-go
  # the agent session (tests/escape/test_agent_session.cpp): python3 -m venv
  python3-venv
  # fuzzing with clang/libFuzzer, benchmarks and their baselines
  clang libclang-rt-14-dev libbenchmark-dev tinyproxy hyperfine
  # the launch benchmark's baseline, sandbox-runtime (srt), needs ripgrep
  ripgrep
  # the microvm backend (X4, B6): QEMU runs the guest; busybox-static is the
  # guest's userland for its init (scripts/build-guest.sh)
  qemu-system-x86 busybox-static
)

# A package counts as present when it is installed, or when an installed
# package provides it (a nodejs build that bundles npm provides npm: asking
# apt for Debian's npm then would replace that nodejs).
provided=$(dpkg-query -W -f='${db:Status-Abbrev} ${Provides}\n' 2>/dev/null | awk '$1 == "ii" { $1 = ""; print }' |
  tr ',' '\n' | sed -e 's/([^)]*)//g' -e 's/^ *//' -e 's/ *$//' | sort -u)
missing=()
for p in "${packages[@]}"; do
  if dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q '^install ok installed$'; then continue; fi
  if grep -qxF "$p" <<<"$provided"; then continue; fi
  missing+=("$p")
done

# The microvm backend's guest kernel (X4): downloaded and unpacked into
# scripts/build-guest.sh's cache, never installed; the build makes the image
# from it (CMake target ccsb-guest-image). Cached: no network once there.
fetch_guest_kernel() {
  if [ "$(id -u)" -eq 0 ]; then bash "$(dirname "$0")/build-guest.sh" --fetch; fi
}

if [ ${#missing[@]} -eq 0 ]; then
  fetch_guest_kernel
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  if command -v sudo >/dev/null 2>&1; then SUDO=sudo; else
    echo "install-deps: missing packages (${missing[*]}) and not root" >&2; exit 1
  fi
else
  SUDO=
fi

echo "install-deps: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
# tinyproxy and openssh-server ship services; ccsb's tests start their own
# instances, so keep the packaged daemons from starting.
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\nexit 101\n' | $SUDO tee /usr/sbin/policy-rc.d >/dev/null
  $SUDO chmod +x /usr/sbin/policy-rc.d
  trap '$SUDO rm -f /usr/sbin/policy-rc.d' EXIT
fi
$SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fetch_guest_kernel
