# SPDX-License-Identifier: Apache-2.0
#
# Starting kubesim and talking to it, for the demo and the benchmarks
# (sourced, not run). The caller builds kubesim and owns the scratch
# directory.
#
#   kubesim_start BIN DIR TOKEN [FLAG...]
#       starts BIN --listen 127.0.0.1:0 with DIR/kubeconfig (the kubeconfig
#       for clients), DIR/kubesim-ca.pem and DIR/kubesim.log, waits (10 s at
#       most) for it to print its URL; sets kubesim_pid, kubesim_url and
#       kubesim_token; returns non-zero (the log's tail on stderr) when it
#       does not start.
#   kubesim_api METHOD PATH [BODY]
#       a request to it with the token (JSON body), the answer on stdout.
#   kubesim_stop
#       SIGTERM, then wait.

kubesim_pid=
kubesim_url=
kubesim_token=
kubesim_dir=

kubesim_start() {
  local bin=$1 dir=$2
  kubesim_token=$3
  kubesim_dir=$dir
  shift 3
  "$bin" --listen 127.0.0.1:0 --kubeconfig-out "$dir/kubeconfig" \
    --ca-out "$dir/kubesim-ca.pem" --token "$kubesim_token" "$@" >"$dir/kubesim.log" 2>&1 &
  kubesim_pid=$!
  kubesim_url=
  for _ in $(seq 100); do
    # its first https:// line (a warning, such as CEL's, may come first)
    kubesim_url=$(grep -m 1 '^https://' "$dir/kubesim.log" 2>/dev/null || true)
    case $kubesim_url in https://*) return 0 ;; esac
    kill -0 "$kubesim_pid" 2>/dev/null || break
    sleep 0.1
  done
  echo "kubesim did not start:" >&2
  tail -n 5 "$dir/kubesim.log" >&2
  return 1
}

kubesim_api() {
  curl -sS --cacert "$kubesim_dir/kubesim-ca.pem" -H "Authorization: Bearer $kubesim_token" \
    -H "Content-Type: application/json" -X "$1" "$kubesim_url$2" ${3:+--data-binary "$3"}
}

kubesim_stop() {
  [ -n "$kubesim_pid" ] || return 0
  kill "$kubesim_pid" 2>/dev/null || true
  wait "$kubesim_pid" 2>/dev/null || true
  kubesim_pid=
}
