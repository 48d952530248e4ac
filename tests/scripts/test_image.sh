#!/usr/bin/env bash
# SPDX-License-Identifier: Apache-2.0
#
# kop's container image (scripts/image.sh) is built and runs:
#   1. scripts/image.sh builds kop:<version> from scratch with buildah into a
#      private storage (vfs) and an OCI archive, and prints its size; with
#      the minimal libcurl (scripts/curl-minimal.sh) the binary loads no
#      libcurl.so, curl's copyright is in the image and the image is under
#      15 MB uncompressed (skipped, with the reason, when image.sh fell back
#      to Debian's libcurl4); the release binary passes the hardening
#      suite (tests/scripts/test_hardening.sh), libcurl.a included;
#   2. the image holds exactly the stripped binary, the libraries ldd
#      resolves for it, the loader, /etc/nsswitch.conf and copyright files
#      (no shell, no package manager, no CA bundle); user 65532:65532,
#      entrypoint kop; the Dockerfile's runtime stage is FROM scratch with
#      the same root filesystem (scripts/image-build.sh,
#      scripts/image-rootfs.sh) and config;
#   3. kop runs from inside the image (`buildah run --isolation chroot
#      --user 65532:65532`) the way the Deployment runs it: in-cluster
#      configuration from a read-only service account directory
#      (KUBERNETES_SERVICE_HOST=localhost, resolved through the image's
#      nsswitch.conf and /etc/hosts), the serving certificate from a
#      read-only cert dir, --leader-elect, against kubesim: the seed
#      MyResource is admitted (validating webhook over TLS), read as v2
#      (conversion webhook), reconciled to Available; /readyz is 200;
#      SIGTERM exits 0; and no file in the image's root filesystem was
#      written or created.
# Skips (exit 77) when buildah is not installed or cannot run containers
# here (KOP_WITH_IMAGE=0 for scripts/install-deps.sh leaves it out).
# Prints "N passed, N failed" and exits non-zero on a failure.
set -euo pipefail

