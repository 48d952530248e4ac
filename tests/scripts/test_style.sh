#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The style suite (docs/style.md §8): every C file is clang-format clean, carries an
# SPDX line, and uses none of the banned functions; and the layers hold
# (docs/architecture.md): a file includes only headers of its own layer or
# of the layers below it.
set -uo pipefail
root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
cd "$root"

mapfile -t files < <(find src include tests -name '*.[ch]' -not -path '*/build*' -not -path '*/node_modules/*' | sort)
fail=0

if ! command -v clang-format >/dev/null; then
  echo "style: clang-format is missing (scripts/install-deps.sh installs it)"
  exit 1
fi

# The tree is formatted with Debian 12's clang-format 14; other versions
# lay out a few constructs differently, so they do not judge it (the
# formatting check is skipped and says so; the other checks run).
cf_major=$(clang-format --version | sed -n 's/.*version \([0-9]*\).*/\1/p')
if [ "$cf_major" != 14 ]; then
  echo "style: clang-format $cf_major, not 14: formatting not checked"
fi
for f in "${files[@]}"; do
  if [ "$cf_major" = 14 ] && ! clang-format --dry-run --Werror "$f" 2>/dev/null; then
    echo "style: $f is not clang-format clean"
    fail=1
  fi
  if ! head -n 3 "$f" | grep -q 'SPDX-License-Identifier'; then
    echo "style: $f has no SPDX line"
    fail=1
  fi
done

banned='\b(sprintf|strcpy|strcat|strtok|strerror|atoi|gets)[[:space:]]*\('
if hits=$(grep -n -E "$banned" "${files[@]}" | grep -v -E '\b(snprintf|vsnprintf|strerror_r)\b'); then
  echo "style: banned functions (docs/style.md §8):"
  echo "$hits"
  fail=1
fi

# ---- layers -------------------------------------------------------------------
# A header kop/X.h belongs to the layer of src/<layer>/X.c. What each layer
# may include (besides itself): core nothing; api, kube and net core only;
# operator everything below it; main.c and the tests anything.
declare -A layer_of=()
for c in src/*/*.c; do
  l=${c#src/}
  layer_of[$(basename "$c" .c)]=${l%%/*}
done
declare -A may_use=(
  [core]="core"
  [api]="core api"
  [kube]="core kube"
  [net]="core net"
  [operator]="core api kube net operator"
)
layer_file() { # layer_file FILE: the layer a source or public header is in ("" = none)
  case $1 in
  src/*/*.c) local l=${1#src/}; echo "${l%%/*}" ;;
  include/kop/*.h) echo "${layer_of[$(basename "$1" .h)]:-}" ;;
  *) echo "" ;;
  esac
}
for f in src/*/*.c src/*/*.h include/kop/*.h; do
  [ -f "$f" ] || continue
  case $f in src/*/*.h) l=${f#src/}; l=${l%%/*} ;; *) l=$(layer_file "$f") ;; esac
  if [ -z "$l" ]; then
    echo "style: $f belongs to no layer (no src/<layer>/$(basename "${f%.*}").c)"
    fail=1
    continue
  fi
  allowed=${may_use[$l]:-}
  if [ -z "$allowed" ]; then
    echo "style: $f is in src/$l/, which is not a layer (core api kube net operator)"
    fail=1
    continue
  fi
  while IFS= read -r inc; do
    h=$(sed -E 's/.*"kop\/([a-z_0-9]+)\.h".*/\1/' <<<"$inc")
    hl=${layer_of[$h]:-}
    if [ -z "$hl" ]; then
      echo "style: $f includes kop/$h.h, which belongs to no layer"
      fail=1
    elif [[ " $allowed " != *" $hl "* ]]; then
      echo "style: $f ($l layer) includes kop/$h.h of the $hl layer (docs/architecture.md: $l may use ${allowed// /, })"
      fail=1
    fi
  done < <(grep -E '^[[:space:]]*#[[:space:]]*include[[:space:]]+"kop/' "$f")
done

# No circle between modules: a module (its src/<layer>/X.c and its header
# kop/X.h) that includes another's header depends on it, and no chain of
# such includes leads back to where it started. Within a layer the rules
# above allow any include, so this is what keeps one module below another.
if hits=$(perl -e '
    my (%layer, %deps, %state, @stack, %seen);
    for my $c (glob "src/*/*.c") { $layer{$2} = $1 if $c =~ m{^src/([^/]+)/([^/]+)\.c$} }
    for my $m (keys %layer) {
      for my $f ("src/$layer{$m}/$m.c", "include/kop/$m.h") {
        open(my $fh, "<", $f) or next;
        while (<$fh>) { $deps{$m}{$1} = 1 if /^\s*#\s*include\s+"kop\/([a-z_0-9]+)\.h"/ && $1 ne $m }
      }
    }
    sub visit { my $m = shift; $state{$m} = 1; push @stack, $m;
      for my $d (sort keys %{$deps{$m} || {}}) {
        next unless exists $layer{$d};
        if (($state{$d} // 0) == 1) {
          my ($i) = grep { $stack[$_] eq $d } 0 .. $#stack;
          my $k = join " -> ", @stack[$i .. $#stack], $d;
          print "$k\n" unless $seen{$k}++;
        } elsif (!$state{$d}) { visit($d) }
      }
      pop @stack; $state{$m} = 2;
    }
    visit($_) for sort keys %layer;') && [ -n "$hits" ]; then
  echo "style: modules that include each other in a circle (docs/architecture.md §2.2):"
  echo "$hits"
  fail=1
fi

# The generic layers name nothing of kop in their strings (the operator
# passes kop's names, prefixes and User-Agent down).
if hits=$(perl -ne 'next if m{^\s*(/?\*|//|#\s*include)};
    while (/"((?:[^"\\]|\\.)*)"/g) { my $s = $1; print "$ARGV:$.: \"$s\"\n" if $s =~ /kop/i }
    close ARGV if eof' src/kube/*.c src/net/*.c \
    include/kop/{client,kubeconfig,execcred,ratelimit,watch,informer,store,workqueue,workers,leader,events,tls,http,certgen,selfdial}.h) &&
  [ -n "$hits" ]; then
  echo "style: kop-specific strings in the kube or net layer (docs/architecture.md):"
  echo "$hits"
  fail=1
fi

echo "style: checked ${#files[@]} files"
if [ $fail -eq 0 ]; then
  echo "1 passed, 0 failed"
else
  echo "0 passed, 1 failed"
fi
exit $fail
