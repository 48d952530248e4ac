// SPDX-License-Identifier: Apache-2.0
//
// Writes kop's OLM bundle (registry+v1) from the rendered default install:
//
//   node scripts/bundle/gen.js RENDERED.yaml OUTDIR
//
// RENDERED.yaml is `kubectl kustomize manifests/`; scripts/gen-bundle.sh
// runs this. OUTDIR gets manifests/ (the ClusterServiceVersion, the CRD, the
// metrics Service, the aggregated user ClusterRoles), metadata/annotations.yaml and bundle.Dockerfile. What
// the kustomize output does not say (descriptions, descriptors, package) is
// in scripts/bundle/csv.yaml; the icon is scripts/bundle/icon.svg.
//
// From the kustomize output:
//   * install strategy: the Deployment's spec, without the cert volume and
//     its mount (OLM mounts its own serving certificate at the same path,
//     /tmp/k8s-webhook-server/serving-certs, and a second mount there would
//     be refused);
//   * clusterPermissions: the ClusterRole's rules; permissions: the Role's
//     (the Lease, in the install namespace), both for the ServiceAccount;
//   * webhookdefinitions: the ValidatingWebhookConfiguration's webhook and
//     the CRD's conversion webhook, on the Deployment's webhook-server
//     port, with their paths;
//   * the CRD without the cert-manager annotation (OLM injects the CA);
//   * the metrics Service;
//   * the ClusterRoles that aggregate MyResources into view/edit/admin
//     (ClusterRole is a registry+v1 bundle kind; OLM creates them as they
//     are).
// Not in the bundle: the Namespace (OLM installs into the OperatorGroup's),
// the cert-manager objects, the webhook Service (OLM makes its own), the
// ServiceAccount and kop's own RBAC objects (OLM makes them from the CSV), the PDB
// and the NetworkPolicies (not registry+v1 bundle kinds every OLM accepts).
'use strict';
const fs = require('fs');
const path = require('path');
const YAML = require('yaml');

const [, , rendered, outDir] = process.argv;
if (!rendered || !outDir) {
    console.error('usage: gen.js RENDERED.yaml OUTDIR');
    process.exit(2);
}
const here = __dirname;
const top = path.resolve(here, '..', '..');
const meta = YAML.parse(fs.readFileSync(path.join(here, 'csv.yaml'), 'utf8'));
const docs = YAML.parseAllDocuments(fs.readFileSync(rendered, 'utf8'))
    .map((d) => d.toJSON())
    .filter((o) => o && o.kind);

function one(kind, name) {
    const found = docs.filter((o) => o.kind === kind && (!name || o.metadata.name === name));
    if (found.length !== 1) throw new Error(`expected one ${kind}${name ? ' ' + name : ''}, found ${found.length}`);
    return JSON.parse(JSON.stringify(found[0]));
}
const clone = (o) => JSON.parse(JSON.stringify(o));

// Labels: the kustomize ones minus managed-by (OLM manages these objects).
function relabel(labels) {
    const l = Object.assign({}, labels || {});
    delete l['app.kubernetes.io/managed-by'];
    return l;
}

const dep = one('Deployment');
const crd = one('CustomResourceDefinition');
const vwc = one('ValidatingWebhookConfiguration');
const clusterRole = one('ClusterRole', 'kop-manager-role');
// The ClusterRoles that put MyResources into the built-in view/edit/admin
// (manifests/base/rbac-users.yaml): bound to nobody, shipped as they are.
const userRoles = docs
    .filter((o) => o.kind === 'ClusterRole' && Object.keys(o.metadata.labels || {}).some((k) =>
        k.startsWith('rbac.authorization.k8s.io/aggregate-to-')))
    .map(clone);
const role = one('Role');
const sa = one('ServiceAccount');
const metricsSvc = one('Service', 'kop-metrics-service');
const samples = ['myresource.yaml', 'myresource-v2.yaml'].map((f) =>
    YAML.parse(fs.readFileSync(path.join(top, 'manifests', 'samples', f), 'utf8')),
);

