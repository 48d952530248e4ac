// SPDX-License-Identifier: Apache-2.0
//
// A CRD conversion webhook for MyResource written the way a Node.js
// operator does it: the https module, JSON.parse of the whole body, the
// objects converted as plain JS values, JSON.stringify of the answer.
// scripts/bench-peers.sh runs it next to kop and a Go peer with the same
// certificate and the same bodies.
//
//   node server.js CERT_DIR [HOST [PORT]]     (HOST 127.0.0.1, PORT 0)
//
// Serves POST /convert; prints "listening on PORT" once it accepts.
// Converts v1 -> v2 (docs/api.md §2.4, with the mygroup.example.com/v2-extras
// annotation restored); members it does not know are carried over in
// place; an object already in the desired version is returned unchanged;
// v2 -> v1 is not implemented here and answers Failure.
'use strict';

const fs = require('fs');
const https = require('https');
const path = require('path');

const V1 = 'mygroup.example.com/v1';
const V2 = 'mygroup.example.com/v2';
const EXTRAS = 'mygroup.example.com/v2-extras';
const MAX_BODY = 64 * 1024 * 1024;

// ---- image references (docs/api.md §2.3) ---------------------------------

const TAG = /^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$/;
const DIGEST = /^[A-Za-z][A-Za-z0-9]*(?:[-_+.][A-Za-z][A-Za-z0-9]*)*:[0-9A-Fa-f]{32,}$/;

function splitImage(s) {
  let rest = s;
  let tag;
  let digest;
  const at = s.indexOf('@');
  if (at >= 0) {
    digest = s.slice(at + 1);
    if (!DIGEST.test(digest)) return { repository: s };
    rest = s.slice(0, at);
  }
  const from = rest.lastIndexOf('/') + 1;
  const colon = rest.indexOf(':', from) >= 0 ? rest.lastIndexOf(':') : -1;
  if (colon >= 0) {
    tag = rest.slice(colon + 1);
    if (!TAG.test(tag)) return { repository: s };
    rest = rest.slice(0, colon);
  }
  if (rest === '') return { repository: s };
  const img = { repository: rest };
  if (tag !== undefined) img.tag = tag;
  if (digest !== undefined) img.digest = digest;
  return img;
}

function joinImage(i) {
  if (i === null || typeof i !== 'object') return i;
  let s = typeof i.repository === 'string' ? i.repository : '';
  if (typeof i.tag === 'string') s += ':' + i.tag;
  if (typeof i.digest === 'string') s += '@' + i.digest;
  return s;
}

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

// ---- v1 -> v2 ------------------------------------------------------------

function specToV2(s, ex) {
  const out = {};
  for (const k of Object.keys(s)) {
    const v = s[k];
    switch (k) {
      case 'image':
        if (ex && 'image' in ex && joinImage(ex.image) === v) out.image = ex.image;
        else out.image = typeof v === 'string' ? splitImage(v) : v;
        break;
      case 'port':
        if (ex && Array.isArray(ex.ports) && isObject(ex.ports[0])) {
          ex.ports[0].port = v;
          out.ports = ex.ports;
        } else {
          out.ports = [{ name: 'http', port: v, protocol: 'TCP' }];
        }
        break;
      case 'serviceType':
        if (ex && isObject(ex.service)) {
          ex.service.type = v;
          out.service = ex.service;
        } else {
          out.service = { type: v };
        }
        break;
      default:
        out[k] = v;
    }
  }
  if (ex) {
    if (!('port' in s) && 'ports' in ex) {
      if (Array.isArray(ex.ports) && isObject(ex.ports[0])) delete ex.ports[0].port;
      out.ports = ex.ports;
    }
    if (!('serviceType' in s) && 'service' in ex) {
      if (isObject(ex.service)) delete ex.service.type;
      out.service = ex.service;
    }
    if ('paused' in ex) out.paused = ex.paused;
  }
  return out;
}

function statusToV2(s, ex) {
  const exr = ex && isObject(ex.status) ? ex.status.replicas : undefined;
  const has = 'replicas' in s || 'readyReplicas' in s;
  let rep;
  if (isObject(exr)) {
    rep = exr;
    delete rep.desired;
    delete rep.ready;
  } else if (exr !== undefined && !has) {
    rep = exr;
  } else if (has) {
    rep = {};
  }
  if (has && isObject(rep)) {
    if ('replicas' in s) rep.desired = s.replicas;
    if ('readyReplicas' in s) rep.ready = s.readyReplicas;
  }
  const out = {};
  for (const k of Object.keys(s)) {
    if (k === 'replicas' || k === 'readyReplicas') {
      if (!('replicas' in out) && rep !== undefined) out.replicas = rep;
    } else {
      out[k] = s[k];
    }
  }
  if (!has && rep !== undefined) out.replicas = rep;
  return out;
}

