// SPDX-License-Identifier: Apache-2.0
//
// The OLM bundle's rules (tests/scripts/test_bundle.sh):
//
//   node bundle.js BUNDLE_DIR RENDERED.yaml
//
// RENDERED.yaml is `kubectl kustomize manifests/`. Checks: exactly one
// ClusterServiceVersion; its required fields; every owned CRD present and
// served in the listed versions, its descriptors' paths in that version's
// schema; install modes (a conversion webhook needs AllNamespaces, and
// nothing else is offered); the install strategy is the kustomize
// Deployment minus the cert volume (OLM mounts its certificate where
// --cert-dir looks); permissions and clusterPermissions equal the kustomize
// Role and ClusterRole; webhook definitions agree with the Deployment's
// port, the ValidatingWebhookConfiguration and the CRD's conversion; no
// cert-manager objects (a CA Certificate, if any, keeps its key);
// metadata/annotations.yaml is complete and bundle.Dockerfile carries the
// same labels. Prints PASS/FAIL lines.
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');
const assert = require('assert');

let failures = 0;
function check(name, ok, why) {
    if (ok) console.log(`PASS ${name}`);
    else {
        failures++;
        console.log(`FAIL ${name}${why ? ': ' + why : ''}`);
    }
}
function equal(a, b) {
    try {
        assert.deepStrictEqual(a, b);
        return true;
    } catch (e) {
        return false;
    }
}
const load = (f) =>
    YAML.parseAllDocuments(fs.readFileSync(f, 'utf8'))
        .map((d) => d.toJSON())
        .filter((o) => o);

const [, , dir, rendered] = process.argv;
const kust = load(rendered);
const kfind = (kind, name) => kust.find((o) => o.kind === kind && (!name || o.metadata.name === name));

// ---- the files -----------------------------------------------------------------
const mdir = path.join(dir, 'manifests');
const files = fs.readdirSync(mdir).filter((f) => /\.ya?ml$/.test(f));
const objs = [];
for (const f of files) {
    const docs = load(path.join(mdir, f));
    check(`bundle/manifests/${f} holds one object`, docs.length === 1, `${docs.length}`);
    objs.push(...docs);
}
check('bundle/manifests/ has only YAML files', fs.readdirSync(mdir).length === files.length);
const csvs = objs.filter((o) => o.kind === 'ClusterServiceVersion');
check('exactly one ClusterServiceVersion', csvs.length === 1, `${csvs.length}`);
if (csvs.length !== 1) process.exit(1);
const csv = csvs[0];
const allowed = ['ClusterServiceVersion', 'CustomResourceDefinition', 'Service', 'ConfigMap', 'Secret',
    'ServiceAccount', 'Role', 'RoleBinding', 'ClusterRole', 'ClusterRoleBinding', 'PrometheusRule',
    'ServiceMonitor', 'PodDisruptionBudget', 'PriorityClass', 'VerticalPodAutoscaler', 'ConsoleYAMLSample',
    'ConsoleQuickStart', 'ConsoleCLIDownload', 'ConsoleLink'];
const bad = objs.filter((o) => !allowed.includes(o.kind)).map((o) => o.kind);
check('only kinds a registry+v1 bundle may carry', bad.length === 0, bad.join(', '));
// OLM issues the webhooks' CA and serving certificate (webhookdefinitions)
// and rotates them itself (docs/operations.md §6.1): no cert-manager object
// in the bundle. Should one ever ship a CA Certificate, it keeps its key
// across renewals as the kustomize one does (a new CA key breaks the pair
// the pods still serve when the caBundles move).
check('no cert-manager objects (OLM issues the webhook certificate)',
    !objs.some((o) => String(o.apiVersion).startsWith('cert-manager.io/')));
for (const o of objs.filter((x) => x.kind === 'Certificate' && x.spec && x.spec.isCA)) {
    const pk = o.spec.privateKey || {};
    check(`CA Certificate ${o.metadata.name} keeps its key across renewals (rotationPolicy Never)`,
        pk.rotationPolicy === 'Never', `rotationPolicy ${pk.rotationPolicy}`);
}

