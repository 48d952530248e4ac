#!/usr/bin/env node
// SPDX-License-Identifier: Apache-2.0
//
// Builds kubesim's table of the Kubernetes schemas of the built-in kinds it
// serves (tests/kubesim/kschema_table.c) from the npm package
// kubernetes-models (pinned in tests/manifests/package-lock.json), which is
// generated from the upstream OpenAPI definitions (api/openapi-spec in
// kubernetes/kubernetes):
//   * its TypeScript declarations (*.d.ts) give each definition's members,
//     their JSON types, references, string enums, required members and
//     descriptions (for kubectl explain);
//   * its compiled JSON-schema validators (_schemas/*.js) are asked, for
//     every numeric member, whether it is an integer and whether it is an
//     int32 or an int64 (the declarations only say "number").
//
// Usage (from the repository root, after `npm ci` in tests/manifests):
//   node scripts/gen-kube-schema.js > tests/kubesim/kschema_table.c
//
// The table is compact JSON:
//   {"source": "...", "kinds": {"GROUP/VERSION/Kind": "definition"},
//    "defs": {"definition": {"d": description, "r": [required...],
//                             "p": {"member": TYPE}}}}
// TYPE: {"t": "string"|"integer"|"number"|"boolean"|"object"|"array"|
//        "int-or-string"|"quantity"|"any", "f": "int32"|"int64"|"date-time",
//        "e": [enum...], "ref": "definition", "items": TYPE,
//        "add": TYPE (map values), "d": description}
'use strict';

const fs = require('fs');
const path = require('path');

const root = path.resolve(__dirname, '..', 'tests', 'manifests', 'node_modules');
const ts = require(path.join(root, 'typescript'));
const models = path.join(root, 'kubernetes-models');

// The kinds kubesim serves (tests/kubesim/resources.c, builtins[]).
const KINDS = [
    ['', 'v1', 'v1', 'ConfigMap'],
    ['', 'v1', 'v1', 'Endpoints'],
    ['', 'v1', 'v1', 'Event'],
    ['', 'v1', 'v1', 'Namespace'],
    ['', 'v1', 'v1', 'Node'],
    ['', 'v1', 'v1', 'Pod'],
    ['', 'v1', 'v1', 'Secret'],
    ['', 'v1', 'v1', 'ServiceAccount'],
    ['', 'v1', 'v1', 'Service'],
    ['admissionregistration.k8s.io', 'v1', 'admissionregistration.k8s.io/v1',
        'MutatingWebhookConfiguration'],
    ['admissionregistration.k8s.io', 'v1', 'admissionregistration.k8s.io/v1',
        'ValidatingWebhookConfiguration'],
    ['apiextensions.k8s.io', 'v1', 'apiextensions.k8s.io/v1', 'CustomResourceDefinition'],
    ['apps', 'v1', 'apps/v1', 'Deployment'],
    ['apps', 'v1', 'apps/v1', 'ReplicaSet'],
    ['authentication.k8s.io', 'v1', 'authentication.k8s.io/v1', 'SelfSubjectReview'],
    ['authentication.k8s.io', 'v1', 'authentication.k8s.io/v1', 'TokenReview'],
    ['authorization.k8s.io', 'v1', 'authorization.k8s.io/v1', 'LocalSubjectAccessReview'],
    ['authorization.k8s.io', 'v1', 'authorization.k8s.io/v1', 'SelfSubjectAccessReview'],
    ['authorization.k8s.io', 'v1', 'authorization.k8s.io/v1', 'SelfSubjectRulesReview'],
    ['authorization.k8s.io', 'v1', 'authorization.k8s.io/v1', 'SubjectAccessReview'],
    ['coordination.k8s.io', 'v1', 'coordination.k8s.io/v1', 'Lease'],
    ['discovery.k8s.io', 'v1', 'discovery.k8s.io/v1', 'EndpointSlice'],
    ['networking.k8s.io', 'v1', 'networking.k8s.io/v1', 'NetworkPolicy'],
    ['policy', 'v1', 'policy/v1', 'PodDisruptionBudget'],
    ['rbac.authorization.k8s.io', 'v1', 'rbac.authorization.k8s.io/v1', 'ClusterRoleBinding'],
    ['rbac.authorization.k8s.io', 'v1', 'rbac.authorization.k8s.io/v1', 'ClusterRole'],
    ['rbac.authorization.k8s.io', 'v1', 'rbac.authorization.k8s.io/v1', 'RoleBinding'],
    ['rbac.authorization.k8s.io', 'v1', 'rbac.authorization.k8s.io/v1', 'Role'],
];

