// SPDX-License-Identifier: Apache-2.0
//
// kubesim's CEL helper: evaluates the x-kubernetes-validations rules of
// custom resources with @bufbuild/cel (a conformance-tested CEL
// implementation; RE2 regular expressions through @bufbuild/re2). kubesim
// (tests/kubesim/cel.c) starts it once and talks to it over stdin and
// stdout, one JSON document a line each way, one answer per request, in
// order. docs/kubesim.md §1 says what is emulated and §4 what is not.
//
// Requests:
//   {"id":N,"op":"hello"}
//       -> {"id":N,"ok":true,"version":"<@bufbuild/cel version>"}
//   {"id":N,"op":"compile","nodes":[{"schema":S,"root":B,"rules":[R...]}...]}
//       R is {"rule":TEXT,"messageExpression":TEXT?,"optionalOldSelf":B?};
//       -> {"id":N,"results":[[C...]...]}, C per rule:
//          {"uses_old_self":B,"rule_error":TEXT?,"message_error":TEXT?}
//          (the texts are the apiserver's details: "compilation failed: ...")
//   {"id":N,"op":"eval","nodes":[{"self":V,"old":V?,"rules":[R...]}...]}
//       V is a typed value (below); "old" only when a correlatable old value
//       exists. -> {"id":N,"results":[[E...]...]}, E per rule:
//          {"s":"ok"} | {"s":"skip"} (a transition rule without oldSelf)
//          {"s":"error","error":TEXT,"uses_old_self":B}
//          {"s":"fail","uses_old_self":B,"message":TEXT?} ("message": the
//            evaluated messageExpression when it gave a usable string)
// A request that is not understood gets {"id":N,"error":TEXT}.
//
// Typed values (kubesim types them from the structural schema, as the
// apiserver's UnstructuredToVal does): a JSON string, boolean or null as
// itself; a JSON number is a CEL int; an array a list; an object is a
// one-member tag: {"i":"DIGITS"} int (past 2^53), {"d":NUMBER} double,
// {"m":{...}} map (property names already escaped), {"t":"RFC3339"}
// timestamp, {"u":"DURATION"} duration, {"y":"BASE64"} bytes.

import { createInterface } from "node:readline";
import { readFileSync } from "node:fs";
import {
  celEnv,
  celFunc,
  celMethod,
  CelScalar,
  isCelError,
  isCelList,
  isCelMap,
  listType,
  mapType,
  parse,
  plan,
} from "@bufbuild/cel";
import { strings } from "@bufbuild/cel/ext";
import { create } from "@bufbuild/protobuf";
import { DurationSchema, TimestampSchema } from "@bufbuild/protobuf/wkt";

const DYN = CelScalar.DYN;

// ---- optional values (cel-go's OptionalTypes, as far as kubesim needs
// them: optionalOldSelf binds oldSelf to one) ----------------------------
//
// An optional is a map with one reserved key; the methods refuse any
// other map.
const OPT_KEY = "\u0000optional";
const OPT_NONE = "\u0000none";
const optOf = (v) => new Map([[OPT_KEY, v]]);
const optNone = () => new Map([[OPT_KEY, OPT_NONE]]);
const OPT_TYPE = mapType(CelScalar.STRING, DYN);
function optGet(m) {
  if (!isCelMap(m) || m.size !== 1 || !m.has(OPT_KEY)) throw new Error("no such overload");
  const v = m.get(OPT_KEY);
  return v === OPT_NONE ? { has: false } : { has: true, v };
}
const optionalFuncs = [
  celFunc("optional.of", [DYN], DYN, (v) => optOf(v)),
  celFunc("optional.none", [], DYN, () => optNone()),
  celMethod("hasValue", OPT_TYPE, [], CelScalar.BOOL, function () {
    return optGet(this).has;
  }),
  celMethod("value", OPT_TYPE, [], DYN, function () {
    const o = optGet(this);
    if (!o.has) throw new Error("optional.none() dereference");
    return o.v;
  }),
  celMethod("orValue", OPT_TYPE, [DYN], DYN, function (d) {
    const o = optGet(this);
    return o.has ? o.v : d;
  }),
  celMethod("or", OPT_TYPE, [OPT_TYPE], DYN, function (other) {
    return optGet(this).has ? this : other;
  }),
];

