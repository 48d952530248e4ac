#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Load, kubelet and report for scripts/bench-rollout.sh (stdlib only).

  rollout.py load    --url URL --ca CA --token T --clients N --rate R
                     --out DIR --stop FILE
      N client processes, each with one keep-alive HTTPS connection to the
      API server, together sending R requests/s on a fixed schedule until
      FILE exists. Each client cycles: v1 CREATE of a new MyResource, v2
      GET of one of its objects and a v2 UPDATE (PUT) of it, 9 times, and
      one more v2 GET (20 requests).
      A 409 Conflict on an UPDATE (the reconciler wrote the status between
      the GET and the PUT) is retried from a fresh GET, as client-go's
      retry.RetryOnConflict does, and counted apart. One JSON line per
      request to DIR/client-I.jsonl: start time, op, HTTP code, reason.

  rollout.py kubelet --url URL --ca CA --token T --service NS/NAME
                     --pods DIR --period S --failure-threshold N
      The kubelet's readiness prober and the EndpointSlice controller for
      one Service. DIR/pods/NAME holds "PID HEALTH_PORT WEBHOOK_ADDR
      TERMINATING" (the script writes it). Every S seconds each pod's
      /readyz is probed (timeout 1 s); a pod turns ready after 1 success
      and not ready after N failures in a row (successThreshold 1,
      failureThreshold N); a pod whose process is gone is not ready at
      once (the kubelet sees the container exit); a terminating pod is
      removed at once (its deletionTimestamp). The ready, non-terminating
      pods are POSTed to /_kubesim/endpoints whenever the set changes.
      DIR/ready/NAME exists while NAME is ready; DIR/kubelet.log has the
      events with their times.

  rollout.py report  --out DIR --phases FILE ...
      The summary (see scripts/bench-rollout.sh).