// The models' export alias ("IoK8sApiAppsV1Deployment") back to the
// OpenAPI definition name ("io.k8s.api.apps.v1.Deployment").
function defName(alias) {
    const prefixes = [
        ['IoK8sApimachineryPkg', 'io.k8s.apimachinery.pkg.'],
        ['IoK8sApiextensionsApiserverPkgApisApiextensions',
            'io.k8s.apiextensions-apiserver.pkg.apis.apiextensions.'],
        ['IoK8sApi', 'io.k8s.api.'],
    ];
    for (const [p, dotted] of prefixes) {
        if (!alias.startsWith(p)) continue;
        const rest = alias.slice(p.length);
        // Path segments are capitalised words up to the version (V1,
        // V1beta1), then the type name.
        const m = rest.match(/^((?:[A-Z][a-z0-9]*?)*?)(V[0-9]+(?:(?:alpha|beta)[0-9]+)?)([A-Z].*)$/);
        if (!m) throw new Error(`cannot name ${alias}`);
        const segs = m[1].match(/[A-Z][a-z0-9]*/g) || [];
        return dotted + segs.map((s) => s.toLowerCase()).join('.') +
            (segs.length ? '.' : '') + m[2].toLowerCase() + '.' + m[3];
    }
    throw new Error(`unknown prefix ${alias}`);
}

function docOf(node) {
    const parts = (node.jsDoc || []).map((d) => (typeof d.comment === 'string' ? d.comment : ''));
    return parts.join('\n').replace(/\\\*/g, '*').trim();
}

const files = new Map(); // path -> parsed info
function parse(file) {
    if (files.has(file)) return files.get(file);
    const src = ts.createSourceFile(file, fs.readFileSync(file, 'utf8'), ts.ScriptTarget.ES2020,
        true);
    const info = { file, imports: new Map(), iface: null, alias: null, typeAlias: null };
    for (const st of src.statements) {
        if (ts.isImportDeclaration(st) && st.importClause && st.importClause.namedBindings) {
            const mod = st.moduleSpecifier.text;
            for (const el of st.importClause.namedBindings.elements || [])
                info.imports.set(el.name.text, mod);
        } else if (ts.isInterfaceDeclaration(st) && !info.iface) {
            info.iface = st;
        } else if (ts.isTypeAliasDeclaration(st) && !info.typeAlias) {
            info.typeAlias = st;
        } else if (ts.isExportDeclaration(st) && st.exportClause) {
            for (const el of st.exportClause.elements) {
                const n = el.name.text;
                if (!n.startsWith('I') || !/^IIoK8s/.test(n)) continue;
                info.alias = n.slice(1);
            }
        }
    }
    files.set(file, info);
    return info;
}

function resolveModule(fromFile, mod) {
    let p;
    if (mod.startsWith('.')) p = path.resolve(path.dirname(fromFile), mod);
    else p = path.join(root, mod);
    return p + '.d.ts';
}

// The compiled validator of a definition, to probe numeric formats.
function validatorOf(info) {
    const parts = path.relative(root, info.file).split(path.sep);
    const pkg = path.join(root, ...parts.slice(0, parts[0].startsWith('@') ? 2 : 1));
    const v = path.join(pkg, '_schemas', info.alias + '.js');
    return require(v).validate;
}

function numberFormat(info, member) {
    const validate = validatorOf(info);
    const errs = (value) => {
        validate({ [member]: value });
        return (validate.errors || []).filter((e) => e.instancePath === '/' + member);
    };
    if (!errs(0.5).some((e) => e.keyword === 'type')) return { t: 'number' };
    if (errs(2 ** 31).some((e) => e.keyword === 'format')) return { t: 'integer', f: 'int32' };
    return { t: 'integer', f: 'int64' };
}

const defs = {};
const queue = [];