const container = dep.spec.template.spec.containers[0];
const image = process.env.KOP_BUNDLE_IMAGE || container.image;
const version = image.includes(':') ? image.slice(image.lastIndexOf(':') + 1) : '0.0.0';

// ---- the Deployment, as OLM runs it ---------------------------------------
const depSpec = clone(dep.spec);
const pod = depSpec.template.spec;
const certMount = container.volumeMounts.find((m) => m.mountPath === '/tmp/k8s-webhook-server/serving-certs');
if (!certMount) throw new Error('the Deployment mounts nothing at /tmp/k8s-webhook-server/serving-certs');
pod.volumes = pod.volumes.filter((v) => v.name !== certMount.name);
for (const c of pod.containers) {
    c.image = c.name === container.name ? image : c.image;
    c.volumeMounts = (c.volumeMounts || []).filter((m) => m.name !== certMount.name);
}
const webhookPort = container.ports.find((p) => p.name === 'webhook-server');
if (!webhookPort) throw new Error('the Deployment has no webhook-server port');

// ---- webhooks ----------------------------------------------------------------
const webhookdefinitions = vwc.webhooks.map((w) => {
    const d = {
        type: 'ValidatingAdmissionWebhook',
        generateName: w.name,
        deploymentName: dep.metadata.name,
        containerPort: webhookPort.containerPort,
        targetPort: webhookPort.containerPort,
        webhookPath: w.clientConfig.service.path,
        admissionReviewVersions: w.admissionReviewVersions,
        sideEffects: w.sideEffects,
        failurePolicy: w.failurePolicy,
        matchPolicy: w.matchPolicy,
        timeoutSeconds: w.timeoutSeconds,
        rules: w.rules,
    };
    return d;
});
const conv = crd.spec.conversion;
if (conv && conv.strategy === 'Webhook') {
    webhookdefinitions.push({
        type: 'ConversionWebhook',
        generateName: `c${crd.spec.names.singular}.${crd.spec.group}`,
        deploymentName: dep.metadata.name,
        containerPort: webhookPort.containerPort,
        targetPort: webhookPort.containerPort,
        webhookPath: conv.webhook.clientConfig.service.path,
        admissionReviewVersions: conv.webhook.conversionReviewVersions,
        sideEffects: 'None',
        conversionCRDs: [crd.metadata.name],
    });
}

// ---- the owned CRD -----------------------------------------------------------
const owned = crd.spec.versions
    .filter((v) => v.served)
    .map((v) => {
        const m = meta.owned[v.name];
        if (!m) throw new Error(`scripts/bundle/csv.yaml has no descriptors for ${v.name}`);
        return {
            name: crd.metadata.name,
            version: v.name,
            kind: crd.spec.names.kind,
            displayName: m.displayName,
            description: m.description,
            resources: [
                {kind: 'Deployment', name: '', version: 'v1'},
                {kind: 'Service', name: '', version: 'v1'},
            ],
            specDescriptors: m.specDescriptors,
            statusDescriptors: m.statusDescriptors,
        };
    });