"""
import argparse
import collections
import http.client
import json
import os
import re
import signal
import ssl
import sys
import time
import urllib.parse

GROUP = "/apis/mygroup.example.com"
NS = "default"


def tls_ctx(ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    return ctx


class Api:
    """One keep-alive HTTPS connection to the API server; reconnects after
    a transport error (as client-go's transport would)."""

    def __init__(self, url, ca, token, timeout=15):
        u = urllib.parse.urlsplit(url)
        self.host, self.port = u.hostname, u.port
        self.ctx = tls_ctx(ca)
        self.token = token
        self.timeout = timeout
        self.conn = None

    def call(self, method, path, body=None):
        """(code, parsed body or None, reason); code 0 on a transport error."""
        if self.conn is None:
            self.conn = http.client.HTTPSConnection(
                self.host, self.port, context=self.ctx, timeout=self.timeout
            )
        headers = {"Authorization": "Bearer " + self.token, "Accept": "application/json"}
        data = None
        if body is not None:
            data = json.dumps(body).encode()
            headers["Content-Type"] = "application/json"
        try:
            self.conn.request(method, path, body=data, headers=headers)
            r = self.conn.getresponse()
            raw = r.read()
            code = r.status
        except (OSError, http.client.HTTPException) as e:
            self.conn.close()
            self.conn = None
            return 0, None, "client: " + type(e).__name__
        try:
            doc = json.loads(raw) if raw else None
        except ValueError:
            doc = None
        reason = ""
        if code >= 400:
            msg = doc.get("message", "") if isinstance(doc, dict) else raw[:200].decode("latin-1")
            reason = "%d %s" % (code, normalize(msg))
        return code, doc, reason


def normalize(msg):
    """A failure message with the names of objects taken out, so that equal
    failures group (addresses of endpoints are kept: they tell which
    replica the call went to)."""
    msg = re.sub(r'"c\d+-\d+"', '"NAME"', msg)
    msg = re.sub(r"\bc\d+-\d+\b", "NAME", msg)
    return msg[:300]


# ---- load ---------------------------------------------------------------------------------------


def v1_object(name, i):
    return {
        "apiVersion": "mygroup.example.com/v1",
        "kind": "MyResource",
        "metadata": {"name": name, "namespace": NS, "labels": {"bench": "rollout"}},
        "spec": {"replicas": 1 + i % 2, "image": "nginx:1.25.%d" % (i % 5), "port": 8080},
    }


def client(idx, args):
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    api = Api(args.url, args.ca, args.token)
    rate = args.rate / args.clients
    out = open(os.path.join(args.out, "client-%d.jsonl" % idx), "w", buffering=1 << 16)
    names = []
    created = 0
    step = 0
    t0 = time.time()
    k = 0
    latest = {}  # name -> the object of the latest GET
    pair = -1

    def record(start, op, code, reason):
        out.write(
            json.dumps(
                {"t": round(start, 4), "op": op, "code": code, "reason": reason,
                 "ms": round((time.time() - start) * 1000, 1)}
            )
            + "\n"
        )

    while not os.path.exists(args.stop):
        due = t0 + idx / args.rate + k / rate
        k += 1
        now = time.time()
        if due > now:
            time.sleep(due - now)
        kind = step % 20
        step += 1
        if kind == 0 or not names:
            name = "c%d-%05d" % (idx, created)
            start = time.time()
            code, _, reason = api.call(
                "POST", GROUP + "/v1/namespaces/%s/myresources" % NS, v1_object(name, created)
            )
            created += 1
            if code == 201 or code == 0 or code >= 500:
                names.append(name)  # after a lost answer it may exist all the same
            record(start, "create-v1", code, reason if code != 201 else "")
            continue
        if kind % 2 == 1:
            pair += 1
        name = names[pair % len(names)]
        path = GROUP + "/v2/namespaces/%s/myresources/%s" % (NS, name)
        if kind % 2 == 1:
            start = time.time()
            code, doc, reason = api.call("GET", path)
            latest[name] = doc if code == 200 else None
            record(start, "get-v2", code, reason if code != 200 else "")
            continue
        # UPDATE: PUT the object just read with an annotation changed (a
        # metadata-only change: no new generation, so the reconciler's
        # load stays the CREATEs'); on 409 GET it again and retry, at
        # most 5 times (retry.DefaultRetry).
        obj = latest.pop(name, None)
        for attempt in range(5):
            if obj is None:
                start = time.time()
                code, obj, reason = api.call("GET", path)
                record(start, "get-v2", code, reason if code != 200 else "")
                if code != 200:
                    break
            ann = obj.setdefault("metadata", {}).setdefault("annotations", {})
            ann["bench.example.com/seq"] = str(step)
            start = time.time()
            code, _, reason = api.call("PUT", path, obj)
            obj = None
            if code == 409:
                record(start, "update-v2", code, "conflict")
                continue
            record(start, "update-v2", code, reason if code != 200 else "")
            break
    out.close()


def cmd_load(args):
    pids = []
    for i in range(args.clients):
        pid = os.fork()
        if pid == 0:
            try:
                client(i, args)
            finally:
                os._exit(0)
        pids.append(pid)
    for p in pids:
        os.waitpid(p, 0)


# ---- kubelet + EndpointSlice controller --------------------------------------------------------


def probe(port):
    c = http.client.HTTPConnection("127.0.0.1", int(port), timeout=1)
    try:
        c.request("GET", "/readyz")
        r = c.getresponse()
        r.read()
        return 200 <= r.status < 400
    except (OSError, http.client.HTTPException):
        return False
    finally:
        c.close()


def alive(pid):
    try:
        with open("/proc/%s/stat" % pid) as f:
            return f.read().split(") ")[-1][:1] not in ("Z", "X")
    except OSError:
        return False


def cmd_kubelet(args):
    api = Api(args.url, args.ca, args.token)
    pods_dir = os.path.join(args.pods, "pods")
    ready_dir = os.path.join(args.pods, "ready")
    os.makedirs(ready_dir, exist_ok=True)
    log = open(os.path.join(args.pods, "kubelet.log"), "a", buffering=1)
    state = {}  # name -> {"pid", "ready", "fails", "next"}
    posted = None
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    while not stop:
        now = time.time()
        pods = {}
        for name in sorted(os.listdir(pods_dir)):
            try:
                with open(os.path.join(pods_dir, name)) as f:
                    pid, health, addr, term = f.read().split()
            except (OSError, ValueError):
                continue
            pods[name] = (pid, health, addr, term == "1")
        for name in list(state):
            if name not in pods:
                del state[name]
        for name, (pid, health, addr, term) in pods.items():
            s = state.get(name)
            if s is None or s["pid"] != pid:  # a new container: initialDelaySeconds 1
                s = state[name] = {"pid": pid, "ready": False, "fails": 0, "next": now + 1.0}
                log.write("%.3f %s container %s started\n" % (now, name, pid))
            if s["ready"] and not alive(pid):
                s["ready"] = False
                log.write("%.3f %s not ready: container exited\n" % (now, name))
            if now >= s["next"] and alive(pid):
                s["next"] = now + args.period
                ok = probe(health)
                if ok:
                    s["fails"] = 0
                    if not s["ready"]:
                        s["ready"] = True
                        log.write("%.3f %s ready\n" % (time.time(), name))
                else:
                    s["fails"] += 1
                    if s["ready"] and s["fails"] >= args.failure_threshold:
                        s["ready"] = False
                        log.write("%.3f %s not ready: %d probes failed\n"
                                  % (time.time(), name, s["fails"]))
            flag = os.path.join(ready_dir, name)
            if s["ready"] and not os.path.exists(flag):
                open(flag, "w").close()
            elif not s["ready"] and os.path.exists(flag):
                os.unlink(flag)
        want = sorted(addr for name, (pid, health, addr, term) in pods.items()
                      if state[name]["ready"] and not term)
        if want != posted:
            body = {"service": args.service,
                    "endpoints": [{"address": a, "ready": True} for a in want]}
            code, _, reason = api.call("POST", "/_kubesim/endpoints", body)
            if code == 200:
                posted = want
                log.write("%.3f endpoints %s\n" % (time.time(), " ".join(want) or "(none)"))
            else:
                log.write("%.3f POST /_kubesim/endpoints: %d %s\n" % (time.time(), code, reason))
        time.sleep(0.1)


# ---- report -------------------------------------------------------------------------------------


def cmd_report(args):
    phases = []  # (name, start, end)
    with open(args.phases) as f:
        for line in f:
            name, a, b = line.split()
            phases.append((name, float(a), float(b)))
    reqs = []
    for fn in sorted(os.listdir(args.out)):
        if fn.startswith("client-") and fn.endswith(".jsonl"):
            with open(os.path.join(args.out, fn)) as f:
                for line in f:
                    try:
                        reqs.append(json.loads(line))
                    except ValueError:
                        pass
    result = {}
    for name, a, b in phases:
        inside = [r for r in reqs if a <= r["t"] < b]
        sent = len(inside)
        conflicts = sum(1 for r in inside if r["code"] == 409)
        failed = [r for r in inside if r["code"] not in (200, 201, 409)]
        ops = collections.Counter(r["op"] for r in inside)
        reasons = collections.Counter(r["reason"] or str(r["code"]) for r in failed)
        lat = sorted(r["ms"] for r in inside)
        p99 = lat[int(len(lat) * 0.99)] if lat else 0
        result[name] = {
            "seconds": round(b - a, 1), "sent": sent, "failed": len(failed),
            "conflicts": conflicts, "ops": dict(ops), "reasons": dict(reasons),
            "p99_ms": p99, "rate": round(sent / (b - a), 1) if b > a else 0,
        }
    json.dump(result, sys.stdout, indent=1)
    print()


def main():
    p = argparse.ArgumentParser()
    sub = p.add_subparsers(dest="cmd", required=True)
    lo = sub.add_parser("load")
    ku = sub.add_parser("kubelet")
    for s in (lo, ku):
        s.add_argument("--url", required=True)
        s.add_argument("--ca", required=True)
        s.add_argument("--token", required=True)
    lo.add_argument("--clients", type=int, default=6)
    lo.add_argument("--rate", type=float, default=300)
    lo.add_argument("--out", required=True)
    lo.add_argument("--stop", required=True)
    ku.add_argument("--service", required=True)
    ku.add_argument("--pods", required=True)
    ku.add_argument("--period", type=float, default=1.0)
    ku.add_argument("--failure-threshold", type=int, default=3)
    re_ = sub.add_parser("report")
    re_.add_argument("--out", required=True)
    re_.add_argument("--phases", required=True)
    args = p.parse_args()
    {"load": cmd_load, "kubelet": cmd_kubelet, "report": cmd_report}[args.cmd](args)


if __name__ == "__main__":
    main()