function typeOf(info, member, node) {
    switch (node.kind) {
    case ts.SyntaxKind.StringKeyword:
        return { t: 'string' };
    case ts.SyntaxKind.BooleanKeyword:
        return { t: 'boolean' };
    case ts.SyntaxKind.NumberKeyword:
        return numberFormat(info, member);
    case ts.SyntaxKind.AnyKeyword:
    case ts.SyntaxKind.UnknownKeyword:
        return { t: 'any' };
    case ts.SyntaxKind.LiteralType:
        return { t: 'string', e: [node.literal.text] };
    case ts.SyntaxKind.UnionType: {
        const lits = node.types.filter((x) => x.kind === ts.SyntaxKind.LiteralType);
        if (lits.length === node.types.length) return { t: 'string', e: lits.map((x) => x.literal.text) };
        return { t: 'any' };
    }
    case ts.SyntaxKind.ArrayType:
        return { t: 'array', items: typeOf(info, null, node.elementType) };
    case ts.SyntaxKind.TypeLiteral: {
        const idx = node.members.find((m) => m.kind === ts.SyntaxKind.IndexSignature);
        if (idx) return { t: 'object', add: typeOf(info, null, idx.type) };
        return { t: 'any' };
    }
    case ts.SyntaxKind.TypeReference: {
        const name = node.typeName.text;
        if (name === 'Array') return { t: 'array', items: typeOf(info, null, node.typeArguments[0]) };
        if (info.iface && name === info.iface.name.text) return { t: 'object', ref: defName(info.alias) };
        const mod = info.imports.get(name);
        if (!mod) throw new Error(`${info.file}: unresolved ${name}`);
        const target = parse(resolveModule(info.file, mod));
        if (target.typeAlias) {
            if (/IntOrString$/.test(name)) return { t: 'int-or-string' };
            if (/Quantity$/.test(name)) return { t: 'quantity' };
            if (/(Micro)?Time$/.test(name)) return { t: 'string', f: 'date-time' };
            return typeOf(target, null, target.typeAlias.type);
        }
        if (!target.iface.members.length) return { t: 'any', ref: defName(target.alias) };
        queue.push(target);
        return { t: 'object', ref: defName(target.alias) };
    }
    default:
        throw new Error(`${info.file}: unhandled type kind ${ts.SyntaxKind[node.kind]}`);
    }
}

function visit(info) {
    const name = defName(info.alias);
    if (defs[name]) return;
    const def = { d: docOf(info.iface), p: {}, r: [] };
    defs[name] = def;
    for (const m of info.iface.members) {
        if (!ts.isPropertySignature(m)) continue;
        const member = m.name.text;
        const t = typeOf(info, member, m.type);
        const d = docOf(m);
        if (d) t.d = d;
        def.p[member] = t;
        // TypeMeta's apiVersion and kind are optional on the wire.
        if (!m.questionToken && member !== 'apiVersion' && member !== 'kind') def.r.push(member);
    }
    if (!def.r.length) delete def.r;
}

const kinds = {};
for (const [group, version, gv, kind] of KINDS) {
    const dir = group === '' ? version : path.join(group, version);
    const info = parse(path.join(models, dir, kind + '.d.ts'));
    kinds[`${group}/${version}/${kind}`] = defName(info.alias);
    queue.push(info);
    void gv;
}
while (queue.length) visit(queue.shift());

const pkgVersion = JSON.parse(fs.readFileSync(path.join(models, 'package.json'), 'utf8')).version;
const table = {
    source: `npm kubernetes-models ${pkgVersion} (generated from the Kubernetes OpenAPI ` +
        'definitions), by scripts/gen-kube-schema.js',
    kinds,
    defs: Object.fromEntries(Object.keys(defs).sort().map((k) => [k, defs[k]])),
};
const text = JSON.stringify(table);

// C string literals of at most 2000 bytes (C11 only promises 4095).
const out = [];
out.push('/* SPDX-License-Identifier: Apache-2.0 */');
out.push('/*');
out.push(` * GENERATED by scripts/gen-kube-schema.js from ${table.source.split(' (')[0]};`);
out.push(' * do not edit. The Kubernetes schemas of the built-in kinds kubesim serves');
out.push(' * (see schema.c, ks_kschema_*). Descriptions are the upstream API');
out.push(' * documentation (Apache-2.0, The Kubernetes Authors).');
out.push(' */');
out.push('#include "kubesim.h"');
out.push('');
out.push('/* clang-format off */');
out.push('const char *const ks_kschema_parts[] = {');
const buf = Buffer.from(text, 'utf8');
let i = 0;
while (i < buf.length) {
    let end = Math.min(i + 2000, buf.length);
    // Do not split a UTF-8 sequence.
    while (end < buf.length && (buf[end] & 0xc0) === 0x80) end--;
    const chunk = buf.slice(i, end);
    let lit = '';
    for (const b of chunk) {
        if (b === 0x22) lit += '\\"';
        else if (b === 0x5c) lit += '\\\\';
        else if (b < 0x20 || b >= 0x7f) lit += '\\' + b.toString(8).padStart(3, '0');
        else if (b === 0x3f) lit += '\\?'; // no trigraphs
        else lit += String.fromCharCode(b);
    }
    out.push(`    "${lit}",`);
    i = end;
}
out.push('};');
out.push('const size_t ks_kschema_nparts = sizeof(ks_kschema_parts) / sizeof(ks_kschema_parts[0]);');
out.push('/* clang-format on */');
process.stdout.write(out.join('\n') + '\n');
