// SPDX-License-Identifier: Apache-2.0
//
// Checks of kop's Helm chart (manifests/helm/kop) on `helm template`
// output, run by tests/scripts/test_helm.sh:
//
//   node helm.js same KUSTOMIZE.yaml HELM.yaml
//       the chart renders the same objects as kustomize, object by object,
//       once the intended differences below are taken out;
//   node helm.js case NAME HELM.yaml
//       the rendering with the values of case NAME (see CASES) has what
//       those values ask for;
//   node helm.js selftest KUSTOMIZE.yaml HELM.yaml
//       "same" notices a changed field, a missing object and an extra one.
//
// The intended differences (and nothing else) are normalized away:
//   * metadata.labels: app.kubernetes.io/managed-by is "Helm" (the release
//     service) instead of "kustomize", and helm.sh/chart: kop-<version> is
//     added;
//   * the CRD carries helm.sh/resource-policy: keep (crd.keep), so that
//     helm uninstall does not delete every MyResource with it.
// Objects are compared parsed (YAML 1.2, like check.js), so formatting,
// key order, comments and the order of the documents do not matter.
//
// Output: "PASS name" or "FAIL name: why" per check; exit status 1 when
// any check failed, 2 on bad usage.
'use strict';

const fs = require('fs');
const YAML = require('yaml');

let failed = 0;
function pass(name) {
    console.log(`PASS ${name}`);
}
function fail(name, why) {
    failed++;
    console.log(`FAIL ${name}: ${why}`);
}
function check(name, ok, why) {
    if (ok) pass(name);
    else fail(name, why);
}

function loadDocs(file) {
    const out = [];
    for (const d of YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'))) {
        if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
        const v = d.toJS();
        if (v !== null && v !== undefined) out.push(v);
    }
    return out;
}

function idOf(o) {
    const md = o.metadata || {};
    return `${o.apiVersion} ${o.kind} ${md.namespace ? md.namespace + '/' : ''}${md.name}`;
}

// The chart's version, as in helm.sh/chart.
const CHART_LABEL = /^kop-[0-9]+\.[0-9]+\.[0-9]+([-.][0-9A-Za-z_.-]+)?$/;

// Takes the intended differences out of a copy of a Helm-rendered object.
// Returns [object, problems]: a problem is an intended difference missing
// (a label the chart must set is not there).
function normalizeHelm(o) {
    const c = JSON.parse(JSON.stringify(o));
    const md = c.metadata || {};
    const problems = [];
    const labels = md.labels || {};
    if (labels['app.kubernetes.io/managed-by'] === 'Helm') labels['app.kubernetes.io/managed-by'] = 'kustomize';
    else problems.push('no app.kubernetes.io/managed-by: Helm');
    if (CHART_LABEL.test(String(labels['helm.sh/chart']))) delete labels['helm.sh/chart'];
    else problems.push('no helm.sh/chart label');
    if (c.kind === 'CustomResourceDefinition' && md.annotations) {
        if (md.annotations['helm.sh/resource-policy'] === 'keep') delete md.annotations['helm.sh/resource-policy'];
        if (Object.keys(md.annotations).length === 0) delete md.annotations;
    }
    return [c, problems];
}

// The first path where a and b differ, or null.
function firstDiff(a, b, path) {
    if (a === b) return null;
    if (typeof a !== typeof b || a === null || b === null || typeof a !== 'object' ||
        Array.isArray(a) !== Array.isArray(b))
        return `${path || '/'}: ${JSON.stringify(a)} != ${JSON.stringify(b)}`;
    if (Array.isArray(a)) {
        if (a.length !== b.length) return `${path}: ${a.length} items != ${b.length}`;
        for (let i = 0; i < a.length; i++) {
            const d = firstDiff(a[i], b[i], `${path}/${i}`);
            if (d) return d;
        }
        return null;
    }
    const keys = new Set([...Object.keys(a), ...Object.keys(b)]);
    for (const k of [...keys].sort()) {
        if (!(k in a)) return `${path}/${k}: only in helm (${JSON.stringify(b[k])})`;
        if (!(k in b)) return `${path}/${k}: missing in helm (${JSON.stringify(a[k])})`;
        const d = firstDiff(a[k], b[k], `${path}/${k}`);
        if (d) return d;
    }
    return null;
}