// ---- k8s.io/apiserver/pkg/cel/library: lists and regex --------------------

const LIST = listType(DYN);
function cmp(a, b) {
  if (typeof a === "bigint" && typeof b === "bigint") return a < b ? -1 : a > b ? 1 : 0;
  if (typeof a === typeof b && (typeof a === "number" || typeof a === "string"))
    return a < b ? -1 : a > b ? 1 : 0;
  throw new Error("no such overload");
}
const items = (l) => [...l];
const listFuncs = [
  celMethod("isSorted", LIST, [], CelScalar.BOOL, function () {
    const a = items(this);
    for (let i = 1; i < a.length; i++) if (cmp(a[i - 1], a[i]) > 0) return false;
    return true;
  }),
  celMethod("sum", LIST, [], DYN, function () {
    const a = items(this);
    if (a.length === 0) return 0n;
    let s = a[0];
    for (let i = 1; i < a.length; i++) {
      if (typeof s !== typeof a[i]) throw new Error("no such overload");
      s = s + a[i];
      if (typeof s === "bigint" && (s > 9223372036854775807n || s < -9223372036854775808n))
        throw new Error("integer overflow");
    }
    return s;
  }),
  celMethod("min", LIST, [], DYN, function () {
    const a = items(this);
    if (a.length === 0) throw new Error("min(list) argument must not be empty");
    return a.reduce((m, x) => (cmp(x, m) < 0 ? x : m));
  }),
  celMethod("max", LIST, [], DYN, function () {
    const a = items(this);
    if (a.length === 0) throw new Error("max(list) argument must not be empty");
    return a.reduce((m, x) => (cmp(x, m) > 0 ? x : m));
  }),
];
const regexFuncs = [
  celMethod("find", CelScalar.STRING, [CelScalar.STRING], CelScalar.STRING, function (re) {
    const m = new RegExp(re, "u").exec(this);
    return m ? m[0] : "";
  }),
  celMethod("findAll", CelScalar.STRING, [CelScalar.STRING], listType(CelScalar.STRING), function (re) {
    return [...this.matchAll(new RegExp(re, "gu"))].map((m) => m[0]);
  }),
];

const env = celEnv({ funcs: [...strings, ...optionalFuncs, ...listFuncs, ...regexFuncs] });

// The call names the checker does not find among the functions: the
// parser's operators and macro internals.
const BUILTIN_CALLS = new Set([
  "_&&_",
  "_||_",
  "_?_:_",
  "_[_]",
  "@not_strictly_false",
  "_[?_]",
  "_?._",
]);

// ---- compilation ---------------------------------------------------------

// cel-go's common.Error.ToDisplayString: "ERROR: <input>:L:C: MSG" and the
// source line with a caret under the column.
function display(src, offset, msg) {
  const before = src.slice(0, offset);
  const line = before.split("\n").length;
  const lineStart = before.lastIndexOf("\n") + 1;
  const col = offset - lineStart;
  const text = src.split("\n")[line - 1] ?? "";
  let out = `ERROR: <input>:${line}:${col + 1}: ${msg}`;
  out += `\n | ${text.replace(/\t/g, " ")}\n | ${".".repeat(col)}^`;
  return out;
}

