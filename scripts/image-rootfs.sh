#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The root filesystem of kop's container image, and nothing else:
#
#   scripts/image-rootfs.sh KOP_BINARY DESTDIR [DOC_DIR]
#
#   /usr/local/bin/kop                    the (stripped) binary given
#   /usr/lib/<triplet>/<soname>           every shared library it loads, as
#                                         ldd resolves them on this (Debian)
#                                         machine, under the name the loader
#                                         looks for (no version symlinks)
#   /lib64/ld-linux-x86-64.so.2           the dynamic loader (the binary's
#                                         PT_INTERP), a symlink to the file above
#   /etc/nsswitch.conf                    "hosts: files dns" (see below)
#   /usr/share/doc/<pkg>/copyright        the license of every Debian package
#                                         a file above comes from
#   /usr/share/doc/kop/LICENSE            kop's own
#   /usr/share/doc/<name>/copyright       from DOC_DIR/<name>/copyright: the
#                                         licenses of what the binary links
#                                         statically (scripts/image-build.sh
#                                         puts curl's there)
#
# No shell, no package manager, no CA bundle (kop trusts the cluster CA from
# the service account files or the kubeconfig), no /etc/passwd (the image
# runs as the numeric user 65532). Used by scripts/image.sh (buildah) and by
# the Dockerfile's build stage, so both images have the same files.
#
# Name resolution: glibc 2.36 (Debian 12) has the files and dns NSS modules
# built into libc.so.6, so nothing more is loaded at run time. Without an
# nsswitch.conf glibc would ask DNS first and stop at its "not found"
# ([!UNAVAIL=return]), so the names in the /etc/hosts the kubelet mounts
# (and localhost) would not resolve; "files dns" is Debian's own order. The
# in-cluster API address is the numeric KUBERNETES_SERVICE_HOST, which needs
# neither; kubernetes.default.svc and other names go to the cluster DNS
# through the /etc/resolv.conf the kubelet mounts.
set -euo pipefail

if [ $# -ne 2 ] && [ $# -ne 3 ]; then
  echo "usage: $0 KOP_BINARY DESTDIR [DOC_DIR]" >&2
  exit 2
fi
bin=$1
dest=$2
docdir=${3:-}
top=$(cd "$(dirname "$0")/.." && pwd)

for tool in ldd readelf dpkg-query; do
  command -v "$tool" >/dev/null || {
    echo "image-rootfs: $tool is needed" >&2
    exit 1
  }
done
if [ -e "$dest" ] && [ -n "$(ls -A "$dest")" ]; then
  echo "image-rootfs: $dest is not empty" >&2
  exit 1
fi
mkdir -p "$dest"

install -D -m 0755 "$bin" "$dest/usr/local/bin/kop"
install -D -m 0644 "$top/LICENSE" "$dest/usr/share/doc/kop/LICENSE"

# The Debian package that owns a file (merged /usr: dpkg may know it under
# /lib or /usr/lib).
owner() { # path
  local p alt
  for p in "$1" "$(readlink -f "$1")"; do
    case $p in
      /usr/lib/*) alt=${p#/usr} ;;
      /lib/* | /lib64/*) alt=/usr$p ;;
      *) alt=$p ;;
    esac
    for q in "$p" "$alt"; do
      if out=$(dpkg-query -S "$q" 2>/dev/null); then
        echo "${out%%:*}" | cut -d, -f1 | sed 's/:.*//'
        return 0
      fi
    done
  done
  return 1
}

packages=()
add_file() { # path-as-loaded destination-path
  local real pkg
  real=$(readlink -f "$1")
  install -D -m 0644 "$real" "$dest$2"
  pkg=$(owner "$1") || {
    echo "image-rootfs: no Debian package owns $1" >&2
    exit 1
  }
  packages+=("$pkg")
}

# The loader named in the binary.
interp=$(readelf -l "$bin" | sed -n 's/.*\[Requesting program interpreter: \(.*\)\]/\1/p')
if [ -z "$interp" ]; then
  echo "image-rootfs: $bin has no program interpreter (not dynamically linked?)" >&2
  exit 1
fi
interp_real=$(readlink -f "$interp")
libdir=$(dirname "$interp_real") # /usr/lib/<triplet> on Debian 12
case $libdir in
  /lib/*) libdir=/usr$libdir ;;
esac
add_file "$interp" "$libdir/$(basename "$interp")"
chmod 0755 "$dest$libdir/$(basename "$interp")"
mkdir -p "$dest$(dirname "$interp")"
if [ "$(dirname "$interp")" != "$libdir" ]; then
  ln -s "$(realpath -m -s --relative-to="$(dirname "$interp")" "$libdir/$(basename "$interp")")" \
    "$dest$interp"
fi

# Every library the loader resolves, transitively (ldd lists the closure).
# "name => /path (addr)"; the vDSO has no file.
while read -r name arrow path _; do
  [ "$arrow" = "=>" ] || continue
  case $path in
    /*) ;;
    *)
      echo "image-rootfs: $name is not found ($path)" >&2
      exit 1
      ;;
  esac
  add_file "$path" "$libdir/$name"
done < <(ldd "$bin")

# Name resolution (see above).
mkdir -p "$dest/etc"
cat >"$dest/etc/nsswitch.conf" <<'EOF'
# kop's image: /etc/hosts first, then DNS (both built into libc.so.6).
hosts: files dns
EOF
chmod 0644 "$dest/etc/nsswitch.conf"

# Licenses of the packages the files came from.
mapfile -t packages < <(printf '%s\n' "${packages[@]}" | sort -u)
for pkg in "${packages[@]}"; do
  if [ ! -f "/usr/share/doc/$pkg/copyright" ]; then
    echo "image-rootfs: /usr/share/doc/$pkg/copyright is missing" >&2
    exit 1
  fi
  install -D -m 0644 "/usr/share/doc/$pkg/copyright" "$dest/usr/share/doc/$pkg/copyright"
done
# Licenses of what is linked statically.
static=0
if [ -n "$docdir" ]; then
  for f in "$docdir"/*/copyright; do
    [ -f "$f" ] || continue
    name=$(basename "$(dirname "$f")")
    if [ -e "$dest/usr/share/doc/$name/copyright" ]; then
      echo "image-rootfs: $name/copyright from $docdir would replace a Debian package's" >&2
      exit 1
    fi
    install -D -m 0644 "$f" "$dest/usr/share/doc/$name/copyright"
    static=$((static + 1))
  done
fi
echo "image-rootfs: $(find "$dest" -type f | wc -l) files from ${#packages[@]} Debian packages + kop" \
  "($static license(s) of statically linked code), $(du -sb "$dest" | cut -f1) bytes"