root=${KOP_SOURCE_ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${KOP_BUILD_ROOT:-$root/build}
kubesim=$build/tests/kubesim/kubesim

if ! command -v buildah >/dev/null; then
  echo "image: buildah not installed (scripts/install-deps.sh installs it unless KOP_WITH_IMAGE=0), skipping"
  exit 77
fi
for tool in kubectl curl openssl; do
  command -v "$tool" >/dev/null || {
    echo "image: $tool not installed, skipping"
    exit 77
  }
done

work=$(mktemp -d)
chmod 0755 "$work"
bh=(buildah --root "$work/storage/root" --runroot "$work/storage/run" --storage-driver vfs)
pids=()
ctr=
cleanup() {
  for p in "${pids[@]}"; do
    kill "$p" 2>/dev/null || true
  done
  for p in "${pids[@]}"; do
    wait "$p" 2>/dev/null || true
  done
  if [ -d "$work/storage" ]; then
    [ -n "$ctr" ] && "${bh[@]}" umount "$ctr" >/dev/null 2>&1 || true
    "${bh[@]}" rm --all >/dev/null 2>&1 || true
    "${bh[@]}" rmi --all --force >/dev/null 2>&1 || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT

# The image is built from its own release configuration; a sanitizer build
# of the tests would only build the same image again.
sanitize=$(meson introspect "$build" --buildoptions 2>/dev/null |
  jq -r '.[] | select(.name == "b_sanitize") | .value' 2>/dev/null || true)
if [ -n "$sanitize" ] && [ "$sanitize" != none ]; then
  echo "image: this is a sanitizer build (b_sanitize=$sanitize); the image is tested in the plain build, skipping"
  exit 77
fi

# Can buildah make a container at all (storage, privileges)?
if ! probe=$("${bh[@]}" from scratch 2>"$work/probe.err"); then
  echo "image: buildah cannot create containers here, skipping: $(tail -n 2 "$work/probe.err")"
  exit 77
fi
"${bh[@]}" rm "$probe" >/dev/null 2>&1 || true

# shellcheck source=tests/scripts/lib.sh
. "$(dirname "${BASH_SOURCE[0]}")/lib.sh"
poll() { # tries want command...
  local tries=$1 want=$2 got=
  shift 2
  for _ in $(seq "$tries"); do
    got=$("$@" 2>/dev/null || true)
    [ "$got" = "$want" ] && return 0
    sleep 0.2
  done
  echo "$got"
  return 1
}
log_port() { # file msg
  grep -o "\"msg\":\"$2\"[^}]*" "$1" | grep -o '"port":[0-9]*' | head -n 1 | cut -d: -f2
}
k() { kubectl --cache-dir "$work/cache" "$@"; }

# ---- 1. build ------------------------------------------------------------------
# The release build and the minimal libcurl live in this build tree, so a
# second run only relinks. The suite installs nothing (KOP_IMAGE_INSTALL=0).
if KOP_BUILDAH_ROOT=$work/storage KOP_IMAGE_BUILD_DIR=$build/image-release KOP_IMAGE_INSTALL=0 \
  KOP_IMAGE_OUT=$work/kop.oci.tar bash "$root/scripts/image.sh" >"$work/image.log" 2>&1; then
  pass "scripts/image.sh: $(grep -o 'uncompressed [0-9]* bytes ([0-9.]* MiB)' "$work/image.log")," \
    "$(grep -o 'OCI archive [^:]*: [0-9]* bytes ([0-9.]* MiB' "$work/image.log" | sed 's/ [^ ]*: / /'))"
else
  fail "scripts/image.sh: $(tail -n 10 "$work/image.log")"
  finish
fi
version=$("$build/image-release/kop" --version | awk 'NR == 1 { print $2 }')
image=kop:$version
if tar -xOf "$work/kop.oci.tar" index.json 2>/dev/null | grep -q "\"org.opencontainers.image.ref.name\":\"$image\"" ||
  tar -xOf "$work/kop.oci.tar" index.json 2>/dev/null | grep -q "$version"; then
  pass "OCI archive holds $image"
else
  fail "OCI archive index: $(tar -xOf "$work/kop.oci.tar" index.json 2>&1 | head -c 300)"
fi

# The goal: under 15 MB uncompressed, which takes the minimal libcurl.
layer=$(sed -n 's/.*uncompressed \([0-9]*\) bytes.*/\1/p' "$work/image.log")
if grep -q 'WARNING' "$work/image.log"; then
  skip "size goal: image.sh used Debian's libcurl4 ($layer bytes): $(grep -m 1 WARNING "$work/image.log")"
elif [ -n "$layer" ] && [ "$layer" -lt 15000000 ]; then
  pass "size: $layer bytes uncompressed, under 15 MB (minimal libcurl linked statically)"
else
  fail "size: '$layer' bytes uncompressed, not under 15 MB: $(cat "$work/image.log")"
fi

# The release build has the hardening flags of every build (docs/style.md
# §8), and the minimal libcurl linked into it the same stack clash and CET
# flags (scripts/curl-minimal.sh). _FORTIFY_SOURCE is on in a release
# build whatever this build's KOP_FORTIFY_OFF says.
if hard=$(KOP_FORTIFY_OFF='' bash "$root/tests/scripts/test_hardening.sh" "$build/image-release/kop" 2>&1); then
  pass "release binary hardened: $(tail -n 1 <<<"$hard")"
else
  fail "release binary not hardened: $(grep '^FAIL' <<<"$hard" | tr '\n' ' ')"
fi

# ---- 2. contents and config ------------------------------------------------------
"${bh[@]}" inspect --type image "$image" >"$work/inspect.json"
cfg() { jq -c "$1" "$work/inspect.json"; }
if [ "$(cfg .OCIv1.config.User)" = '"65532:65532"' ] &&
  [ "$(cfg .OCIv1.config.Entrypoint)" = '["/usr/local/bin/kop"]' ] &&
  [ "$(cfg '.OCIv1.config.Cmd // []')" = '[]' ] &&
  [ "$(cfg '.OCIv1.rootfs.diff_ids | length')" = 1 ]; then
  pass "config: user 65532:65532, entrypoint /usr/local/bin/kop, no cmd, one layer"
else
  fail "config: $(cfg .OCIv1.config) layers $(cfg '.OCIv1.rootfs.diff_ids | length')"
fi

ctr=$("${bh[@]}" from "$image")
mnt=$("${bh[@]}" mount "$ctr")
(cd "$mnt" && find . -mindepth 1 \( -type f -o -type l \) | sed 's|^\.||' | sort) >"$work/files"
libdir=$(dirname "$(readlink -f "$mnt/lib64/ld-linux-x86-64.so.2" 2>/dev/null || true)")
libdir=${libdir#"$mnt"}
strip --strip-all -o "$work/kop.release" "$build/image-release/kop"
{
  echo /usr/local/bin/kop
  echo /etc/nsswitch.conf
  echo /usr/share/doc/kop/LICENSE
  echo /lib64/ld-linux-x86-64.so.2
  echo "$libdir/ld-linux-x86-64.so.2"
  ldd "$work/kop.release" | awk -v d="$libdir" '$2 == "=>" { print d "/" $1 }'
} | sort -u >"$work/want"
grep -v '^/usr/share/doc/[^/]*/copyright$' "$work/files" >"$work/have" || true
if diff -u "$work/want" "$work/have" >"$work/files.diff"; then
  pass "image files: the binary, $(grep -c '\.so' "$work/want") libraries and the loader (ldd of the release binary), nsswitch.conf, $(grep -c /copyright "$work/files") copyright files"
else
  fail "image files differ from the expected set: $(cat "$work/files.diff")"
fi
if cmp -s "$work/kop.release" "$mnt/usr/local/bin/kop"; then
  pass "the image's kop is the stripped release binary"
else
  fail "the image's kop is not the stripped release binary"
fi
# libcurl linked statically: its license comes with it.
if ! grep -q WARNING "$work/image.log"; then
  if ! grep -q 'libcurl\.so' "$work/want" && grep -qx /usr/share/doc/curl/copyright "$work/files" &&
    grep -q 'curl' "$mnt/usr/share/doc/curl/copyright"; then
    pass "libcurl linked statically (no libcurl.so loaded), /usr/share/doc/curl/copyright in the image"
  else
    fail "static libcurl: $(grep libcurl "$work/want" || echo 'no libcurl.so'), $(grep /curl/ "$work/files" || echo 'no curl copyright')"
  fi
fi
bad=$(grep -E '/(sh|bash|dash|busybox|apt|apt-get|dpkg|ls)$|/bin/' "$work/files" | grep -v '^/usr/local/bin/kop$' || true)
if [ -z "$bad" ] && [ ! -e "$mnt/etc/ssl" ] && [ ! -e "$mnt/var/lib/dpkg" ]; then
  pass "no shell, no package manager, no CA bundle"
else
  fail "unexpected files: $bad $(ls -d "$mnt/etc/ssl" "$mnt/var/lib/dpkg" 2>/dev/null)"
fi
# Every library comes with its package's copyright file.
missing=
while read -r lib; do
  pkg=$(dpkg-query -S "$(readlink -f "/${lib#"$libdir"/}")" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  [ -z "$pkg" ] && pkg=$(dpkg-query -S "$libdir/${lib#"$libdir"/}" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  [ -z "$pkg" ] && pkg=$(dpkg-query -S "/lib/${libdir#/usr/lib/}/${lib#"$libdir"/}" 2>/dev/null | head -n 1 | cut -d: -f1) || true
  if [ -z "$pkg" ] || ! grep -qx "/usr/share/doc/$pkg/copyright" "$work/files"; then
    missing+=" $lib(${pkg:-?})"
  fi
done < <(grep '\.so' "$work/want" | grep -v '^/lib64/')
if [ -z "$missing" ]; then
  pass "every library's Debian package has its copyright file in the image"
else
  fail "copyright files missing for:$missing"
fi
syms=$(nm -D "$mnt$libdir/libc.so.6" 2>/dev/null || true)
if grep -qx 'hosts: files dns' "$mnt/etc/nsswitch.conf" &&
  grep -q '_nss_dns_gethostbyname4_r' <<<"$syms" &&
  grep -q '_nss_files_gethostbyname4_r' <<<"$syms"; then
  pass "name resolution: nsswitch.conf 'hosts: files dns', both modules built into libc.so.6"
else
  fail "name resolution: nsswitch.conf or libc's NSS modules"
fi

# The Dockerfile's runtime stage: the same root filesystem and config.
df=$root/Dockerfile
runtime=$(sed -n '/^FROM scratch/,$p' "$df")
if [ -n "$runtime" ] && [ "$(grep -c '^FROM ' <<<"$runtime")" = 1 ] &&
  grep -q 'scripts/image-build.sh build-docker /kop' "$df" &&
  grep -q 'scripts/image-rootfs.sh /kop /rootfs build-docker/image-doc' "$df" &&
  [ "$(grep -E '^(COPY|ADD|RUN) ' <<<"$runtime")" = "COPY --from=builder /rootfs/ /" ] &&
  grep -qx 'USER 65532:65532' <<<"$runtime" &&
  grep -qx 'ENTRYPOINT \["/usr/local/bin/kop"\]' <<<"$runtime"; then
  pass "Dockerfile: runtime stage FROM scratch with scripts/image-build.sh's binary and scripts/image-rootfs.sh's files, user 65532, entrypoint kop"
else
  fail "Dockerfile: runtime stage is not the image.sh layout"
fi

# ---- 3. kop runs from the image against kubesim ------------------------------------
# Before the real run, one `kop --version` with the same mounts: buildah
# creates the mount points and /etc/hosts etc. in the root filesystem; after
# it, the file listing must not change.
bash "$root/scripts/gen-certs.sh" "$work/gen" >/dev/null 2>&1 || {
  fail "gen-certs.sh"
  finish
}
token=image-$(od -An -N8 -tx1 /dev/urandom | tr -d ' \n')
"$kubesim" --listen 127.0.0.1:0 --kubeconfig-out "$work/kubeconfig" --ca-out "$work/kubesim-ca.pem" \
  --token "$token" >"$work/kubesim.log" 2>&1 &
pids+=($!)
wait_for "$work/kubesim.log" '^https://' || {
  fail "kubesim did not start: $(tail -n 5 "$work/kubesim.log")"
  finish
}
url=$(head -n 1 "$work/kubesim.log")
kport=${url##*:}
export KUBECONFIG=$work/kubeconfig

# The Secret and the projected service account volume as the kubelet mounts
# them: root-owned, group 65532 (fsGroup), mode 0440, read-only.
mkdir -p "$work/certs" "$work/sa"
cp "$work/gen/tls.crt" "$work/gen/tls.key" "$work/certs/"
cp "$work/kubesim-ca.pem" "$work/sa/ca.crt"
printf '%s' "$token" >"$work/sa/token"
printf 'kop-system' >"$work/sa/namespace"
chown -R 0:65532 "$work/certs" "$work/sa"
chmod 0750 "$work/certs" "$work/sa"
chmod 0440 "$work/certs"/* "$work/sa"/*

run_opts=(--isolation chroot --user 65532:65532
  -v "$work/certs:/tmp/k8s-webhook-server/serving-certs:ro"
  -v "$work/sa:/var/run/secrets/kubernetes.io/serviceaccount:ro"
  -e KUBERNETES_SERVICE_HOST=localhost -e "KUBERNETES_SERVICE_PORT=$kport"
  -e POD_NAMESPACE=kop-system -e POD_NAME=kop-image-test)
"${bh[@]}" umount "$ctr" >/dev/null
if out=$("${bh[@]}" run "${run_opts[@]}" "$ctr" -- /usr/local/bin/kop --version 2>&1) &&
  [ "$(head -n 1 <<<"$out")" = "kop $version" ]; then
  pass "buildah run --isolation chroot --user 65532:65532 kop --version: $(paste -sd ';' <<<"$out")"
  # One TLS library: the webhook port's and the static libcurl's backend.
  if grep -q '^tls: Mbed TLS 3\.6\.' <<<"$out" && grep -q '^api client: libcurl .*(mbedTLS/3\.6\.' <<<"$out"; then
    pass "the image runs on mbedTLS 3.6 alone (webhook port and libcurl)"
  else
    fail "the image's TLS libraries: $out"
  fi
else
  if grep -qi 'shared librar\|ld-linux\|exec format\|no such file' <<<"$out"; then
    fail "kop does not start in the image: $out"
    finish
  fi
  echo "image: buildah cannot run containers here, skipping: $out"
  exit 77
fi
mnt=$("${bh[@]}" mount "$ctr")
# Directories without their mtime: buildah itself touches /run on each run.
snapshot() { (cd "$mnt" && find . \( -type d -printf '%p %y %m\n' \) -o -printf '%p %y %s %m %T@\n' | sort); }
snapshot >"$work/before"

ca=$(base64 -w0 "$work/gen/ca.crt")
sed "s|^        service:|        caBundle: $ca\n        service:|" "$root/manifests/base/crd.yaml" >"$work/crd.yaml"
sed "s|^      service:|      caBundle: $ca\n      service:|" "$root/manifests/base/webhook.yaml" >"$work/webhook.yaml"
if k apply -f "$root/manifests/base/namespace.yaml" -f "$work/crd.yaml" -f "$work/webhook.yaml" \
  >"$work/apply.log" 2>&1; then
  pass "kubesim: namespace, CRD and ValidatingWebhookConfiguration applied (caBundle = the test CA)"
else
  fail "kubesim: apply: $(cat "$work/apply.log")"
fi

# The Deployment's arguments, with kernel-chosen ports on loopback.
"${bh[@]}" run "${run_opts[@]}" "$ctr" -- /usr/local/bin/kop \
  --leader-elect --cert-dir=/tmp/k8s-webhook-server/serving-certs \
  --webhook-host 127.0.0.1 --webhook-port 0 \
  --metrics-bind-address 127.0.0.1:0 --health-probe-bind-address 127.0.0.1:0 \
  >"$work/kop.log" 2>&1 &
bpid=$!
pids+=($bpid)
if ! wait_for "$work/kop.log" '"msg":"serving webhook"' 300; then
  fail "kop in the image did not start: $(tail -n 10 "$work/kop.log")"
  finish
fi
wport=$(log_port "$work/kop.log" "serving webhook")
hport=$(log_port "$work/kop.log" "serving health probes")
mport=$(log_port "$work/kop.log" "serving metrics")
pass "kop in the image serves: webhook :$wport (TLS), probes :$hport, metrics :$mport"

mapping="{\"namespace\":\"kop-system\",\"name\":\"kop-webhook-service\",\"target\":\"127.0.0.1:$wport\"}"
curl -sS --fail --cacert "$work/kubesim-ca.pem" -H "Authorization: Bearer $token" \
  -H 'Content-Type: application/json' -X POST --data-binary "$mapping" \
  "$url/_kubesim/services" >/dev/null || fail "POST /_kubesim/services"

if got=$(poll 150 200 curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$hport/readyz"); then
  pass "/readyz 200 (certificate from the read-only cert dir, informers synced through in-cluster config)"
else
  fail "/readyz: $got: $(curl -s "http://127.0.0.1:$hport/readyz?verbose" || true)"
fi
hello=$(curl -sS --cacert "$work/gen/ca.crt" --resolve "localhost:$wport:127.0.0.1" \
  -H 'Content-Type: application/json' -d '{}' "https://localhost:$wport/convert" -o /dev/null \
  -w '%{http_code} %{ssl_verify_result}' 2>&1 || true)
if [[ "$hello" == "400 0" || "$hello" == "422 0" ]]; then
  pass "webhook TLS: the serving certificate verifies against the CA ($hello for an empty review)"
else
  fail "webhook TLS: $hello"
fi

if k apply -f "$root/manifests/samples/myresource.yaml" >"$work/sample.log" 2>&1; then
  pass "seed MyResource admitted by kop's validating webhook (from the image)"
else
  fail "seed MyResource: $(cat "$work/sample.log")"
fi
if k get myresources.v2.mygroup.example.com example-resource -o json >"$work/v2.json" 2>&1 &&
  grep -q '"apiVersion": "mygroup.example.com/v2"' "$work/v2.json"; then
  pass "seed read as v2 through kop's conversion webhook"
else
  fail "seed as v2: $(head -c 300 "$work/v2.json")"
fi
if got=$(poll 150 "True 3" k get myresources.v1.mygroup.example.com example-resource \
  -o jsonpath='{.status.conditions[?(@.type=="Available")].status} {.status.readyReplicas}'); then
  pass "seed reconciled: Deployment and Service created, status Available with 3 ready replicas"
else
  fail "seed not reconciled: '$got'; $(grep -c '"level":"error"' "$work/kop.log") error lines in kop's log"
fi
if k get deployment example-resource -o jsonpath='{.metadata.ownerReferences[0].kind}' 2>/dev/null |
  grep -qx MyResource && k get service example-resource -o name >/dev/null 2>&1; then
  pass "children carry the MyResource ownerReference"
else
  fail "children: $(k get deployment,service 2>&1 | head -n 5)"
fi
leader_status() {
  curl -s "http://127.0.0.1:$mport/metrics" | sed -n 's/^leader_election_master_status{name="kop-leader"} //p'
}
if poll 50 1 leader_status >/dev/null; then
  pass "leader (Lease in kop-system, from the service account namespace file)"
else
  fail "leader status: $(curl -s "http://127.0.0.1:$mport/metrics" | grep "^leader_election" || true)"
fi

# SIGTERM to kop itself (PID 1 of the container in a cluster): buildah's
# child process named kop.
kpid=
for _ in $(seq 50); do
  kpid=$(ps -e -o pid=,ppid=,comm= | awk -v b="$bpid" '
    { parent[$1] = $2; comm[$1] = $3 }
    END { for (p in comm) if (comm[p] == "kop") { q = p; while (q in parent && q != b && q > 1) q = parent[q]; if (q == b) print p } }' |
    head -n 1)
  [ -n "$kpid" ] && break
  sleep 0.1
done
if [ -z "$kpid" ]; then
  fail "cannot find kop's pid below buildah ($bpid)"
else
  kill -TERM "$kpid"
  rc=0
  wait "$bpid" || rc=$?
  pids=("${pids[@]/$bpid/}")
  if [ "$rc" -eq 0 ] && grep -q '"msg":"stopped"' "$work/kop.log"; then
    pass "SIGTERM: kop exits 0 after a graceful shutdown"
  else
    fail "SIGTERM: exit $rc; $(tail -n 3 "$work/kop.log")"
  fi
fi
if grep -q '"level":"error"' "$work/kop.log"; then
  fail "kop logged errors: $(grep '"level":"error"' "$work/kop.log" | head -n 3)"
else
  pass "no error lines in kop's log"
fi

snapshot >"$work/after"
if diff -u "$work/before" "$work/after" >"$work/fs.diff"; then
  pass "nothing written in the image's root filesystem (only the read-only mounts were used)"
else
  fail "files changed in the image's root filesystem: $(grep '^[-+]\.' "$work/fs.diff" | head -n 10)"
fi

finish