// A schema node's CEL view (model.SchemaDeclType, as far as field names and
// the result types below need it): "object" with props (escaped name ->
// schema), "map" with a value schema, "list" with an item schema, a
// scalar, or "dyn".
function escapeName(name) {
  const reserved = new Set(["true", "false", "null", "in", "as", "break", "const", "continue",
    "else", "for", "function", "if", "import", "let", "loop", "package", "namespace", "return",
    "var", "void", "while"]);
  if (name === "" || /^[0-9]/.test(name)) return null;
  if (reserved.has(name)) return `__${name}__`;
  if (/[^a-zA-Z0-9_.\-/]/.test(name)) return null;
  return name.replace(/__|[-./]/g, (s) =>
    ({ __: "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__" })[s]);
}
function withTypeAndObjectMeta(s) {
  const props = { ...(s.properties ?? {}) };
  props.kind = { type: "string" };
  props.apiVersion = { type: "string" };
  props.metadata = {
    type: "object",
    properties: { name: { type: "string" }, generateName: { type: "string" } },
  };
  return { ...s, type: "object", properties: props };
}
function celView(s, root) {
  if (!s || typeof s !== "object") return { t: "dyn" };
  if (root || s["x-kubernetes-embedded-resource"] === true) s = withTypeAndObjectMeta(s);
  if (s["x-kubernetes-int-or-string"] === true) return { t: "dyn" };
  switch (s.type) {
    case "object":
      if (s.properties) {
        const props = new Map();
        for (const [k, v] of Object.entries(s.properties)) {
          const e = escapeName(k);
          if (e !== null) props.set(e, v);
        }
        return { t: "object", props };
      }
      if (s.additionalProperties && typeof s.additionalProperties === "object")
        return { t: "map", value: s.additionalProperties };
      return { t: "map", value: null };
    case "array":
      return { t: "list", items: s.items };
    case "string":
      if (s.format === "date-time" || s.format === "date") return { t: "timestamp" };
      if (s.format === "duration") return { t: "duration" };
      if (s.format === "byte") return { t: "bytes" };
      return { t: "string" };
    case "integer":
      return { t: "int" };
    case "number":
      return { t: "double" };
    case "boolean":
      return { t: "bool" };
    default:
      return { t: "dyn" };
  }
}

const BOOL_CALLS = new Set(["_==_", "_!=_", "_<_", "_<=_", "_>_", "_>=_", "!_", "_&&_", "_||_",
  "@in", "matches", "startsWith", "endsWith", "contains", "isSorted", "hasValue"]);
const INT_CALLS = new Set(["size", "int", "indexOf", "lastIndexOf", "getFullYear", "getMonth",
  "getDayOfMonth", "getDayOfYear", "getDate", "getDayOfWeek", "getHours", "getMinutes",
  "getSeconds", "getMilliseconds"]);
const STRING_CALLS = new Set(["string", "lowerAscii", "upperAscii", "replace", "substring", "trim",
  "join", "charAt", "quote", "format", "find", "reverse"]);