// Compares the kustomize docs with the Helm docs. Returns [name, error]
// pairs, error null when they agree.
function compare(kdocs, hdocs) {
    const out = [];
    const byId = new Map();
    for (const o of hdocs) {
        const id = idOf(o);
        if (byId.has(id)) out.push([`helm renders ${id} once`, 'twice']);
        byId.set(id, o);
    }
    const seen = new Set();
    for (const k of kdocs) {
        const id = idOf(k);
        seen.add(id);
        const h = byId.get(id);
        if (!h) {
            out.push([`same ${id}`, 'not rendered by helm']);
            continue;
        }
        const [n, problems] = normalizeHelm(h);
        const d = problems.length ? problems.join(', ') : firstDiff(k, n, '');
        out.push([`same ${id}`, d]);
    }
    for (const id of byId.keys())
        if (!seen.has(id)) out.push([`same ${id}`, 'rendered by helm only']);
    out.push([`same object count (${kdocs.length})`, kdocs.length === hdocs.length ? null :
        `kustomize ${kdocs.length}, helm ${hdocs.length}`]);
    return out;
}

function cmdSame(kfile, hfile) {
    for (const [name, err] of compare(loadDocs(kfile), loadDocs(hfile))) check(name, err === null, err);
}

function cmdSelftest(kfile, hfile) {
    const kdocs = loadDocs(kfile);
    const hdocs = loadDocs(hfile);
    const mutations = [
        ['a changed field', (d) => { d.find((o) => o.kind === 'Deployment').spec.revisionHistoryLimit = 6; }],
        ['a missing object', (d) => { d.splice(d.findIndex((o) => o.kind === 'PodDisruptionBudget'), 1); }],
        ['an extra object', (d) => { d.push({apiVersion: 'v1', kind: 'ConfigMap', metadata: {name: 'x'}}); }],
        ['a missing Helm label', (d) => { delete d.find((o) => o.kind === 'Service').metadata.labels['helm.sh/chart']; }],
        ['an extra annotation', (d) => {
            const crd = d.find((o) => o.kind === 'CustomResourceDefinition');
            crd.metadata.annotations['example.com/x'] = 'y';
        }],
        ['a changed list item', (d) => {
            d.find((o) => o.kind === 'ClusterRole').rules[0].verbs.push('delete');
        }],
    ];
    for (const [what, mutate] of mutations) {
        const copy = JSON.parse(JSON.stringify(hdocs));
        mutate(copy);
        const errs = compare(kdocs, copy).filter(([, e]) => e !== null);
        check(`selftest "same" catches ${what}`, errs.length > 0, 'all objects still compare equal');
    }
}

// ---- value cases ---------------------------------------------------------------

function find(docs, kind, name) {
    return docs.find((o) => o.kind === kind && (!name || o.metadata.name === name));
}
function container(docs) {
    const d = find(docs, 'Deployment', 'kop-controller-manager');
    return d && d.spec.template.spec.containers[0];
}
function certVolume(docs) {
    const d = find(docs, 'Deployment', 'kop-controller-manager');
    return d && d.spec.template.spec.volumes.find((v) => v.name === 'cert');
}
function injectAnnotation(o) {
    return ((o && o.metadata.annotations) || {})['cert-manager.io/inject-ca-from'];
}
function crdBundle(docs) {
    const crd = find(docs, 'CustomResourceDefinition');
    return crd && crd.spec.conversion.webhook.clientConfig.caBundle;
}
function vwcBundle(docs) {
    const v = find(docs, 'ValidatingWebhookConfiguration');
    return v && v.webhooks[0].clientConfig.caBundle;
}
// test_helm.sh's caBundle: a real CA certificate, base64 (the apiserver
// refuses a CRD caBundle that holds none).
const CA = fs.readFileSync(require('path').join(__dirname, '..', 'data', 'helm-ca.pem')).toString('base64');