function toV2(obj) {
  const meta = obj.metadata;
  const ann = isObject(meta) && isObject(meta.annotations) ? meta.annotations : undefined;
  let ex;
  if (ann && typeof ann[EXTRAS] === 'string') {
    try {
      ex = JSON.parse(ann[EXTRAS]);
    } catch (e) {
      ex = undefined;
    }
    if (!isObject(ex)) ex = undefined;
  }
  const out = {};
  for (const k of Object.keys(obj)) {
    const v = obj[k];
    if (k === 'apiVersion') out.apiVersion = V2;
    else if (k === 'spec' && isObject(v)) out.spec = specToV2(v, ex);
    else if (k === 'status' && isObject(v)) out.status = statusToV2(v, ex);
    else out[k] = v;
  }
  if (ex) {
    delete ann[EXTRAS];
    if (Object.keys(ann).length === 0 && ex.emptyAnnotations !== true) delete meta.annotations;
  }
  return out;
}

function convert(obj, desired) {
  if (!isObject(obj) || obj.kind !== 'MyResource' || (obj.apiVersion !== V1 && obj.apiVersion !== V2)) {
    throw new Error(`unsupported object ${obj && obj.apiVersion}, Kind=${obj && obj.kind}`);
  }
  if (obj.apiVersion === desired) return obj;
  if (desired !== V2) throw new Error(`this peer converts ${V1} -> ${V2} only`);
  return toV2(obj);
}

function review(rv) {
  const req = rv.request;
  const resp = { uid: req.uid, result: { status: 'Success' } };
  try {
    const desired = req.desiredAPIVersion;
    if (desired !== V1 && desired !== V2) throw new Error(`unsupported desiredAPIVersion ${desired}`);
    const objs = Array.isArray(req.objects) ? req.objects : [];
    const converted = new Array(objs.length);
    for (let i = 0; i < objs.length; i++) converted[i] = convert(objs[i], desired);
    resp.convertedObjects = converted;
  } catch (e) {
    resp.result = { status: 'Failure', message: e.message };
  }
  return { apiVersion: rv.apiVersion, kind: 'ConversionReview', response: resp };
}

// ---- HTTP ----------------------------------------------------------------

function reply(res, code, body, type) {
  res.writeHead(code, { 'Content-Type': type, 'Content-Length': Buffer.byteLength(body) });
  res.end(body);
}

function handle(req, res) {
  if (req.url.split('?')[0] !== '/convert') return reply(res, 404, 'not found\n', 'text/plain');
  if (req.method !== 'POST') return reply(res, 405, 'POST only\n', 'text/plain');
  const chunks = [];
  let size = 0;
  let tooLarge = false;
  req.on('data', (c) => {
    size += c.length;
    if (size > MAX_BODY) tooLarge = true;
    else chunks.push(c);
  });
  req.on('end', () => {
    if (tooLarge) return reply(res, 413, 'request body too large\n', 'text/plain');
    let rv;
    try {
      rv = JSON.parse(Buffer.concat(chunks, size).toString('utf8'));
    } catch (e) {
      return reply(res, 400, `cannot decode ConversionReview: ${e.message}\n`, 'text/plain');
    }
    if (!isObject(rv) || rv.kind !== 'ConversionReview' || !isObject(rv.request) ||
        (rv.apiVersion !== 'apiextensions.k8s.io/v1' && rv.apiVersion !== 'apiextensions.k8s.io/v1beta1')) {
      return reply(res, 400, 'not a ConversionReview\n', 'text/plain');
    }
    reply(res, 200, JSON.stringify(review(rv)), 'application/json');
  });
}

const [certDir, host = '127.0.0.1', port = '0'] = process.argv.slice(2);
if (!certDir) {
  console.error('usage: node server.js CERT_DIR [HOST [PORT]]');
  process.exit(2);
}
const server = https.createServer({
  cert: fs.readFileSync(path.join(certDir, 'tls.crt')),
  key: fs.readFileSync(path.join(certDir, 'tls.key')),
}, handle);
server.keepAliveTimeout = 120 * 1000;
server.headersTimeout = 130 * 1000;
server.requestTimeout = 0;
server.listen(Number(port), host, () => console.log(`listening on ${server.address().port}`));
process.on('SIGTERM', () => process.exit(0));