// Walks a parsed expression as cel-go's checker would for what kubesim
// checks: undeclared identifiers and functions, fields a structural
// schema does not declare (selections on self and oldSelf chains), and
// the result type where it is plain. Returns {type, usesOldSelf} or
// throws {offset, msg}.
function check(parsed, vars) {
  const positions = parsed.sourceInfo?.positions ?? {};
  const pos = (id) => Number(positions[String(id)] ?? 0);
  let usesOldSelf = false;
  const fail = (id, msg) => {
    throw { offset: pos(id), msg };
  };
  // scope: name -> view
  function walk(e, scope) {
    const k = e.exprKind;
    switch (k.case) {
      case "constExpr": {
        const c = k.value.constantKind.case;
        return {
          boolValue: { t: "bool" }, int64Value: { t: "int" }, uint64Value: { t: "uint" },
          doubleValue: { t: "double" }, stringValue: { t: "string" }, bytesValue: { t: "bytes" },
          nullValue: { t: "null" },
        }[c] ?? { t: "dyn" };
      }
      case "identExpr": {
        const name = k.value.name;
        if (scope.has(name)) return scope.get(name);
        if (name === "oldSelf" && vars.has("oldSelf")) usesOldSelf = true;
        if (vars.has(name)) return vars.get(name);
        // a type name used as a value (int, string, map, list, ...)
        if (["int", "uint", "double", "bool", "string", "bytes", "list", "map", "null_type",
          "type", "dyn"].includes(name)) return { t: "type" };
        return fail(e.id, `undeclared reference to '${name}' (in container '')`);
      }
      case "selectExpr": {
        const operand = k.value.operand;
        // a qualified name (optional.none) is resolved by the call below
        const ov = walk(operand, scope);
        const f = k.value.field;
        if (k.value.testOnly) {
          if (ov.t === "object" && !ov.props.has(f)) fail(e.id, `undefined field '${f}'`);
          return { t: "bool" };
        }
        if (ov.t === "object") {
          if (!ov.props.has(f)) fail(e.id, `undefined field '${f}'`);
          return celView(ov.props.get(f), false);
        }
        if (ov.t === "map") return ov.value ? celView(ov.value, false) : { t: "dyn" };
        if (["int", "double", "string", "bool", "bytes", "list", "null"].includes(ov.t))
          fail(e.id, `type '${ov.t}' does not support field selection`);
        return { t: "dyn" };
      }
      case "callExpr": {
        const c = k.value;
        let name = c.function;
        let target = c.target;
        // optional.of(x): a call on the identifier "optional"
        if (target && target.exprKind.case === "identExpr" &&
          !scope.has(target.exprKind.value.name) && !vars.has(target.exprKind.value.name) &&
          env.funcs.find(`${target.exprKind.value.name}.${name}`)) {
          name = `${target.exprKind.value.name}.${name}`;
          target = undefined;
        }
        const tv = target ? walk(target, scope) : null;
        const args = c.args.map((a) => walk(a, scope));
        if (!BUILTIN_CALLS.has(name) && !env.funcs.find(name))
          fail(e.id, `undeclared reference to '${name}' (in container '')`);
        if (name === "_[_]") {
          const [l] = args;
          if (l.t === "list") return celView(l.items, false);
          if (l.t === "map") return l.value ? celView(l.value, false) : { t: "dyn" };
          return { t: "dyn" };
        }
        if (name === "_?_:_") return args[1].t === args[2].t ? args[1] : { t: "dyn" };
        if (BOOL_CALLS.has(name)) return { t: "bool" };
        if (INT_CALLS.has(name)) return { t: "int" };
        if (STRING_CALLS.has(name)) return { t: "string" };
        if (name === "double") return { t: "double" };
        if (name === "split") return { t: "list", items: { type: "string" } };
        if (["_+_", "_-_", "_*_", "_/_", "_%_", "-_"].includes(name)) {
          const a = tv ?? args[0];
          if (["int", "double", "string", "uint"].includes(a.t)) return { t: a.t };
          if (a.t === "list" && name === "_+_") return a;
          return { t: "dyn" };
        }
        return { t: "dyn" };
      }
      case "listExpr":
        for (const x of k.value.elements) walk(x, scope);
        return { t: "list", items: null };
      case "structExpr":
        for (const en of k.value.entries) {
          if (en.keyKind.case === "mapKey") walk(en.keyKind.value, scope);
          walk(en.value, scope);
        }
        return k.value.messageName ? { t: "dyn" } : { t: "map", value: null };
      case "comprehensionExpr": {
        const c = k.value;
        const range = walk(c.iterRange, scope);
        const inner = new Map(scope);
        const elem =
          range.t === "list" ? celView(range.items, false)
            : range.t === "map" || range.t === "object" ? { t: "string" } : { t: "dyn" };
        inner.set(c.iterVar, elem);
        if (c.iterVar2) inner.set(c.iterVar2, { t: "dyn" });
        const accu = walk(c.accuInit, scope);
        inner.set(c.accuVar, accu.t === "list" ? { t: "list", items: null } : accu);
        walk(c.loopCondition, inner);
        const step = walk(c.loopStep, inner);
        inner.set(c.accuVar, accu.t === "dyn" ? step : accu);
        return walk(c.result, inner);
      }
      default:
        return { t: "dyn" };
    }
  }
  const t = walk(parsed.expr, new Map());
  return { type: t.t, usesOldSelf };
}

// "compilation failed: ERROR: ..." for a parse or check error.
function compileOne(src, vars, want, prefix) {
  let parsed;
  try {
    parsed = parse(src);
  } catch (x) {
    const off = x?.location?.start?.offset ?? 0;
    const raw = x?.rawMessage ?? String(x?.message ?? x);
    return { error: `${prefix}compilation failed: ${display(src, off, `Syntax error: ${raw}`)}` };
  }
  let res;
  try {
    res = check(parsed, vars);
  } catch (x) {
    if (x && typeof x.offset === "number")
      return { error: `${prefix}compilation failed: ${display(src, x.offset, x.msg)}` };
    return { error: `${prefix}compilation failed: ${String(x?.message ?? x)}` };
  }
  if (want !== "dyn" && res.type !== "dyn" && res.type !== want)
    return { error: prefix ? "messageExpression must evaluate to a string"
      : "cel expression must evaluate to a bool" };
  return { parsed, usesOldSelf: res.usesOldSelf };
}

