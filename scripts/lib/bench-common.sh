# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# What the benchmark scripts (scripts/bench-*.sh) share (sourced, not run;
# the caller has done `set -euo pipefail` and is in the source root).
#
#   bench_usage_line="usage: ..."
#       the line bench_usage prints; set it before the arguments are read.
#   bench_usage [MESSAGE]
#       MESSAGE (when given, "NAME: MESSAGE") and the usage line on stderr,
#       then exit 2. For a bad option, a bad value and --help alike.
#   bench_no_help ARGS...
#       bench_usage when one of ARGS is -h or --help (for scripts whose
#       arguments are positional).
#   bench_count NAME VALUE
#       bench_usage unless VALUE is a whole number >= 1.
#   bench_n_and_one_arg ARGS...
#       bench_usage unless ARGS are [-n N] [ONE_MORE] with N a whole number
#       >= 1 (the command lines of the tests/bench programs).
#   bench_setup DIR [MESON_ARGS...]
#       meson setup DIR with MESON_ARGS when DIR has no build.ninja yet.
#   bench_kop
#       sets kop to $KOP_BIN when it is set (another build to measure; it
#       must be executable), else to build-release/kop, configured and
#       built here as a release build without the tests.
#   bench_c_program BUILD NAME
#       builds tests/bench/NAME.c in BUILD: its meson target when the build
#       defines it, otherwise by hand against the build's static libraries;
#       sets bench_bin to the program.
#   bench_cpus / bench_machine
#       "N cores, CPU model" / the same and ", M GiB" of memory.
#   bench_need_python3
#       installs python3 when it is missing (Debian 12 container images have
#       none; the benchmark tools need only its standard library).
#   bench_free_port
#       a free TCP port on 127.0.0.1 (for flags that take no port 0).
#   bench_kubesim_scratch
#       a scratch directory in $work, scripts/lib/kubesim.sh loaded, and an
#       EXIT trap that stops the kop in $kop_pid (when set) and kubesim and
#       removes $work.

bench_name=$(basename "$0" .sh)
bench_usage_line="usage: $0"

bench_usage() {
  [ $# -eq 0 ] || echo "$bench_name: $*" >&2
  echo "$bench_usage_line" >&2
  exit 2
}

bench_no_help() {
  local a
  for a in "$@"; do
    case $a in -h | --help) bench_usage ;; esac
  done
}

bench_count() {
  case $2 in
  '' | *[!0-9]*) bench_usage "$1 must be a whole number, not \"$2\"" ;;
  esac
  [ "$2" -ge 1 ] || bench_usage "$1 must be at least 1"
}

bench_n_and_one_arg() {
  local o OPTIND=1
  while getopts "n:" o; do
    case $o in
      n) bench_count N "$OPTARG" ;;
      *) bench_usage ;;
    esac
  done
  [ $# -le $OPTIND ] || bench_usage "one argument at most after the options"
}

bench_setup() {
  local dir=$1
  shift
  [ -f "$dir/build.ninja" ] || meson setup "$dir" "$@" >/dev/null
}

bench_kop() {
  if [ -n "${KOP_BIN:-}" ]; then
    kop=$KOP_BIN
    [ -x "$kop" ] || bench_usage "KOP_BIN is not an executable: $kop"
  else
    bench_setup build-release --buildtype=release -Dtests=false
    ninja -C build-release kop >/dev/null
    kop="$PWD/build-release/kop"
  fi
}

bench_c_program() {
  local build=$1 name=$2 target
  target=$(ninja -C "$build" -t targets all 2>/dev/null |
    sed -n "s/^\\(tests\\/\\(bench\\/\\)\\{0,1\\}$name\\): .*/\\1/p" | head -n 1)
  if [ -n "$target" ]; then
    ninja -C "$build" "$target" >/dev/null
    bench_bin=$build/$target
  else
    ninja -C "$build" src/core/libkop_core.a src/core/libkop_file.a src/core/libkop_curltls.a \
      src/kube/libkop_kube.a >/dev/null
    bench_bin=$build/$name
    # shellcheck disable=SC2046 # pkg-config output is a list of flags
    ${CC:-cc} -std=c11 -D_GNU_SOURCE -O2 -g -Wall -Wextra -Werror \
      -Iinclude -I"$build" "tests/bench/$name.c" -o "$bench_bin" \
      "$build/src/kube/libkop_kube.a" "$build/src/core/libkop_curltls.a" \
      "$build/src/core/libkop_core.a" "$build/src/core/libkop_file.a" \
      $(pkg-config --cflags --libs jansson libcurl yaml-0.1) \
      -lpthread -lm
  fi
}

bench_cpus() {
  echo "$(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ *//')"
}

bench_machine() {
  echo "$(bench_cpus), $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo)"
}

bench_need_python3() {
  command -v python3 >/dev/null || { apt-get update -qq && apt-get install -y -qq python3 >/dev/null; }
}

# bench_need_tools CMD:PACKAGE...: installs (apt) the packages of the
# commands that are missing.
bench_need_tools() {
  local t sudo='' missing=()
  for t in "$@"; do
    command -v "${t%%:*}" >/dev/null 2>&1 || missing+=("${t#*:}")
  done
  [ ${#missing[@]} -gt 0 ] || return 0
  [ "$(id -u)" -eq 0 ] || sudo=sudo
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}

# bench_scratch: $tmp, a scratch directory, and $kpid, the server being
# measured (empty when none); both are cleaned up on exit.
bench_scratch() {
  tmp=$(mktemp -d)
  kpid=
  trap bench_scratch_cleanup EXIT
  trap 'exit 130' INT TERM
}

bench_scratch_cleanup() {
  if [ -n "$kpid" ]; then
    kill "$kpid" 2>/dev/null || true
    wait "$kpid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}

bench_free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])'
}

bench_kubesim_scratch() {
  work=$(mktemp -d)
  kop_pid=
  # shellcheck source=scripts/lib/kubesim.sh
  . scripts/lib/kubesim.sh
  trap bench_kubesim_cleanup EXIT
}

bench_kubesim_cleanup() {
  [ -n "$kop_pid" ] && kill "$kop_pid" 2>/dev/null && wait "$kop_pid" 2>/dev/null
  kubesim_stop
  rm -rf "$work"
}
