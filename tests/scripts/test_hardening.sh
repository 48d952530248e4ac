#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# The hardening suite: the built kop binary (KOP_BIN, or the first
# argument) carries what the hardening flags of meson.build give it, read
# from the ELF file with readelf and objdump (binutils):
#
#   pie            ET_DYN with DF_1_PIE (b_pie)
#   relro, now     a GNU_RELRO segment and BIND_NOW (-z relro -z now)
#   fortify        an imported __*_chk function (-D_FORTIFY_SOURCE=2)
#   stack-protector  __stack_chk_fail imported (-fstack-protector-strong)
#   stack-clash    page probes next to the page-sized stack allocations,
#                  and no function moving %rsp by more than a page in one
#                  step (-fstack-clash-protection; x86-64)
#   ibt            main and every global kop_* function begin with
#                  endbr64, and
#   cet-note       the property note "x86 feature: IBT, SHSTK"
#                  (-fcf-protection; x86-64)
#
# A check is skipped, saying why, only where the property does not exist:
# CET and the probe pattern on another architecture; fortify in a build
# meson.build leaves it out of (KOP_FORTIFY_OFF: -O0, sanitizers); the
# property note when the C runtime's own start files are built without
# CET (their _start/_init/_fini lack endbr64: Debian 12's glibc), so the
# linker cannot mark any binary. A skipped check is a SKIP line; the suite
# still fails on any FAIL, and never skips as a whole (the ELF checks run
# everywhere).
set -uo pipefail
# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"

bin=${1:-${KOP_BIN:-}}
if [ -z "$bin" ] || [ ! -f "$bin" ]; then
  echo "hardening: no binary (KOP_BIN or the first argument): '${bin}'"
  exit 1
fi
for t in readelf objdump; do
  command -v "$t" >/dev/null || {
    echo "hardening: $t is missing (binutils)"
    exit 1
  }
done
scratch

readelf -hW "$bin" >"$work/header" 2>&1 || {
  echo "hardening: $bin is not an ELF file"
  cat "$work/header"
  exit 1
}
readelf -dW "$bin" >"$work/dynamic"
readelf -lW "$bin" >"$work/segments"
readelf -nW "$bin" >"$work/notes"
readelf --dyn-syms -W "$bin" >"$work/dynsyms"
readelf -sW "$bin" >"$work/symtab"
objdump -d --no-show-raw-insn "$bin" >"$work/code"
x86_64=
grep -q 'Machine:.*X86-64' "$work/header" && x86_64=1

# Functions of the C runtime and of the sanitizer runtimes, which kop does
# not build: the stack clash check leaves them out.
runtime='^(_init|_start|_fini|_dl_relocate_static_pie)$|__(asan|lsan|ubsan|tsan|msan|sancov|sanitizer|interception|interceptor)'

# ---- PIE, RELRO, BIND_NOW ---------------------------------------------------
if grep -q 'Type:[[:space:]]*DYN' "$work/header" && grep -q 'FLAGS_1).*\bPIE\b' "$work/dynamic"; then
  pass "pie: ET_DYN with DF_1_PIE"
else
  fail "pie: not a position-independent executable ($(sed -n 's/^ *Type: *//p' "$work/header"); b_pie, -fPIE -pie)"
fi
if grep -q '^[[:space:]]*GNU_RELRO' "$work/segments"; then
  pass "relro: GNU_RELRO segment"
else
  fail "relro: no GNU_RELRO segment (-Wl,-z,relro)"
fi
if grep -q '(FLAGS).*\bBIND_NOW\b' "$work/dynamic" || grep -q 'FLAGS_1).*\bNOW\b' "$work/dynamic"; then
  pass "now: BIND_NOW (full RELRO)"
else
  fail "now: neither DT_FLAGS BIND_NOW nor DT_FLAGS_1 NOW: lazy binding, the GOT stays writable (-Wl,-z,now)"
fi

# ---- fortify, stack protector -----------------------------------------------
# Imported functions: UND in the dynamic symbol table.
und=$(awk '$7 == "UND" { n = $8; sub(/@.*/, "", n); print n }' "$work/dynsyms")
chk=$(grep -E '^__[a-z0-9_]+_chk$' <<<"$und" | grep -v -x '__stack_chk_fail' | tr '\n' ' ')
if [ -n "${KOP_FORTIFY_OFF:-}" ]; then
  skip "fortify: not in this build ($KOP_FORTIFY_OFF; meson.build says why)"
elif [ -n "$chk" ]; then
  pass "fortify: imports $chk"
else
  fail "fortify: no __*_chk function imported (-D_FORTIFY_SOURCE=2 with optimisation)"
fi
if grep -q -x '__stack_chk_fail' <<<"$und"; then
  pass "stack-protector: imports __stack_chk_fail"
else
  fail "stack-protector: __stack_chk_fail not imported (-fstack-protector-strong)"