// What each case of test_helm.sh sets, and what the rendering must show.
const CASES = {
    // certificates.source=secret, certificates.secret.name=my-tls,
    // certificates.secret.caBundle=CA
    secret: (d) => {
        check('secret: no cert-manager objects', !d.some((o) => String(o.apiVersion).startsWith('cert-manager.io/')),
              'still rendered');
        check('secret: no inject-ca-from', !injectAnnotation(find(d, 'CustomResourceDefinition')) &&
              !injectAnnotation(find(d, 'ValidatingWebhookConfiguration')), 'annotation still there');
        check('secret: caBundle in the CRD and the webhook configuration', crdBundle(d) === CA && vwcBundle(d) === CA,
              `${crdBundle(d)} / ${vwcBundle(d)}`);
        const v = certVolume(d);
        check('secret: the Secret my-tls at --cert-dir', v && v.secret && v.secret.secretName === 'my-tls' && !v.emptyDir,
              JSON.stringify(v));
        check('secret: no --self-signed-certs, no self-signed rights',
              !(container(d).args || []).includes('--self-signed-certs') && !find(d, 'ClusterRole', 'kop-self-signed-certs-role'),
              'self-signed pieces rendered');
        const dep = find(d, 'Deployment');
        check('secret: 2 replicas and the PDB', dep.spec.replicas === 2 && !!find(d, 'PodDisruptionBudget'),
              `${dep.spec.replicas} replicas`);
    },
    // namespace.name=kop-other
    namespace: (d) => {
        const ns = 'kop-other';
        const namespaced = d.filter((o) => !['Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding',
                                            'ValidatingWebhookConfiguration'].includes(o.kind));
        check('namespace: every namespaced object in kop-other', namespaced.length > 0 &&
              namespaced.every((o) => o.metadata.namespace === ns),
              namespaced.filter((o) => o.metadata.namespace !== ns).map(idOf).join(', '));
        const n = find(d, 'Namespace');
        check('namespace: the Namespace kop-other, restricted', n && n.metadata.name === ns &&
              n.metadata.labels['pod-security.kubernetes.io/enforce'] === 'restricted', JSON.stringify(n && n.metadata));
        const crd = find(d, 'CustomResourceDefinition');
        const vwc = find(d, 'ValidatingWebhookConfiguration');
        check('namespace: both webhooks call kop-webhook-service.kop-other',
              crd.spec.conversion.webhook.clientConfig.service.namespace === ns &&
              vwc.webhooks[0].clientConfig.service.namespace === ns, 'service namespace');
        check('namespace: the webhook leaves kop-other out',
              JSON.stringify(vwc.webhooks[0].namespaceSelector).includes(`"${ns}"`) &&
              !JSON.stringify(vwc.webhooks[0].namespaceSelector).includes('kop-system'),
              JSON.stringify(vwc.webhooks[0].namespaceSelector));
        check('namespace: inject-ca-from kop-other/kop-serving-cert',
              injectAnnotation(crd) === `${ns}/kop-serving-cert` && injectAnnotation(vwc) === `${ns}/kop-serving-cert`,
              injectAnnotation(crd));
        const cert = find(d, 'Certificate', 'kop-serving-cert');
        check('namespace: serving certificate names', JSON.stringify(cert.spec.dnsNames) ===
              JSON.stringify([`kop-webhook-service.${ns}.svc`, `kop-webhook-service.${ns}.svc.cluster.local`]),
              JSON.stringify(cert.spec.dnsNames));
        const subjects = d.filter((o) => o.kind.endsWith('Binding')).map((b) => b.subjects[0].namespace);
        check('namespace: bindings name kop in kop-other', subjects.length === 2 && subjects.every((s) => s === ns),
              JSON.stringify(subjects));
    },
    // --namespace kop-system (the release namespace is kop's)
    'release-namespace': (d) => {
        check('release namespace: no Namespace object (helm --create-namespace makes it)', !find(d, 'Namespace'),
              'rendered');
        check('release namespace: objects in kop-system', find(d, 'Deployment').metadata.namespace === 'kop-system',
              find(d, 'Deployment').metadata.namespace);
    },
    // namespace.name="" namespace.create=false, --namespace ops
    'empty-namespace': (d) => {
        check('empty namespace.name: the release namespace ops',
              d.filter((o) => o.metadata.namespace).every((o) => o.metadata.namespace === 'ops') &&
              find(d, 'Deployment').metadata.namespace === 'ops', 'not ops');
        check('empty namespace.name: no Namespace object', !find(d, 'Namespace'), 'rendered');
    },
    // image.repository=registry.example.com/kop, image.tag=0.2.0,
    // replicaCount=3, resources.requests.cpu=50m, resources.limits.memory=256Mi,
    // webhook.failurePolicy=Ignore, webhook.timeoutSeconds=10,
    // extraArgs={--log-level=debug}, nodeSelector.pool=ops,
    // priorityClassName=system-cluster-critical, imagePullSecrets[0].name=regcred,
    // image.pullPolicy=Always
    values: (d) => {
        const c = container(d);
        const dep = find(d, 'Deployment');
        check('values: image', c.image === 'registry.example.com/kop:0.2.0' && c.imagePullPolicy === 'Always',
              `${c.image} ${c.imagePullPolicy}`);
        check('values: 3 replicas, PDB kept', dep.spec.replicas === 3 && !!find(d, 'PodDisruptionBudget'),
              String(dep.spec.replicas));
        check('values: resources', c.resources.requests.cpu === '50m' && c.resources.requests.memory === '32Mi' &&
              c.resources.limits.memory === '256Mi', JSON.stringify(c.resources));
        const w = find(d, 'ValidatingWebhookConfiguration').webhooks[0];
        check('values: failurePolicy Ignore, timeout 10', w.failurePolicy === 'Ignore' && w.timeoutSeconds === 10,
              `${w.failurePolicy} ${w.timeoutSeconds}`);
        check('values: extra args after the fixed ones', c.args[0] === '--leader-elect' &&
              c.args[c.args.length - 1] === '--log-level=debug', JSON.stringify(c.args));
        const ps = dep.spec.template.spec;
        check('values: nodeSelector, priorityClassName, imagePullSecrets', ps.nodeSelector.pool === 'ops' &&
              ps.priorityClassName === 'system-cluster-critical' &&
              JSON.stringify(ps.imagePullSecrets) === '[{"name":"regcred"}]', JSON.stringify(ps));
    },
    // image.digest=sha256:<64 x a>, replicaCount=1, crd.keep=false,
    // networkPolicy.enabled=false, rbac.aggregateToDefaultRoles=false
    minimal: (d) => {
        const c = container(d);
        check('digest: image pinned by digest', c.image === `kop@sha256:${'a'.repeat(64)}`, c.image);
        check('one replica: no PDB', find(d, 'Deployment').spec.replicas === 1 && !find(d, 'PodDisruptionBudget'),
              'PDB rendered');
        const crd = find(d, 'CustomResourceDefinition');
        check('crd.keep=false: no resource-policy', !((crd.metadata.annotations || {})['helm.sh/resource-policy']),
              JSON.stringify(crd.metadata.annotations));
        check('networkPolicy.enabled=false: no NetworkPolicy', !find(d, 'NetworkPolicy'), 'rendered');
        const roles = d.filter((o) => o.kind === 'ClusterRole').map((o) => o.metadata.name);
        check('rbac.aggregateToDefaultRoles=false: only kop\'s ClusterRole',
              roles.length === 1 && roles[0] === 'kop-manager-role', roles.join(', '));
    },
    // sharding.enabled=true, namespace.name=kop-other, replicaCount=4,
    // webhook.failurePolicy=Fail, webhook.timeoutSeconds=10,
    // certificates.source=secret (my-tls, CA)
    'sharding-secret': (d) => {
        const ns = 'kop-other';
        const c = container(d);
        check('sharding: --sharding instead of --leader-elect, 4 replicas',
              c.args[0] === '--sharding' && !c.args.includes('--leader-elect') &&
              find(d, 'Deployment').spec.replicas === 4, JSON.stringify(c.args));
        const m = find(d, 'MutatingWebhookConfiguration', 'kop-shard-webhook');
        const w = m && m.webhooks[0];
        check('sharding: the mutating webhook calls kop-webhook-service.kop-other with the Secret\'s CA',
              w && w.clientConfig.service.namespace === ns && w.clientConfig.caBundle === CA &&
              !injectAnnotation(m), JSON.stringify(m && m.metadata));
        check('sharding: the mutating webhook stays Ignore (webhook.failurePolicy is the validating one\'s)',
              w && w.failurePolicy === 'Ignore' && w.timeoutSeconds === 10 &&
              find(d, 'ValidatingWebhookConfiguration').webhooks[0].failurePolicy === 'Fail',
              `${w && w.failurePolicy} ${w && w.timeoutSeconds}`);
        check('sharding: the mutating webhook leaves kop-other out',
              w && JSON.stringify(w.namespaceSelector).includes(`"${ns}"`) &&
              !JSON.stringify(w.namespaceSelector).includes('kop-system'), JSON.stringify(w && w.namespaceSelector));
        const role = find(d, 'Role', 'kop-shard-membership-role');
        const rb = find(d, 'RoleBinding', 'kop-shard-membership-rolebinding');
        const crb = find(d, 'ClusterRoleBinding', 'kop-sharding-rolebinding');
        check('sharding: Lease list in kop-other, label patches cluster-wide, bound to kop in kop-other',
              role && role.metadata.namespace === ns && JSON.stringify(role.rules[0].verbs) === '["list"]' &&
              rb && rb.metadata.namespace === ns && rb.subjects[0].namespace === ns &&
              crb && crb.subjects[0].namespace === ns &&
              JSON.stringify(find(d, 'ClusterRole', 'kop-sharding-role').rules[0].verbs) === '["patch"]',
              JSON.stringify([role && role.metadata, rb && rb.subjects, crb && crb.subjects]));
    },
    // certificates.source=self-signed, replicaCount=3
    'self-signed-replicas': (d) => {
        check('self-signed: one replica whatever replicaCount says', find(d, 'Deployment').spec.replicas === 1 &&
              !find(d, 'PodDisruptionBudget'), String(find(d, 'Deployment').spec.replicas));
    },
};

function cmdCase(name, file) {
    if (!CASES[name]) throw new Error(`no case ${name}`);
    CASES[name](loadDocs(file));
}

function main(argv) {
    try {
        if (argv[0] === 'same' && argv.length === 3) cmdSame(argv[1], argv[2]);
        else if (argv[0] === 'selftest' && argv.length === 3) cmdSelftest(argv[1], argv[2]);
        else if (argv[0] === 'case' && argv.length === 3) cmdCase(argv[1], argv[2]);
        else {
            console.error('usage: node helm.js same|selftest KUSTOMIZE.yaml HELM.yaml | case NAME HELM.yaml');
            return 2;
        }
    } catch (e) {
        fail(`${argv.join(' ')}`, e && e.stack ? e.stack : String(e));
    }
    return failed ? 1 : 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