// ---- CSV fields ---------------------------------------------------------------------
const s = csv.spec || {};
const ann = (csv.metadata && csv.metadata.annotations) || {};
check('CSV apiVersion operators.coreos.com/v1alpha1', csv.apiVersion === 'operators.coreos.com/v1alpha1');
check('CSV version is semver', /^\d+\.\d+\.\d+(-[0-9A-Za-z.-]+)?$/.test(String(s.version)), s.version);
check('CSV displayName, description, provider', !!(s.displayName && s.description && s.provider && s.provider.name));
check(
    'CSV maintainers (name, email)',
    Array.isArray(s.maintainers) && s.maintainers.length > 0 && s.maintainers.every((m) => m.name && /@/.test(m.email)),
);
check(
    'CSV links (name, https url)',
    Array.isArray(s.links) && s.links.length > 0 && s.links.every((l) => l.name && /^https:\/\//.test(l.url)),
);
check('CSV minKubeVersion', /^\d+\.\d+\.\d+$/.test(String(s.minKubeVersion)), s.minKubeVersion);
check('CSV keywords and maturity', Array.isArray(s.keywords) && s.keywords.length > 0 && !!s.maturity);
const icon = (s.icon || [])[0] || {};
const iconData = Buffer.from(String(icon.base64data || ''), 'base64').toString('utf8');
check(
    'CSV icon (base64 SVG)',
    icon.mediatype === 'image/svg+xml' && iconData.startsWith('<svg') && iconData.trim().endsWith('</svg>'),
);
check('CSV annotations: capabilities, categories, containerImage, description',
    !!(ann.capabilities && ann.categories && ann.containerImage && ann.description));

// ---- owned CRDs and descriptors ---------------------------------------------------
const crds = objs.filter((o) => o.kind === 'CustomResourceDefinition');
const owned = ((s.customresourcedefinitions || {}).owned || []);
check('CSV owns CRDs', owned.length > 0);
for (const crd of crds) {
    for (const v of crd.spec.versions.filter((x) => x.served)) {
        check(`owned entry for ${crd.metadata.name} ${v.name}`,
            owned.some((o) => o.name === crd.metadata.name && o.version === v.name && o.kind === crd.spec.names.kind));
    }
}
function schemaHas(schema, p) {
    let node = schema;
    for (const part of p.split('.')) {
        if (!node) return false;
        if (node.type === 'array') node = node.items;
        node = node && node.properties && node.properties[part];
    }
    return !!node;
}
for (const o of owned) {
    const crd = crds.find((c) => c.metadata.name === o.name);
    check(`owned CRD ${o.name} is in bundle/manifests/`, !!crd);
    if (!crd) continue;
    const v = crd.spec.versions.find((x) => x.name === o.version);
    check(`owned ${o.name} ${o.version} is served`, !!(v && v.served));
    if (!v) continue;
    const root = v.schema.openAPIV3Schema.properties;
    check(`owned ${o.version}: displayName, description, spec and status descriptors`,
        !!(o.displayName && o.description && (o.specDescriptors || []).length && (o.statusDescriptors || []).length));
    for (const [kind, list] of [['spec', o.specDescriptors || []], ['status', o.statusDescriptors || []]]) {
        const missing = list.filter((d) => !schemaHas(root[kind], d.path) || !d.displayName).map((d) => d.path);
        check(`owned ${o.version}: ${kind} descriptor paths exist in the schema`, missing.length === 0, missing.join(', '));
    }
}
let examples = [];
try {
    examples = JSON.parse(ann['alm-examples']);
} catch (e) {
    examples = null;
}
check('alm-examples: JSON of owned kinds', Array.isArray(examples) && examples.length > 0 &&
    examples.every((e) => owned.some((o) => `${crds[0].spec.group}/${o.version}` === e.apiVersion && o.kind === e.kind)));

// ---- install modes -------------------------------------------------------------------
const modes = Object.fromEntries((s.installModes || []).map((m) => [m.type, m.supported]));
const hasConversion = (s.webhookdefinitions || []).some((w) => w.type === 'ConversionWebhook');
check('installModes lists all four', ['OwnNamespace', 'SingleNamespace', 'MultiNamespace', 'AllNamespaces'].every((m) => m in modes));
check('conversion webhook: AllNamespaces only',
    !hasConversion || (modes.AllNamespaces === true && !modes.OwnNamespace && !modes.SingleNamespace && !modes.MultiNamespace),
    JSON.stringify(modes));

// ---- install strategy: the kustomize Deployment ------------------------------------
const inst = ((s.install || {}).spec) || {};
check('install strategy "deployment"', s.install && s.install.strategy === 'deployment');
const kdep = kfind('Deployment');
const deps = inst.deployments || [];
check('one deployment, named as the kustomize one', deps.length === 1 && deps[0].name === kdep.metadata.name);
const dep = deps[0] || {spec: {template: {spec: {containers: [{}]}}}};
const certDir = '/tmp/k8s-webhook-server/serving-certs';
const kc = kdep.spec.template.spec.containers[0];
const kcert = (kc.volumeMounts || []).find((m) => m.mountPath === certDir);
const expected = JSON.parse(JSON.stringify(kdep.spec));
expected.template.spec.volumes = expected.template.spec.volumes.filter((v) => v.name !== kcert.name);
expected.template.spec.containers[0].volumeMounts = kc.volumeMounts.filter((m) => m.name !== kcert.name);
expected.template.spec.containers[0].image = dep.spec.template.spec.containers[0].image;
check('deployment spec = kustomize spec without the cert volume', equal(dep.spec, expected));
check('containerImage annotation = the deployment image', ann.containerImage === dep.spec.template.spec.containers[0].image);
const c0 = dep.spec.template.spec.containers[0];
check(`--cert-dir is ${certDir}, where OLM mounts its certificate`, (c0.args || []).includes(`--cert-dir=${certDir}`));
check(`nothing else mounted at ${certDir}`, !(c0.volumeMounts || []).some((m) => m.mountPath === certDir));

// ---- RBAC ------------------------------------------------------------------------------
const cr = kfind('ClusterRole', 'kop-manager-role');
const role = kfind('Role');
const saName = kdep.spec.template.spec.serviceAccountName;
check('clusterPermissions = the kustomize ClusterRole',
    equal(inst.clusterPermissions, [{serviceAccountName: saName, rules: cr.rules}]));
check('permissions = the kustomize Role', equal(inst.permissions, [{serviceAccountName: saName, rules: role.rules}]));
check('the ServiceAccount of the permissions is the Deployment\'s', dep.spec.template.spec.serviceAccountName === saName);
// Roles for people (aggregated into view/edit, bound to nobody) ship as
// objects; every other role must be kop's, and so in the CSV.
const aggregated = (o) => Object.keys(o.metadata.labels || {}).some((k) => k.startsWith('rbac.authorization.k8s.io/aggregate-to-'));
const rbacKinds = kust.filter((o) => ['ClusterRole', 'Role'].includes(o.kind) && !aggregated(o)).map((o) => o.metadata.name);
check('the kustomize install has exactly one ClusterRole and one Role for kop', rbacKinds.length === 2, rbacKinds.join(', '));
const userRoles = kust.filter((o) => o.kind === 'ClusterRole' && aggregated(o));
check('the kustomize install has aggregated user ClusterRoles', userRoles.length >= 1);
for (const ur of userRoles) {
    const b = objs.find((o) => o.kind === 'ClusterRole' && o.metadata.name === ur.metadata.name);
    check(`bundle ClusterRole ${ur.metadata.name} = the kustomize one (labels but managed-by)`,
        !!b && equal(b.rules, ur.rules) &&
        Object.keys(ur.metadata.labels).every((k) => k === 'app.kubernetes.io/managed-by' || b.metadata.labels[k] === ur.metadata.labels[k]));
}

// ---- webhooks ------------------------------------------------------------------------
const wds = s.webhookdefinitions || [];
const ports = c0.ports || [];
const vwc = kfind('ValidatingWebhookConfiguration');
for (const w of wds) {
    check(`webhook ${w.generateName}: deployment ${w.deploymentName} is the install's`, w.deploymentName === dep.name);
    check(`webhook ${w.generateName}: containerPort ${w.containerPort} is the webhook-server port`,
        ports.some((p) => p.name === 'webhook-server' && p.containerPort === w.containerPort) &&
        (w.targetPort === undefined || w.targetPort === w.containerPort));
    check(`webhook ${w.generateName}: sideEffects and admissionReviewVersions`,
        ['None', 'NoneOnDryRun'].includes(w.sideEffects) && (w.admissionReviewVersions || []).includes('v1'));
}
for (const kw of vwc.webhooks) {
    const w = wds.find((x) => x.type === 'ValidatingAdmissionWebhook' && x.generateName === kw.name);
    check(`validating webhook ${kw.name} defined`, !!w);
    if (!w) continue;
    check(`validating webhook ${kw.name}: path, rules, policies as in the kustomize configuration`,
        w.webhookPath === kw.clientConfig.service.path && equal(w.rules, kw.rules) &&
        w.failurePolicy === kw.failurePolicy && w.matchPolicy === kw.matchPolicy &&
        w.timeoutSeconds === kw.timeoutSeconds && equal(w.admissionReviewVersions, kw.admissionReviewVersions));
}
check('validating webhook definitions = the kustomize webhooks',
    wds.filter((w) => w.type === 'ValidatingAdmissionWebhook').length === vwc.webhooks.length);
const convCrds = crds.filter((c) => c.spec.conversion && c.spec.conversion.strategy === 'Webhook');
for (const c of convCrds) {
    const w = wds.find((x) => x.type === 'ConversionWebhook' && (x.conversionCRDs || []).includes(c.metadata.name));
    check(`conversion webhook for ${c.metadata.name}`, !!w);
    if (!w) continue;
    check(`conversion webhook for ${c.metadata.name}: path ${c.spec.conversion.webhook.clientConfig.service.path}`,
        w.webhookPath === c.spec.conversion.webhook.clientConfig.service.path);
    check(`conversion webhook for ${c.metadata.name}: review versions`,
        equal(w.admissionReviewVersions, c.spec.conversion.webhook.conversionReviewVersions));
}
for (const w of wds.filter((x) => x.type === 'ConversionWebhook')) {
    const missing = (w.conversionCRDs || []).filter((n) => !convCrds.some((c) => c.metadata.name === n));
    check(`conversion webhook ${w.generateName}: its CRDs are in the bundle with Webhook conversion`,
        (w.conversionCRDs || []).length > 0 && missing.length === 0, missing.join(', '));
}

// ---- the CRD is the kustomize one, without cert-manager ------------------------
const kcrd = kfind('CustomResourceDefinition');
const bcrd = crds.find((c) => c.metadata.name === kcrd.metadata.name);
check('CRD spec = the kustomize CRD spec', !!bcrd && equal(bcrd.spec, kcrd.spec));
check('CRD has no cert-manager annotation',
    !!bcrd && !Object.keys((bcrd.metadata && bcrd.metadata.annotations) || {}).some((k) => k.startsWith('cert-manager.io/')));

// ---- metadata and bundle.Dockerfile ---------------------------------------------------
const meta = load(path.join(dir, 'metadata', 'annotations.yaml'))[0] || {};
const a = meta.annotations || {};
const keys = ['mediatype.v1', 'manifests.v1', 'metadata.v1', 'package.v1', 'channels.v1', 'channel.default.v1']
    .map((k) => `operators.operatorframework.io.bundle.${k}`);
check('annotations.yaml has the six bundle annotations', keys.every((k) => typeof a[k] === 'string' && a[k]),
    keys.filter((k) => !a[k]).join(', '));
check('media type registry+v1', a[keys[0]] === 'registry+v1');
check('manifests/ and metadata/ directories', a[keys[1]] === 'manifests/' && a[keys[2]] === 'metadata/');
check('default channel is one of the channels', String(a[keys[4]]).split(',').includes(a[keys[5]]));
check('CSV name is <package>.v<version>', csv.metadata.name === `${a[keys[3]]}.v${s.version}`, csv.metadata.name);
const df = fs.readFileSync(path.join(dir, 'bundle.Dockerfile'), 'utf8').split('\n');
const labels = Object.fromEntries(df.filter((l) => l.startsWith('LABEL ')).map((l) => l.slice(6).split('=')));
check('bundle.Dockerfile: FROM scratch', df.filter((l) => l.startsWith('FROM ')).join() === 'FROM scratch');
check('bundle.Dockerfile: the same labels as annotations.yaml', equal(labels, a));
check('bundle.Dockerfile: copies manifests/ and metadata/',
    df.includes('COPY manifests /manifests/') && df.includes('COPY metadata /metadata/'));

process.exit(failures ? 1 : 0);
