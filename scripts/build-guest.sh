#!/usr/bin/env bash
# Builds the microvm backend's guest image (X4, B6; docs/microvm.md) from
# Debian packages only:
#
#   scripts/build-guest.sh AGENT INIT OUT_DIR
#   scripts/build-guest.sh --fetch      only download and unpack the kernel
#                                       into the cache (install-deps.sh: the
#                                       build then needs no network)
#
#   AGENT     the static guest agent (the CMake target ccsb-guest-agent)
#   INIT      the static ccsb-init (the CMake target ccsb-init): the agent runs
#             every command under it in the guest (X1 broker, Landlock)
#   OUT_DIR   where the image goes: OUT_DIR/vmlinux (the uncompressed PVH
#             kernel), OUT_DIR/initramfs.cpio.gz, OUT_DIR/manifest
#
# The kernel package is downloaded (apt-get download) and unpacked
# (dpkg-deb -x) into a cache, never installed on the host: installing a
# kernel package runs update-initramfs and pulls in a boot loader. The cache
# (CCSB_GUEST_CACHE, default /var/cache/ccsb-guest or ~/.cache/ccsb-guest) is
# keyed by the kernel version; OUT_DIR is rebuilt only when the manifest's
# kernel version or a hash (agent, ccsb-init, busybox, this script) differs.
#
# The generic -amd64 flavour is the one: the -cloud-amd64 kernel has no 9p.
set -euo pipefail

fetch_only=
if [ "${1:-}" = "--fetch" ]; then fetch_only=1; else
  agent=${1:?usage: build-guest.sh AGENT INIT OUT_DIR | --fetch}
  init=${2:?usage: build-guest.sh AGENT INIT OUT_DIR | --fetch}
  out=${3:?usage: build-guest.sh AGENT INIT OUT_DIR | --fetch}
  [ -x "$agent" ] || { echo "build-guest: no agent at $agent" >&2; exit 1; }
  [ -x "$init" ] || { echo "build-guest: no ccsb-init at $init" >&2; exit 1; }
  if readelf -l "$init" 2>/dev/null | grep -q 'program interpreter'; then
    echo "build-guest: $init is not static (the initramfs has no C library)" >&2; exit 1
  fi
fi
format=1
# busybox-static: the guest's shell and modprobe, and on the host its depmod
# and cpio (no kmod or cpio package needed).
busybox=/bin/busybox
if [ ! -x "$busybox" ] || readelf -l "$busybox" 2>/dev/null | grep -q 'program interpreter'; then
  echo "build-guest: a static busybox is needed at /bin/busybox (apt-get install busybox-static)" >&2; exit 1
fi