function compileNode(node) {
  const view = celView(node.schema, node.root === true);
  return (node.rules ?? []).map((r) => {
    const vars = new Map([["self", view]]);
    vars.set("oldSelf", r.optionalOldSelf === true ? { t: "dyn" } : view);
    const out = { uses_old_self: false };
    const c = compileOne(String(r.rule ?? ""), vars, "bool", "");
    if (c.error) {
      out.rule_error = c.error;
      return out;
    }
    out.uses_old_self = c.usesOldSelf;
    if (typeof r.messageExpression === "string" && r.messageExpression !== "") {
      const m = compileOne(r.messageExpression, vars, "string", "messageExpression ");
      if (m.error) out.message_error = m.error;
    }
    return out;
  });
}

// ---- evaluation ------------------------------------------------------------

// Programs by expression text.
const programs = new Map();
function program(src) {
  let p = programs.get(src);
  if (p) return p;
  const c = compileOne(src, new Map([["self", { t: "dyn" }], ["oldSelf", { t: "dyn" }]]), "dyn", "");
  p = c.error ? { error: c.error } : { run: plan(env, c.parsed), usesOldSelf: c.usesOldSelf };
  if (programs.size > 10000) programs.clear();
  programs.set(src, p);
  return p;
}

function decode(v) {
  if (v === null || typeof v === "string" || typeof v === "boolean") return v;
  if (typeof v === "number") return BigInt(v);
  if (Array.isArray(v)) return v.map(decode);
  if ("m" in v) {
    const m = new Map();
    for (const [k, x] of Object.entries(v.m)) m.set(k, decode(x));
    return m;
  }
  if ("i" in v) return BigInt(v.i);
  if ("d" in v) return Number(v.d);
  if ("t" in v) return timestamp(v.t);
  if ("u" in v) return duration(v.u);
  if ("y" in v) return Uint8Array.from(Buffer.from(v.y, "base64"));
  throw new Error("bad typed value");
}

// RFC 3339 (or a date, at midnight UTC) as a google.protobuf.Timestamp.
function timestamp(s) {
  const m = /^(\d{4}-\d{2}-\d{2})(?:[Tt ](\d{2}:\d{2}:\d{2})(?:\.(\d{1,9}))?([Zz]|[+-]\d{2}:\d{2}))?$/.exec(s);
  if (!m) return s;
  const ms = Date.parse(`${m[1]}T${m[2] ?? "00:00:00"}${m[4] && m[4] !== "z" ? m[4] : "Z"}`);
  if (Number.isNaN(ms)) return s;
  const nanos = m[3] ? Number(m[3].padEnd(9, "0")) : 0;
  return create(TimestampSchema, { seconds: BigInt(Math.floor(ms / 1000)), nanos });
}

// Go's time.ParseDuration ("1h30m", "1.5s", "300ms") as a
// google.protobuf.Duration; strfmt's other forms are left a string.
function duration(s) {
  const unit = { ns: 1n, us: 1000n, "µs": 1000n, ms: 1000000n, s: 1000000000n, m: 60000000000n,
    h: 3600000000000n };
  let rest = s, neg = false, total = 0n;
  if (rest[0] === "-" || rest[0] === "+") {
    neg = rest[0] === "-";
    rest = rest.slice(1);
  }
  if (rest === "0") return create(DurationSchema, {});
  if (rest === "") return s;
  while (rest !== "") {
    const m = /^(\d*)(?:\.(\d*))?(ns|us|µs|ms|s|m|h)/.exec(rest);
    if (!m || (m[1] === "" && (m[2] ?? "") === "")) return s;
    const u = unit[m[3]];
    total += BigInt(m[1] || "0") * u;
    if (m[2]) total += (BigInt(m[2]) * u) / 10n ** BigInt(m[2].length);
    rest = rest.slice(m[0].length);
  }
  if (neg) total = -total;
  return create(DurationSchema, {
    seconds: total / 1000000000n,
    nanos: Number(total % 1000000000n),
  });
}

