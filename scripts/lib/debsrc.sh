# SPDX-License-Identifier: Apache-2.0
# shellcheck shell=bash
#
# Debian source packages through a private apt configuration, for the
# scripts that build a library from Debian's own source (scripts/mbedtls.sh,
# scripts/curl-minimal.sh). Sourced, not run.
#
#   debsrc_setup DIR SUITE    writes DIR/sources.list with deb-src lines for
#                             SUITE, SUITE-updates and SUITE-security and runs
#                             apt-get update on it; sets the array
#                             debsrc_aptopts for later apt-get calls;
#                             returns 1 (the reason on stderr) when the
#                             update fails
#   debsrc_get DIR PKG[=VER]  apt-get source PKG (the newest of those suites,
#                             or exactly VER) into DIR; applies its patches
#   debsrc_version PKG        the version debsrc_get would fetch
#   run WHAT COMMAND...       runs COMMAND with its output in $log; on
#                             failure die()s with WHAT and the log's tail
#   debsrc_buildflags OPTS [FLAG...]
#                             exports dpkg-buildflags' CFLAGS, CPPFLAGS and
#                             LDFLAGS for DEB_BUILD_MAINT_OPTIONS=OPTS, plus
#                             stack clash protection, CET on x86 and the
#                             FLAGs, each where the compiler takes it
#
# The mirrors are the machine's own: the URIs of the deb lines of its apt
# sources (/etc/apt/sources.list and /etc/apt/sources.list.d/*.list in the
# one-line format, *.sources in deb822) whose suite is the machine's
# codename (for the main archive) or the codename's -security (for the
# security archive). $KOP_DEBIAN_MIRROR and $KOP_DEBIAN_SECURITY_MIRROR
# override them. /etc/apt itself is never touched. The caller defines
# die() (its message with the script's name, exit 1) and $log.

run() { # what command...: runs it with its output in the log
  local what=$1
  shift
  echo "+ $*" >>"$log"
  "$@" >>"$log" 2>&1 || die "$what failed (last lines of $log):
$(tail -n 15 "$log")"
}

# Debian 12's dpkg-buildflags (1.21) has no stack clash or CET flag (newer
# dpkg adds them itself); the libraries built here are linked into kop,
# whose binary must have both (tests/scripts/test_hardening.sh).
debsrc_buildflags() {
  local opts=$1 f
  shift
  eval "$(DEB_BUILD_MAINT_OPTIONS=$opts dpkg-buildflags --export=sh)"
  local extra=(-fstack-clash-protection)
  case $(${CC:-cc} -dumpmachine) in x86_64-* | i?86-*) extra+=(-fcf-protection) ;; esac
  for f in "${extra[@]}" "$@"; do
    case " $CFLAGS " in *" $f "*) continue ;; esac
    if echo 'int x;' | ${CC:-cc} "$f" -Werror -x c -c -o /dev/null - 2>/dev/null; then
      CFLAGS="$CFLAGS $f"
    fi
  done
  export CFLAGS
}

debsrc_codename() {
  sed -n 's/^VERSION_CODENAME=//p' /etc/os-release | tr -d '"'
}

# Prints "URI SUITE" for every deb entry of the machine's apt sources.
debsrc_entries() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    # deb [options] URI SUITE COMPONENTS...
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" && NF >= 3 { print $2, $3 }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    # deb822 stanzas, blank-line separated; Enabled: no is skipped.
    awk '
      function flush() {
        if (types ~ /(^| )deb( |$)/ && enabled != "no")
          for (i = 1; i <= nu; i++) for (j = 1; j <= ns; j++) print uris[i], suites[j]
        types = ""; enabled = ""; nu = 0; ns = 0
      }
      /^[ \t]*#/ { next }
      /^[ \t]*$/ { flush(); next }
      {
        key = tolower($1); sub(/:$/, "", key)
        if (key == "types") { types = ""; for (i = 2; i <= NF; i++) types = types " " $i; sub(/^ /, "", types) }
        else if (key == "uris") { for (i = 2; i <= NF; i++) uris[++nu] = $i }
        else if (key == "suites") { for (i = 2; i <= NF; i++) suites[++ns] = $i }
        else if (key == "enabled") enabled = tolower($2)
      }
      END { flush() }
    ' "$f"
  done
}

# debsrc_mirror SUFFIX: the first URI whose suite is <codename>SUFFIX.
debsrc_mirror() {
  local codename
  codename=$(debsrc_codename)
  debsrc_entries | awk -v s="$codename$1" '$2 == s { print $1; exit }'
}

debsrc_setup() {
  local dir=$1 suite=$2 mirror security keyring
  mirror=${KOP_DEBIAN_MIRROR:-$(debsrc_mirror "")}
  security=${KOP_DEBIAN_SECURITY_MIRROR:-$(debsrc_mirror -security)}
  [ -n "$mirror" ] || die "no Debian mirror in this machine's apt sources (a deb line for $(debsrc_codename)); set KOP_DEBIAN_MIRROR"
  keyring=/usr/share/keyrings/debian-archive-keyring.gpg
  [ -f "$keyring" ] || die "$keyring is missing (debian-archive-keyring)"
  mkdir -p "$dir/lists/partial" "$dir/cache/archives/partial"
  {
    echo "deb-src [signed-by=$keyring] $mirror $suite main"
    echo "deb-src [signed-by=$keyring] $mirror $suite-updates main"
    [ -z "$security" ] || echo "deb-src [signed-by=$keyring] $security $suite-security main"
  } >"$dir/sources.list"
  debsrc_aptopts=(-o "Dir::Etc::SourceList=$dir/sources.list" -o Dir::Etc::SourceParts=-
    -o "Dir::State::Lists=$dir/lists" -o "Dir::Cache=$dir/cache" -o Debug::NoLocking=1)
  # As root apt downloads as the _apt user, who cannot write below DIR.
  [ "$(id -u)" -ne 0 ] || debsrc_aptopts+=(-o APT::Sandbox::User=root)
  echo "+ apt-get update (deb-src $mirror $suite)" >>"$log"
  if ! apt-get "${debsrc_aptopts[@]}" -q --error-on=any update >>"$log" 2>&1; then
    echo "apt-get update (deb-src $mirror $suite) failed (last lines of $log):" >&2
    tail -n 5 "$log" >&2
    return 1
  fi
}

debsrc_version() {
  local v best=
  for v in $(apt-cache "${debsrc_aptopts[@]}" showsrc --only-source "$1" 2>/dev/null |
    awk '/^Version:/ { print $2 }'); do
    if [ -z "$best" ] || dpkg --compare-versions "$v" gt "$best"; then
      best=$v
    fi
  done
  echo "$best"
}

debsrc_get() {
  local dir=$1 pkg=$2
  mkdir -p "$dir"
  (cd "$dir" && run "apt-get source $pkg" apt-get "${debsrc_aptopts[@]}" -q source --only-source "$pkg")
}
