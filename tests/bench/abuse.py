#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Legitimate load and attacks for scripts/bench-abuse.sh (stdlib only).

Every client here connects to 127.0.0.1 only (attackers use other loopback
source addresses, 127.0.0.2-5, as tenants' pods have other addresses than
the kubelet and the apiserver), opens a bounded number of connections and
stops by itself after --seconds.

  abuse.py load   --port P --health H --ca CA --seconds S   -> one JSON line
  abuse.py ATTACK --port P --health H --ca CA --seconds S
ATTACK: slowloris-webhook slowloris-health slow-body half-open
        handshake-flood max-bodies after-413 hostile-json
(renegotiation attempts are made with openssl s_client by the script.)
"""
import argparse
import http.client
import json
import os
import socket
import ssl
import threading
import time

ATTACKERS = ["127.0.0.2", "127.0.0.3", "127.0.0.4", "127.0.0.5"]


def review(n, uid="load"):
    obj = (
        '{"apiVersion":"mygroup.example.com/v1","kind":"MyResource","metadata":{"name":"res-%d",'
        '"namespace":"default","uid":"6f1c2f7e-0000-4000-8000-000000000001","resourceVersion":"1",'
        '"generation":1,"labels":{"app":"bench"}},"spec":{"replicas":3,'
        '"image":"registry.example.com:5000/team/app:1.0","port":8080,"serviceType":"ClusterIP"}}'
    )
    objs = ",".join(obj % i for i in range(n))
    return (
        '{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"%s",'
        '"desiredAPIVersion":"mygroup.example.com/v2","objects":[%s]}}' % (uid, objs)
    ).encode()


def admission(extra_spec=""):
    return (
        '{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{'
        '"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","kind":{"group":"mygroup.example.com",'
        '"version":"v1","kind":"MyResource"},"resource":{"group":"mygroup.example.com",'
        '"version":"v1","resource":"myresources"},"name":"res","namespace":"default",'
        '"operation":"CREATE","userInfo":{"username":"admin"},"object":{'
        '"apiVersion":"mygroup.example.com/v1","kind":"MyResource","metadata":{"name":"res",'
        '"namespace":"default"},"spec":{"replicas":3,"image":"nginx:1.25","port":8080%s}}}}'
        % extra_spec
    ).encode()


def tls_ctx(ca):
    ctx = ssl.create_default_context(cafile=ca)
    ctx.check_hostname = False
    return ctx


def raw_ctx():
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE
    return ctx


def pct(xs, p):
    if not xs:
        return 0.0
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(len(xs) * p))]


# ---- legitimate load ---------------------------------------------------------


def load(a):
    conv, adm = review(1), admission()
    lat, lock = [], threading.Lock()
    stats = {"sent": 0, "failed": 0, "probes": 0, "probe_failed": 0, "probe_max_ms": 0.0}
    stop = time.monotonic() + a.seconds
    period = 8 / a.rate  # each of the 8 connections

    def worker(i):
        # connected (and warmed up) before the measured requests, as the
        # apiserver's pooled connections are
        conn = http.client.HTTPSConnection("127.0.0.1", a.port, context=tls_ctx(a.ca), timeout=10)
        conn.request("POST", "/convert", conv, {"Content-Type": "application/json"})
        conn.getresponse().read()
        n = 0
        nxt = time.monotonic() + period * i / 8
        while True:
            now = time.monotonic()
            if now >= stop:
                break
            if nxt > now:
                time.sleep(nxt - now)
            nxt += period
            path, body = ("/convert?timeout=10s", conv) if n % 2 == 0 else (
                "/validate-mygroup-example-com-myresource?timeout=10s", adm)
            n += 1
            t0 = time.monotonic()
            ok = False
            try:
                if conn is None:
                    conn = http.client.HTTPSConnection("127.0.0.1", a.port, context=tls_ctx(a.ca),
                                                       timeout=10)
                conn.request("POST", path, body, {"Content-Type": "application/json"})
                r = conn.getresponse()
                r.read()
                ok = r.status == 200
            except (OSError, http.client.HTTPException):
                conn = None
            dt = (time.monotonic() - t0) * 1000
            with lock:
                stats["sent"] += 1
                if ok:
                    lat.append(dt)
                else:
                    stats["failed"] += 1

    def prober():
        nxt = time.monotonic()
        while nxt < stop:
            time.sleep(max(0, nxt - time.monotonic()))
            nxt += 1.0
            t0 = time.monotonic()
            ok = False
            try:  # the kubelet: a new connection per probe, 1 s timeout
                c = http.client.HTTPConnection("127.0.0.1", a.health, timeout=1)
                c.request("GET", "/healthz")
                r = c.getresponse()
                r.read()
                ok = r.status == 200
                c.close()
            except (OSError, http.client.HTTPException):
                pass
            dt = (time.monotonic() - t0) * 1000
            with lock:
                stats["probes"] += 1
                stats["probe_max_ms"] = max(stats["probe_max_ms"], dt)
                if not ok or dt > 1000:
                    stats["probe_failed"] += 1

    ts = [threading.Thread(target=worker, args=(i,)) for i in range(8)]
    ts.append(threading.Thread(target=prober))
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    stats["p50_ms"] = pct(lat, 0.50)
    stats["p99_ms"] = pct(lat, 0.99)
    print(json.dumps(stats))


# ---- attacks -------------------------------------------------------------------


def run_for(seconds, fn, n, *args):
    """Run fn(i, stop, *args) in n threads until the deadline."""
    stop = time.monotonic() + seconds
    ts = [threading.Thread(target=fn, args=(i, stop) + args, daemon=True) for i in range(n)]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=max(0.1, stop - time.monotonic() + 5))


def connect(src, port, timeout=5):
    s = socket.create_connection(("127.0.0.1", port), timeout=timeout, source_address=(src, 0))
    return s


def slowloris(a, tls, port, conns):
    """conns connections that send a request head a line at a time, one line
    every 2 s per connection; dropped ones are reopened (at most one per
    connection slot every 0.2 s)."""
    ctx = raw_ctx()
    per = conns // 50

    def slot(i, stop):
        socks = []
        src = ATTACKERS[i % len(ATTACKERS)]
        while time.monotonic() < stop:
            while len(socks) < per and time.monotonic() < stop:
                try:
                    s = connect(src, port)
                    if tls:
                        s = ctx.wrap_socket(s)
                    s.settimeout(0.5)
                    s.sendall(b"POST /convert HTTP/1.1\r\nHost: x\r\n")
                    socks.append(s)
                except OSError:
                    time.sleep(0.2)
                    break
            for s in list(socks):
                try:
                    s.sendall(b"X-a: b\r\n")
                except OSError:
                    socks.remove(s)
                    s.close()
            time.sleep(min(2.0, max(0, stop - time.monotonic())))
        for s in socks:
            s.close()

    run_for(a.seconds, slot, 50)


def slow_body(a):
    ctx = raw_ctx()

    def one(i, stop):
        while time.monotonic() < stop:
            try:
                s = ctx.wrap_socket(connect(ATTACKERS[i % 4], a.port))
                s.sendall(b"POST /validate-mygroup-example-com-myresource HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 7000000\r\n\r\n")
                while time.monotonic() < stop:
                    s.sendall(b" " * 100)
                    time.sleep(1)
            except OSError:
                time.sleep(0.2)

    run_for(a.seconds, one, 64)


def half_open(a):
    hello = bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01, 0x00, 0x01, 0xfc, 0x03, 0x03])

    def slot(i, stop):
        socks = []
        while time.monotonic() < stop:
            while len(socks) < 20 and time.monotonic() < stop:
                try:
                    s = connect(ATTACKERS[i % 4], a.port)
                    s.sendall(hello)
                    socks.append(s)
                except OSError:
                    time.sleep(0.2)
                    break
            for s in list(socks):  # reopen the ones the server closed
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        socks.remove(s)
                        s.close()
                except BlockingIOError:
                    pass
                except OSError:
                    socks.remove(s)
                    s.close()
            time.sleep(0.2)
        for s in socks:
            s.close()

    run_for(a.seconds, slot, 50)  # 50 x 20 = 1,000 connections


def handshake_flood(a):
    ctx = raw_ctx()
    ctx.options |= ssl.OP_NO_TICKET  # a full handshake every time

    def one(i, stop):
        while time.monotonic() < stop:
            try:
                s = ctx.wrap_socket(connect(ATTACKERS[i], a.port))
                s.close()
            except OSError:
                time.sleep(0.01)

    run_for(a.seconds, one, 4)


def max_bodies(a):
    obj = review(1)[len(b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview",'
                        b'"request":{"uid":"load","desiredAPIVersion":"mygroup.example.com/v2",'
                        b'"objects":['):-3]
    head = (b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{'
            b'"uid":"big","desiredAPIVersion":"mygroup.example.com/v2","objects":[')
    limit = 64 * 1024 * 1024
    n = (limit - len(head) - 3) // (len(obj) + 1)
    body = head + b",".join([obj] * n) + b"]}}"
    ctx = raw_ctx()
    req = (b"POST /convert HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
           b"Content-Length: %d\r\n\r\n" % len(body))

    def one(i, stop):
        while time.monotonic() < stop:
            try:
                s = ctx.wrap_socket(connect(ATTACKERS[i % 4], a.port, timeout=30))
                s.sendall(req)
                mv = memoryview(body)
                for off in range(0, len(body), 1 << 20):
                    if time.monotonic() >= stop:
                        break
                    s.sendall(mv[off:off + (1 << 20)])
                s.settimeout(max(0.1, stop - time.monotonic()))
                while s.recv(1 << 20):
                    pass
                s.close()
            except OSError:
                time.sleep(0.05)

    run_for(a.seconds, one, 8)


def after_413(a):
    ctx = raw_ctx()
    chunk = b"x" * (1 << 16)

    def one(i, stop):
        while time.monotonic() < stop:
            try:
                s = ctx.wrap_socket(connect(ATTACKERS[0], a.port))
                s.sendall(b"POST /validate-mygroup-example-com-myresource HTTP/1.1\r\nHost: x\r\n"
                          b"Content-Type: application/json\r\nContent-Length: 1073741824\r\n\r\n")
                while time.monotonic() < stop:
                    s.sendall(chunk)
            except OSError:
                time.sleep(0.01)

    run_for(a.seconds, one, 1)


def hostile_json(a):
    deep = b'{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":' + (
        b"[" * 100000) + (b"]" * 100000) + b"}"
    numbers = admission(',"x":[' + ",".join(["123456789.123e10"] * 400000) + "]")
    numbers = numbers[:7000000] if len(numbers) > 7000000 else numbers
    ports = ",".join('{"name":"p%d","port":%d}' % (i, 1 + i % 65535) for i in range(130000))
    manyports = review(1).replace(b'"port":8080', b'"ports":[' + ports.encode() + b"]")
    bodies = [("/convert", deep), ("/validate-mygroup-example-com-myresource", numbers),
              ("/convert", manyports)]

    def one(i, stop):
        ctx = raw_ctx()
        k = i
        while time.monotonic() < stop:
            path, body = bodies[k % len(bodies)]
            k += 1
            try:
                c = http.client.HTTPSConnection("127.0.0.1", a.port, context=ctx, timeout=10,
                                                source_address=(ATTACKERS[i % 4], 0))
                c.request("POST", path, body, {"Content-Type": "application/json"})
                c.getresponse().read()
                c.close()
            except (OSError, http.client.HTTPException):
                time.sleep(0.01)

    run_for(a.seconds, one, 2)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode")
    p.add_argument("--port", type=int, required=True)
    p.add_argument("--health", type=int, required=True)
    p.add_argument("--ca", required=True)
    p.add_argument("--seconds", type=float, default=10)
    p.add_argument("--rate", type=float, default=100)
    a = p.parse_args()
    a.seconds = min(a.seconds, 60)  # bounded whatever the caller asks
    modes = {
        "load": lambda: load(a),
        "slowloris-webhook": lambda: slowloris(a, True, a.port, 1000),
        "slowloris-health": lambda: slowloris(a, False, a.health, 1000),
        "slow-body": lambda: slow_body(a),
        "half-open": lambda: half_open(a),
        "handshake-flood": lambda: handshake_flood(a),
        "max-bodies": lambda: max_bodies(a),
        "after-413": lambda: after_413(a),
        "hostile-json": lambda: hostile_json(a),
    }
    modes[a.mode]()
    os._exit(0)  # daemon threads still blocked in a socket call end here


if __name__ == "__main__":
    main()