# The kernel: the version the metapackage linux-image-amd64 points at.
pkg=$(apt-cache depends linux-image-amd64 2>/dev/null | awk '/Depends: linux-image-[0-9]/ { print $2; exit }')
[ -n "$pkg" ] || { echo "build-guest: apt offers no linux-image-amd64 (apt-get update?)" >&2; exit 1; }
kver=${pkg#linux-image-}

if [ -z "$fetch_only" ]; then
agent_hash=$(sha256sum "$agent" | cut -d' ' -f1)
init_hash=$(sha256sum "$init" | cut -d' ' -f1)
busybox_hash=$(sha256sum "$busybox" | cut -d' ' -f1)
script_hash=$(sha256sum "$0" | cut -d' ' -f1)
want="format=$format
kernel=$kver
agent=$agent_hash
init=$init_hash
busybox=$busybox_hash
script=$script_hash"
if [ -f "$out/manifest" ] && [ -f "$out/vmlinux" ] && [ -f "$out/initramfs.cpio.gz" ] &&
   [ "$(cat "$out/manifest")" = "$want" ]; then
  exit 0
fi
fi

if [ -n "${CCSB_GUEST_CACHE:-}" ]; then cache=$CCSB_GUEST_CACHE
elif [ "$(id -u)" -eq 0 ]; then cache=/var/cache/ccsb-guest
else cache=${XDG_CACHE_HOME:-$HOME/.cache}/ccsb-guest; fi
kdir="$cache/$kver"
if [ ! -f "$kdir/.unpacked" ]; then
  rm -rf "$kdir"
  mkdir -p "$kdir/deb"
  # apt's download sandbox user may not write a root-owned cache: it warns
  # and downloads as root, which is what runs here anyway.
  (cd "$kdir/deb" && apt-get download -q "$pkg" 2>&1 >/dev/null | grep -v "Download is performed unsandboxed" >&2 || true)
  dpkg-deb -x "$kdir"/deb/*.deb "$kdir/root"
  rm -rf "$kdir/deb"
  # The package carries no modules.dep (its postinst makes it).
  "$busybox" depmod -b "$kdir/root" "$kver"
  touch "$kdir/.unpacked"
fi
vmlinuz="$kdir/root/boot/vmlinuz-$kver"
moddir="$kdir/root/lib/modules/$kver"
[ -f "$vmlinuz" ] && [ -d "$moddir" ] || { echo "build-guest: $pkg has no vmlinuz or modules" >&2; exit 1; }
[ -z "$fetch_only" ] || exit 0

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

# The uncompressed vmlinux (an ELF with the PVH entry note QEMU boots
# directly): the XZ stream inside the bzImage, found by its magic. xz
# --single-stream stops at the stream's end; a candidate that does not
# unpack to an ELF is a false match of the magic.
found=
while read -r off; do
  if tail -c +"$((off + 1))" "$vmlinuz" | xz -dc --single-stream >"$work/vmlinux" 2>/dev/null ||
     [ -s "$work/vmlinux" ]; then
    if [ "$(head -c 4 "$work/vmlinux" | od -An -tx1 | tr -d ' ')" = "7f454c46" ]; then found=1; break; fi
  fi
done < <(grep -abo $'\xfd7zXZ\x00' "$vmlinuz" | cut -d: -f1)
[ -n "$found" ] || { echo "build-guest: no XZ-compressed vmlinux inside $vmlinuz" >&2; exit 1; }

# The initramfs: busybox, the modules the agent needs (9p over virtio, the
# virtio-serial console) with what they depend on, and the agent.
root="$work/root"
mkdir -p "$root"/{bin,dev,proc,sys,tmp,sysroot,lib/modules/"$kver"}
cp "$busybox" "$root/bin/busybox"
for a in sh mount modprobe insmod mkdir ls cat poweroff; do ln -s busybox "$root/bin/$a"; done
cp "$agent" "$root/ccsb-agent"
cp "$init" "$root/ccsb-init"
modules="virtio_mmio virtio_console 9pnet_virtio 9p"
needed=()
add_module() {
  local name=$1 line path dep
  line=$(awk -v m="$name" -F: '{ n = $1; sub(/.*\//, "", n); sub(/\.ko(\.[a-z]+)?$/, "", n); gsub(/-/, "_", n);
         if (n == m) { print; exit } }' "$moddir/modules.dep")
  if [ -z "$line" ]; then
    # Built into this kernel (modules.builtin), or absent.
    if grep -qE "/${name//_/[_-]}\.ko$" "$moddir/modules.builtin"; then return 0; fi
    echo "build-guest: module $name is neither a module nor built into $kver" >&2; exit 1
  fi
  path=${line%%:*}
  for dep in ${line#*:}; do
    dep=${dep##*/}; dep=${dep%%.ko*}; add_module "${dep//-/_}"
  done
  for p in "${needed[@]:-}"; do [ "$p" = "$path" ] && return 0; done
  needed+=("$path")
}
for m in $modules; do add_module "$m"; done
for p in "${needed[@]}"; do
  mkdir -p "$root/lib/modules/$kver/$(dirname "$p")"
  cp "$moddir/$p" "$root/lib/modules/$kver/$p"
done
cp "$moddir"/modules.{order,builtin,builtin.modinfo} "$root/lib/modules/$kver/" 2>/dev/null || true
"$busybox" depmod -b "$root" "$kver"

# PID 1: the kernel's interfaces and the modules, then the agent, which
# mounts the shares and serves the host (ccsb/protocol/guest.hpp). The agent
# powers the VM off when it ends; should it die, PID 1 exiting panics the
# kernel and panic=-1 with QEMU's -no-reboot ends the VM.
cat >"$root/init" <<EOF
#!/bin/sh
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
for m in $modules; do modprobe \$m || echo "ccsb-guest: modprobe \$m failed"; done
exec /ccsb-agent
EOF
chmod 755 "$root/init"

mkdir -p "$out"
(cd "$root" && find . | LC_ALL=C sort | "$busybox" cpio -o -H newc -R 0:0 2>/dev/null) | gzip -1 >"$work/initramfs.cpio.gz"
rm -f "$out/manifest"
install -m 0644 "$work/vmlinux" "$out/vmlinux"
install -m 0644 "$work/initramfs.cpio.gz" "$out/initramfs.cpio.gz"
printf '%s\n' "$want" >"$work/manifest"
install -m 0644 "$work/manifest" "$out/manifest"
echo "build-guest: $out (kernel $kver)" >&2
