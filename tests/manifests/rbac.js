// SPDX-License-Identifier: Apache-2.0
//
// Least-privilege check of kop's RBAC: the rules bound to kop's service
// account must allow every request kop made (nothing denied) and grant
// nothing kop did not use (nothing unused).
//
// The requests come from kubesim: GET /_kubesim/stats answers
//   {"requests": [{"verb": "list", "group": "apps", "resource": "deployments",
//                  "namespace": "ns", "name": "x", "subresource": "status"}, ...]}
// (namespace, name and subresource only when the URL had them; verb is the
// apiserver's: get list watch create update patch delete deletecollection).
// kubesim records every client's requests: reset them (DELETE
// /_kubesim/stats) once the test's own kubectl setup is done, so that the
// list holds kop's requests only.
//
// As a module:
//   const {checkRbac} = require('./rbac.js');
//   const {denied, unused} = checkRbac(requests, renderedDocs,
//       {serviceAccount: 'kop', namespace: 'kop-system', allowUnused: [...]});
// denied: the requests no rule allows; unused: the grants, as
// "VERB GROUP/RESOURCE[/SUB][ in NAMESPACE]" (core group written as "core"),
// that no request used, less allowUnused.
//
// As a program (PASS/FAIL lines, exit 1 on a failure):
//   node rbac.js STATS.json RENDERED.yaml [--allow-unused "VERB GROUP/RESOURCE"]...
'use strict';

const fs = require('fs');
const YAML = require('yaml');

// Granted although kop never sends it: with blockOwnerDeletion: true on the
// children's ownerReferences, the OwnerReferencesPermissionEnforcement
// admission plugin checks update on the owner's finalizers at create time.
const DEFAULT_ALLOW_UNUSED = ['update mygroup.example.com/myresources/finalizers'];

function has(list, v) {
    return (list || []).includes('*') || (list || []).includes(v);
}

function grantName(verb, group, resource, ns) {
    return `${verb} ${group || 'core'}/${resource}${ns ? ' in ' + ns : ''}`;
}

// The rules that apply to the account, each with the namespace it is
// limited to (null: every namespace and cluster-scoped objects).
function boundRules(docs, sa, saNamespace) {
    const find = (kind, name, ns) =>
        docs.find((o) => o.kind === kind && o.metadata.name === name && (!ns || o.metadata.namespace === ns));
    const out = [];
    for (const b of docs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
        const mine = (b.subjects || []).some((s) => s.kind === 'ServiceAccount' && s.name === sa &&
                                              (s.namespace || b.metadata.namespace) === saNamespace);
        if (!mine) continue;
        const scope = b.kind === 'RoleBinding' ? b.metadata.namespace : null;
        const role = b.roleRef.kind === 'ClusterRole' ? find('ClusterRole', b.roleRef.name)
                                                      : find('Role', b.roleRef.name, b.metadata.namespace);
        if (!role) continue;
        for (const rule of role.rules || []) out.push({rule, scope, from: `${role.kind}/${role.metadata.name}`});
    }
    return out;
}

function allows(entry, req) {
    const {rule, scope} = entry;
    if (rule.nonResourceURLs) return false;
    if (scope && req.namespace !== scope) return false;
    const res = req.subresource ? `${req.resource}/${req.subresource}` : req.resource;
    if (!has(rule.apiGroups, req.group || '') || !has(rule.resources, res) || !has(rule.verbs, req.verb)) return false;
    if ((rule.resourceNames || []).length) {
        // The apiserver can only check a name it is given: create, list and
        // watch without a name never match a resourceNames rule.
        if (!req.name || !rule.resourceNames.includes(req.name)) return false;
    }
    return true;
}

function checkRbac(requests, docs, opts) {
    const o = Object.assign({serviceAccount: 'kop', namespace: 'kop-system', allowUnused: DEFAULT_ALLOW_UNUSED}, opts);
    const rules = boundRules(docs, o.serviceAccount, o.namespace);
    const used = new Set();
    const denied = [];
    for (const req of requests) {
        let ok = false;
        rules.forEach((e, i) => {
            if (allows(e, req)) {
                ok = true;
                const res = req.subresource ? `${req.resource}/${req.subresource}` : req.resource;
                used.add(`${i}|${req.group || ''}|${res}|${req.verb}`);
            }
        });
        if (!ok) denied.push(req);
    }
    const unused = [];
    rules.forEach((e, i) => {
        for (const g of e.rule.apiGroups || [])
            for (const r of e.rule.resources || [])
                for (const v of e.rule.verbs || []) {
                    const name = grantName(v, g, r, e.scope);
                    if (used.has(`${i}|${g}|${r}|${v}`) || o.allowUnused.includes(grantName(v, g, r, null)) ||
                        o.allowUnused.includes(name))
                        continue;
                    unused.push(name);
                }
    });
    return {denied: denied, unused: [...new Set(unused)]};
}

function main(argv) {
    const allowUnused = [...DEFAULT_ALLOW_UNUSED];
    const files = [];
    for (let i = 0; i < argv.length; i++) {
        if (argv[i] === '--allow-unused' && i + 1 < argv.length) allowUnused.push(argv[++i]);
        else files.push(argv[i]);
    }
    if (files.length !== 2) {
        console.error('usage: node rbac.js STATS.json RENDERED.yaml [--allow-unused "VERB GROUP/RESOURCE"]...');
        return 2;
    }
    const stats = JSON.parse(fs.readFileSync(files[0], 'utf8'));
    const docs = YAML.parseAllDocuments(fs.readFileSync(files[1], 'utf8')).map((d) => d.toJS()).filter(Boolean);
    const {denied, unused} = checkRbac(stats.requests || [], docs, {allowUnused});
    let failed = 0;
    const seen = new Set();
    for (const r of denied) {
        const k = grantName(r.verb, r.group, r.subresource ? `${r.resource}/${r.subresource}` : r.resource,
                            r.namespace);
        if (seen.has(k)) continue;
        seen.add(k);
        failed++;
        console.log(`FAIL rbac allows ${k}: no rule bound to kop allows it`);
    }
    for (const u of unused) {
        failed++;
        console.log(`FAIL rbac grant ${u} unused: kop never made this request`);
    }
    if (!failed) console.log(`PASS rbac: ${stats.requests.length} requests allowed, every grant used`);
    return failed ? 1 : 0;
}

module.exports = {checkRbac, DEFAULT_ALLOW_UNUSED};

if (require.main === module) process.exitCode = main(process.argv.slice(2));