// ---- the CSV -----------------------------------------------------------------
const icon = fs.readFileSync(path.join(here, 'icon.svg'));
const csvName = `${meta.package}.v${version}`;
const csv = {
    apiVersion: 'operators.coreos.com/v1alpha1',
    kind: 'ClusterServiceVersion',
    metadata: {
        name: csvName,
        annotations: {
            'alm-examples': JSON.stringify(samples, null, 2),
            capabilities: meta.capabilities,
            categories: meta.categories,
            containerImage: image,
            description: meta.shortDescription,
            'operators.operatorframework.io/suggested-namespace': dep.metadata.namespace,
            repository: meta.links.find((l) => l.name === 'Source').url,
            support: meta.provider.name,
        },
        labels: {
            'operatorframework.io/arch.amd64': 'supported',
            'operatorframework.io/os.linux': 'supported',
        },
    },
    spec: {
        displayName: meta.displayName,
        description: meta.description,
        version,
        minKubeVersion: meta.minKubeVersion,
        maturity: meta.maturity,
        keywords: meta.keywords,
        provider: meta.provider,
        maintainers: meta.maintainers,
        links: meta.links,
        icon: [{base64data: icon.toString('base64'), mediatype: 'image/svg+xml'}],
        // A conversion webhook serves every namespace's objects: OLM allows
        // it only with AllNamespaces.
        installModes: [
            {type: 'OwnNamespace', supported: false},
            {type: 'SingleNamespace', supported: false},
            {type: 'MultiNamespace', supported: false},
            {type: 'AllNamespaces', supported: true},
        ],
        customresourcedefinitions: {owned},
        install: {
            strategy: 'deployment',
            spec: {
                clusterPermissions: [{serviceAccountName: sa.metadata.name, rules: clusterRole.rules}],
                permissions: [{serviceAccountName: sa.metadata.name, rules: role.rules}],
                deployments: [{name: dep.metadata.name, label: relabel(dep.metadata.labels), spec: depSpec}],
            },
        },
        webhookdefinitions,
    },
};

// ---- the CRD and the metrics Service -------------------------------------------
const bcrd = clone(crd);
delete bcrd.metadata.annotations['cert-manager.io/inject-ca-from'];
if (!Object.keys(bcrd.metadata.annotations).length) delete bcrd.metadata.annotations;
bcrd.metadata.labels = relabel(bcrd.metadata.labels);
// OLM rewrites the conversion client config for the CSV's webhook; the
// service reference here is the kustomize one.

const svc = clone(metricsSvc);
delete svc.metadata.namespace;
svc.metadata.labels = relabel(svc.metadata.labels);
for (const r of userRoles) r.metadata.labels = relabel(r.metadata.labels);

// ---- writing -----------------------------------------------------------------
const header = '# Generated by scripts/gen-bundle.sh from `kubectl kustomize manifests/`; do not edit.\n';
function write(rel, text) {
    const f = path.join(outDir, rel);
    fs.mkdirSync(path.dirname(f), {recursive: true});
    fs.writeFileSync(f, text);
}
const dump = (o) => header + YAML.stringify(o, {lineWidth: 0, aliasDuplicateObjects: false});

const annotations = {
    'operators.operatorframework.io.bundle.mediatype.v1': 'registry+v1',
    'operators.operatorframework.io.bundle.manifests.v1': 'manifests/',
    'operators.operatorframework.io.bundle.metadata.v1': 'metadata/',
    'operators.operatorframework.io.bundle.package.v1': meta.package,
    'operators.operatorframework.io.bundle.channels.v1': meta.channels.join(','),
    'operators.operatorframework.io.bundle.channel.default.v1': meta.defaultChannel,
};

write(`manifests/${meta.package}.clusterserviceversion.yaml`, dump(csv));
write(`manifests/${crd.spec.group}_${crd.spec.names.plural}.yaml`, dump(bcrd));
write(`manifests/${svc.metadata.name}_v1_service.yaml`, dump(svc));
for (const r of userRoles) write(`manifests/${r.metadata.name}_rbac.authorization.k8s.io_v1_clusterrole.yaml`, dump(r));
write('metadata/annotations.yaml', dump({annotations}));
write(
    'bundle.Dockerfile',
    [
        '# SPDX-License-Identifier: Apache-2.0',
        header.trimEnd(),
        '#',
        '# The bundle image (OLM registry+v1), built from this directory:',
        '#   buildah bud -f bundle/bundle.Dockerfile -t kop-bundle:' + version + ' bundle/',
        'FROM scratch',
        '',
        ...Object.entries(annotations).map(([k, v]) => `LABEL ${k}=${v}`),
        '',
        'COPY manifests /manifests/',
        'COPY metadata /metadata/',
        '',
    ].join('\n'),
);