fi

# ---- stack clash ------------------------------------------------------------
# With -fstack-clash-protection GCC and clang allocate a frame or an alloca
# of a page or more one page at a time (sub $0x1000,%rsp) and touch each
# page (or/xor/mov $0x0,(%rsp)) next to it; without it they subtract the
# whole size at once and no such pair exists. Both are counted: probes
# show the flag reached the code, a one-step allocation over a page (a
# function outside the runtimes) shows code it did not reach.
if [ -n "$x86_64" ]; then
  read -r probes big <<<"$(awk -v rt="$runtime" '
    function probe(m, o) { return m ~ /^(or|xor|mov)[bwlq]?$/ && o == "$0x0,(%rsp)" }
    /^[0-9a-f]+ <[^>]+>:$/ { fn = substr($2, 2, length($2) - 3); pm = ""; pending = 0; next }
    { m = $2; o = $3 }
    pending { if (probe(m, o)) probes++; pending = 0 }
    m ~ /^subq?$/ && o == "$0x1000,%rsp" { if (probe(pm, po)) probes++; else pending = 1 }
    m ~ /^subq?$/ && o ~ /^\$0x[1-9a-f][0-9a-f][0-9a-f][0-9a-f][0-9a-f]?[0-9a-f]?[0-9a-f]?[0-9a-f]?,%rsp$/ &&
      o != "$0x1000,%rsp" && fn !~ rt { big++; if (!(fn in named) && nb < 5) { named[fn] = 1; nb++; list = list " " fn } }
    { pm = m; po = o }
    END { printf "%d %d%s\n", probes, big, list }' "$work/code")"
  if [ "$probes" -gt 0 ]; then
    pass "stack-clash: $probes page probes"
  else
    fail "stack-clash: no page probe next to a page-sized allocation (-fstack-clash-protection)"
  fi
  if [ "${big%% *}" -eq 0 ]; then
    pass "stack-clash: no function allocates more than a page of stack in one step"
  else
    fail "stack-clash: allocations over a page without probes, in:${big#* }"
  fi
else
  skip "stack-clash: the probe pattern checked is x86-64's ($(grep 'Machine:' "$work/header" | sed 's/.*Machine: *//'))"
fi

# ---- CET ----------------------------------------------------------------------
if [ -n "$x86_64" ]; then
  # kop's global functions (main and kop_*; a sanitizer's runtime brings
  # its own, built without CET) in the symbol table, and the first
  # instruction of each in the disassembly.
  ours='^(main|kop_[A-Za-z0-9_]*)$'
  missing=$(awk -v ours="$ours" '
    FNR == NR { if ($4 == "FUNC" && $5 == "GLOBAL" && $7 != "UND" && $8 ~ ours) g[$8] = 1; next }
    /^[0-9a-f]+ <[^>]+>:$/ { fn = substr($2, 2, length($2) - 3); first = 1; next }
    first && NF >= 2 { first = 0; if ((fn in g) && $2 != "endbr64") print fn }' \
    "$work/symtab" "$work/code" | sort -u)
  nglobal=$(awk -v ours="$ours" '$4 == "FUNC" && $5 == "GLOBAL" && $7 != "UND" && $8 ~ ours' "$work/symtab" | wc -l)
  crt_endbr=$(awk '
    /^[0-9a-f]+ <(_start|_init|_fini)>:$/ { fn = $2; first = 1; next }
    first && NF >= 2 { first = 0; if ($2 == "endbr64") n++; else bad = 1 }
    END { print (n > 0 && !bad) ? "yes" : "no" }' "$work/code")
  if [ "$nglobal" -eq 0 ]; then
    fail "ibt: no main or kop_* function in the symbol table (stripped?): cannot check endbr64"
  elif [ -z "$missing" ]; then
    pass "ibt: all $nglobal global functions (main, kop_*) begin with endbr64"
  else
    fail "ibt: global functions without endbr64 (-fcf-protection): $(head -n 5 <<<"$missing" | tr '\n' ' ')"
  fi
  if grep -q 'x86 feature:.*IBT, SHSTK' "$work/notes"; then
    pass "cet-note: x86 feature: IBT, SHSTK"
  elif [ "$crt_endbr" = no ] && [ -z "$missing" ] && [ "$nglobal" -gt 0 ]; then
    skip "cet-note: no IBT/SHSTK property note, and the C runtime's _start/_init/_fini lack endbr64: the toolchain's start files are built without CET, so the linker marks no binary (kop's own code has endbr64, above)"
  else
    fail "cet-note: no 'x86 feature: IBT, SHSTK' property note: an object linked in lacks the marking (-fcf-protection; ld -z cet-report=warning names it)"
  fi
else
  skip "ibt, cet-note: CET is x86's ($(grep 'Machine:' "$work/header" | sed 's/.*Machine: *//'))"
fi

finish
