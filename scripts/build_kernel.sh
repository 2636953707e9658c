#!/usr/bin/env bash
# Build a small 6.12 kernel from Debian's linux-source-6.12 with the seeds' fixes
# (kernel/patches/*.patch: the slush fund, the no-op bandwidth update, the
# atomic pool and interleaved period timers, each a sched feature, off by
# default), for `throttlelab real --kernel PATH`.
#
#   bash scripts/build_kernel.sh [--plain] [--jobs N]
#
# --plain builds without the patches. The config is tinyconfig plus what the
# guest's run needs (SMP, a serial console, an initramfs, proc/sys/devtmpfs,
# cgroups with CFS bandwidth and cpusets v1 and v2, tracefs and KALLSYMS for the
# period timer's offset (the trace names the timer by its function), kprobe
# events for `throttlelab diff` (without BTF: the probes' fallbacks without
# fields), debugfs for /sys/kernel/debug/sched/features, HZ=250 as Debian's).
# The image and its config are kept under
# ${XDG_CACHE_HOME:-~/.cache}/throttlelab/kernels/built-6.12-<hash of the patches and this script>/,
# which the script prints last; a second run with the same patches reuses them.
# Needs root once for `apt-get install linux-source-6.12` and the build tools.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
plain=
jobs=$(nproc)
while [ $# -gt 0 ]; do
    case "$1" in
        --plain) plain=1 ;;
        --jobs) jobs=$2; shift ;;
        *) echo "usage: $0 [--plain] [--jobs N]" >&2; exit 2 ;;
    esac
    shift
done

tarball=/usr/src/linux-source-6.12.tar.xz
need=()
[ -f "$tarball" ] || need+=(linux-source-6.12)
for tool in make:make gcc:gcc flex:flex bison:bison bc:bc; do
    command -v "${tool%%:*}" >/dev/null || need+=("${tool#*:}")
done
[ -e /usr/include/libelf.h ] || need+=(libelf-dev)
[ -e /usr/include/openssl/ssl.h ] || need+=(libssl-dev)
if [ ${#need[@]} -gt 0 ]; then
    apt-get update -q
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}"
fi

patches=()
[ -n "$plain" ] || patches=("$root"/kernel/patches/*.patch)
hash=$( { echo "${patches[@]+"${patches[@]}"}" | xargs -r cat; cat "$0"; } | sha256sum | cut -c1-12)
name=built-6.12-${plain:+plain-}$hash
out=${XDG_CACHE_HOME:-$HOME/.cache}/throttlelab/kernels/$name
if [ -f "$out/bzImage" ]; then
    echo "$out/bzImage"
    exit 0
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "unpacking $tarball" >&2
tar -xJf "$tarball" -C "$work"
src=$work/linux-source-6.12
for p in ${patches[@]+"${patches[@]}"}; do
    echo "applying $(basename "$p")" >&2
    patch -s -p1 -d "$src" < "$p"
done

cd "$src"
make -s tinyconfig
./scripts/config \
    -e 64BIT -e SMP -e PRINTK -e TTY -e SERIAL_8250 -e SERIAL_8250_CONSOLE \
    -e BLK_DEV_INITRD -e PROC_FS -e SYSFS -e DEVTMPFS -e TMPFS -e BINFMT_ELF -e BINFMT_SCRIPT \
    -e MULTIUSER -e FUTEX -e POSIX_TIMERS -e FILE_LOCKING -e EPOLL -e SIGNALFD -e EVENTFD -e SHMEM \
    -e HIGH_RES_TIMERS -e NO_HZ_IDLE -e HZ_250 -d HZ_100 \
    -e CGROUPS -e CGROUP_SCHED -e FAIR_GROUP_SCHED -e CFS_BANDWIDTH -e CPUSETS -e CPUSETS_V1 \
    -e CGROUP_CPUACCT -e SCHED_DEBUG -e DEBUG_FS -e FTRACE -e ENABLE_DEFAULT_TRACERS \
    -e ACPI -e PCI -e X86_TSC -e IKCONFIG -e IKCONFIG_PROC -e UNIX -e NET -e KALLSYMS \
    -e KPROBES -e KPROBE_EVENTS
make -s olddefconfig
for option in CFS_BANDWIDTH CPUSETS_V1 HZ_250 SCHED_DEBUG DEBUG_FS SERIAL_8250_CONSOLE KALLSYMS KPROBE_EVENTS; do
    grep -q "^CONFIG_$option=y" .config || { echo "CONFIG_$option did not stick" >&2; exit 1; }
done
echo "building ($jobs jobs)" >&2
make -s -j"$jobs" bzImage
mkdir -p "$out"
cp arch/x86/boot/bzImage "$out/bzImage"
cp .config "$out/.config"
echo "$out/bzImage"