// cel-go's texts for the runtime errors whose wording differs.
function errorText(err) {
  const msg = String(err?.message ?? err);
  let m = /^field not found: (.*)$/.exec(msg);
  if (m) return `no such key: ${m[1]}`;
  if (/divide by zero/.test(msg)) return "division by zero";
  if (/modulus by zero/.test(msg)) return "modulus by zero";
  if (/^u?int overflow/.test(msg)) return msg.startsWith("uint") ? "unsigned integer overflow" : "integer overflow";
  if (/^found no matching overload|^unbound function|^no such overload/.test(msg)) return "no such overload";
  return msg;
}

// evalMessageExpression: a string, trimmed, not empty, one line, at most
// 5 KiB (celconfig.MaxEvaluatedMessageExpressionSizeBytes); else null.
function messageOf(src, bindings) {
  const p = program(src);
  if (p.error) return null;
  let v;
  try {
    v = p.run(bindings);
  } catch {
    return null;
  }
  if (isCelError(v) || typeof v !== "string") return null;
  const t = v.trim();
  if (t === "" || t.length > 5 * 1024 || /\n/.test(t)) return null;
  return t;
}

// Results by rule and input: CEL is deterministic (no clock, no random),
// so the same rule on the same values gives the same result; the many
// objects of a benchmark that share a spec cost one evaluation each.
const results = new Map();
function evalNode(node) {
  const selfText = JSON.stringify(node.self);
  const oldText = "old" in node ? JSON.stringify(node.old) : "";
  let values = null; // decoded on the first rule not in the cache
  return (node.rules ?? []).map((r) => {
    const key = JSON.stringify([r.rule, r.messageExpression ?? "", r.optionalOldSelf === true,
      "old" in node, selfText, oldText]);
    let out = results.get(key);
    if (!out) {
      values ??= { self: decode(node.self), old: "old" in node ? decode(node.old) : undefined };
      out = evalRule(node, values, r);
      if (results.size > 20000) results.clear();
      results.set(key, out);
    }
    return out;
  });
}

function evalRule(node, values, r) {
  const { self, old } = values;
  const hasOld = "old" in node;
  {
    const p = program(String(r.rule ?? ""));
    if (p.error) return { s: "error", error: `rule compile error: ${p.error}`, compile: true };
    const optional = r.optionalOldSelf === true;
    if (p.usesOldSelf && !hasOld && !optional) return { s: "skip" };
    const bindings = { self };
    if (optional) bindings.oldSelf = hasOld ? optOf(old) : optNone();
    else if (hasOld) bindings.oldSelf = old;
    let v;
    try {
      v = p.run(bindings);
    } catch (x) {
      v = { message: String(x?.message ?? x), thrown: true };
    }
    if ((v && v.thrown) || isCelError(v))
      return { s: "error", error: errorText(v), uses_old_self: p.usesOldSelf };
    if (v === true) return { s: "ok" };
    const out = { s: "fail", uses_old_self: p.usesOldSelf };
    if (typeof r.messageExpression === "string" && r.messageExpression !== "") {
      // the rule's activation without the optional oldSelf (validation.go
      // passes activation, not optionalOldSelfActivation)
      const mb = { self };
      if (hasOld) mb.oldSelf = old;
      const msg = messageOf(r.messageExpression, mb);
      if (msg !== null) out.message = msg;
    }
    return out;
  }
}

// ---- the loop ----------------------------------------------------------------

function version() {
  try {
    const url = new URL("./node_modules/@bufbuild/cel/package.json", import.meta.url);
    return JSON.parse(readFileSync(url, "utf8")).version;
  } catch {
    return "unknown";
  }
}

function answer(req) {
  switch (req.op) {
    case "hello":
      return { ok: true, version: version() };
    case "compile":
      return { results: (req.nodes ?? []).map(compileNode) };
    case "eval":
      return { results: (req.nodes ?? []).map(evalNode) };
    default:
      return { error: `unknown op ${JSON.stringify(req.op)}` };
  }
}

const rl = createInterface({ input: process.stdin, crlfDelay: Infinity });
rl.on("line", (line) => {
  let id = null;
  let out;
  try {
    const req = JSON.parse(line);
    id = req.id ?? null;
    out = answer(req);
  } catch (x) {
    out = { error: String(x?.message ?? x) };
  }
  process.stdout.write(`${JSON.stringify({ id, ...out })}\n`);
});
rl.on("close", () => process.exit(0));
