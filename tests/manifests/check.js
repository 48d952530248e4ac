// SPDX-License-Identifier: Apache-2.0
//
// Checks of kop's rendered manifests (the output of `kubectl kustomize`),
// run by tests/scripts/test_manifests.sh:
//
//   node check.js schema FILE          every object against the official
//                                      Kubernetes / cert-manager schemas
//   node check.js install FILE         the default install hangs together
//   node check.js self-signed FILE     the self-signed overlay does too
//     (install and self-signed take an optional last argument: the
//     app.kubernetes.io/managed-by label the objects carry, "kustomize"
//     unless told; the Helm chart's renderings carry "Helm")
//   node check.js storage-v2 FILE      so does the storage-v2 overlay
//   node check.js fleet FILE DEFAULT   the fleet overlay is the default
//                                      install (DEFAULT, its rendering)
//                                      plus --cluster-secrets and a Role
//                                      reading Secrets in kop-system
//   node check.js member FILE DEFAULT CLUSTER URL CABUNDLE
//                                      a member cluster's install: the CRD
//                                      and webhook of DEFAULT calling URL
//                                      (webhook path .../clusters/CLUSTER)
//                                      with CABUNDLE, kop's RBAC without
//                                      Lease or Secret rights, its token
//   node check.js selftest FILE        "schema" rejects broken copies of
//                                      FILE's objects (the check can fail)
//
// "schema" uses two views of the same upstream OpenAPI definitions, as
// packaged by kubernetes-models and @kubernetes-models/cert-manager:
//   * the models' JSON-schema validators (types, required fields, enums,
//     formats such as quantities and DNS names);
//   * the models' TypeScript declarations, compiled with tsc against the
//     object as a literal: excess-property checking rejects unknown fields
//     at any depth (kubectl --validate=strict would, the validators do
//     not) and a wrong type anywhere.
// Custom resources whose CRD is in the same input (MyResource samples) have
// no model: they are reported as skipped; kubesim checks them against the
// CRD's structural schema.
//
// Output: one line per check, "PASS name" or "FAIL name: why" (the shell
// test counts them); exit status 1 when any check failed, 2 on bad usage.
'use strict';

const fs = require('fs');
const path = require('path');
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
    const docs = YAML.parseAllDocuments(fs.readFileSync(file, 'utf8'));
    const out = [];
    for (const d of docs) {
        if (d.errors.length) throw new Error(`${file}: ${d.errors[0].message}`);
        const v = d.toJS();
        if (v !== null && v !== undefined) out.push(v);
    }
    return out;
}

function idOf(o) {
    const md = o.metadata || {};
    return `${o.kind}/${md.namespace ? md.namespace + '/' : ''}${md.name}`;
}

// ---- schema ----------------------------------------------------------------

// The module (without the kind) that holds the model of an apiVersion.
function modelModule(apiVersion) {
    if (apiVersion === 'v1') return 'kubernetes-models/v1';
    const [group, version] = apiVersion.split('/');
    if (!version) return null;
    if (group === 'cert-manager.io') return `@kubernetes-models/cert-manager/cert-manager.io/${version}`;
    if (group === 'monitoring.coreos.com')
        return `@kubernetes-models/prometheus-operator/monitoring.coreos.com/${version}`;
    if (group.includes('.') && !group.endsWith('.k8s.io')) return null; // custom resource
    return `kubernetes-models/${group}/${version}`;
}

function resolveModel(o) {
    const mod = modelModule(String(o.apiVersion || ''));
    if (!mod || !/^[A-Za-z0-9]+$/.test(String(o.kind || ''))) return null;
    const file = `${mod}/${o.kind}`;
    try {
        require.resolve(file);
    } catch (e) {
        return null;
    }
    return {file, cls: require(file)[o.kind]};
}

function ajvMessage(err) {
    const es = (err && err.errors) || [];
    if (!es.length) return String(err && err.message);
    return es
        .slice(0, 5)
        .map((e) => `${e.instancePath || '/'} ${e.message}`)
        .join('; ');
}

// Compiles one TypeScript file that assigns every object, as a literal, to
// its model's interface. Returns a map: object index -> [messages].
function typeCheck(entries) {
    const ts = require('typescript');
    // One import per object, then one literal per object; owner[line] is
    // the object a line of the generated text belongs to (-1: imports).
    const chunks = entries.map((e, i) => `import type { I${e.kind} as T${i} } from ${JSON.stringify(e.file)};`);
    entries.forEach((e, i) => chunks.push(`export const o${i}: T${i} = ${JSON.stringify(e.obj, null, 2)};`));
    const text = chunks.join('\n') + '\n';
    const owner = [];
    chunks.forEach((chunk, idx) => {
        const obj = idx >= entries.length ? idx - entries.length : -1;
        for (let l = 0; l < chunk.split('\n').length; l++) owner.push(obj);
    });

    // A virtual source file next to node_modules, so module resolution finds
    // the packages; nothing is written to disk.
    const virt = path.join(__dirname, '__rendered__.ts');
    const options = {
        noEmit: true,
        strict: true,
        skipLibCheck: true,
        types: [],
        target: ts.ScriptTarget.ES2020,
        module: ts.ModuleKind.CommonJS,
        moduleResolution: ts.ModuleResolutionKind.Node10,
    };
    const host = ts.createCompilerHost(options);
    const getSourceFile = host.getSourceFile.bind(host);
    host.getSourceFile = (name, lang, onError) =>
        name === virt ? ts.createSourceFile(name, text, lang) : getSourceFile(name, lang, onError);
    const fileExists = host.fileExists.bind(host);
    host.fileExists = (name) => name === virt || fileExists(name);
    const readFile = host.readFile.bind(host);
    host.readFile = (name) => (name === virt ? text : readFile(name));

    const program = ts.createProgram([virt], options, host);
    const result = new Map();
    for (const d of ts.getPreEmitDiagnostics(program)) {
        const msg = ts.flattenDiagnosticMessageText(d.messageText, ' ');
        let obj = -1;
        if (d.file && d.file.fileName === virt && d.start !== undefined) {
            obj = owner[d.file.getLineAndCharacterOfPosition(d.start).line];
        }
        if (obj === undefined || obj < 0) obj = -1;
        if (!result.has(obj)) result.set(obj, []);
        result.get(obj).push(msg);
    }
    return result;
}

// Checks docs against their models. Returns one entry per object:
// {name, error} where error is null (valid), 'skip' (custom resource whose
// CRD is among docs) or the reason it is invalid.
function schemaCheck(docs) {
    const crdKinds = new Set(
        docs
            .filter((o) => o.kind === 'CustomResourceDefinition')
            .map((o) => `${o.spec.group}/${o.spec.names.kind}`),
    );
    const out = [];
    const typed = [];
    for (const o of docs) {
        const r = {name: `schema ${idOf(o)}`, error: null};
        out.push(r);
        const m = resolveModel(o);
        if (!m) {
            const group = String(o.apiVersion || '').split('/')[0];
            r.error = crdKinds.has(`${group}/${o.kind}`) ? 'skip' : `no schema known for ${o.apiVersion} ${o.kind}`;
            continue;
        }
        try {
            new m.cls(o).validate();
        } catch (e) {
            r.error = ajvMessage(e);
            continue;
        }
        typed.push({r, kind: o.kind, file: m.file, obj: o});
    }
    const errors = typeCheck(typed);
    typed.forEach((e, i) => {
        if (errors.has(i)) e.r.error = 'tsc: ' + errors.get(i).join(' | ');
    });
    if (errors.has(-1)) out.push({name: 'schema type check', error: errors.get(-1).join(' | ')});
    return out;
}

function cmdSchema(file) {
    for (const r of schemaCheck(loadDocs(file))) {
        if (r.error === 'skip') console.log(`SKIP ${r.name}: custom resource (its CRD's schema is checked by kubesim)`);
        else check(r.name, r.error === null, r.error);
    }
}

// ---- consistency of the install ------------------------------------------

function find(docs, kind, name) {
    return docs.find((o) => o.kind === kind && o.metadata && o.metadata.name === name);
}

function labelsMatch(selector, labels) {
    return Object.entries(selector || {}).every(([k, v]) => (labels || {})[k] === v);
}

function commonChecks(docs, mode, manager) {
    const ns = find(docs, 'Namespace', 'kop-system');
    check('namespace kop-system', !!ns, 'missing');

    for (const o of docs) {
        const l = (o.metadata && o.metadata.labels) || {};
        const want = {
            'app.kubernetes.io/name': 'kop',
            'app.kubernetes.io/part-of': 'kop',
            'app.kubernetes.io/managed-by': manager,
        };
        const bad = Object.entries(want).filter(([k, v]) => l[k] !== v);
        if (!l['app.kubernetes.io/component'] && o.kind !== 'CustomResourceDefinition' &&
            o.kind !== 'ValidatingWebhookConfiguration')
            bad.push(['app.kubernetes.io/component', '(any)']);
        check(`labels ${idOf(o)}`, bad.length === 0, `missing ${bad.map((b) => b[0]).join(', ')}`);
        if (o.metadata && o.metadata.namespace)
            check(`namespace of ${idOf(o)}`, o.metadata.namespace === 'kop-system', 'not kop-system');
    }

    // CRD (docs/api.md §1).
    const crd = find(docs, 'CustomResourceDefinition', 'myresources.mygroup.example.com');
    if (!crd) {
        fail('crd', 'missing');
    } else {
        const s = crd.spec;
        const vs = Object.fromEntries(s.versions.map((v) => [v.name, v]));
        check('crd names', s.names.plural === 'myresources' && s.names.kind === 'MyResource' &&
              s.names.singular === 'myresource' && (s.names.shortNames || []).includes('myr') &&
              s.scope === 'Namespaced', JSON.stringify(s.names));
        // The storage-v2 overlay flips the storage version; both stay served.
        const want = mode === 'storage-v2' ? 'v2' : 'v1';
        check('crd versions', vs.v1 && vs.v1.served && vs.v2 && vs.v2.served && vs[want].storage &&
              s.versions.filter((v) => v.storage).length === 1,
              `${want} storage, both served`);
        check('crd status subresource', vs.v1 && vs.v2 && vs.v1.subresources &&
              vs.v1.subresources.status && vs.v2.subresources && vs.v2.subresources.status, 'missing');
        check('crd printer columns', vs.v1 && vs.v2 && (vs.v1.additionalPrinterColumns || []).length &&
              (vs.v2.additionalPrinterColumns || []).length, 'missing');
        const spec1 = vs.v1.schema.openAPIV3Schema.properties.spec.properties;
        const spec2 = vs.v2.schema.openAPIV3Schema.properties.spec.properties;
        check('crd v1 defaults', spec1.replicas.default === 1 && spec1.image.default === 'nginx:1.14.2' &&
              spec1.port.default === 80 && spec1.serviceType.default === 'ClusterIP', 'docs/api.md §1.4');
        check('crd v2 defaults', spec2.replicas.default === 1 &&
              JSON.stringify(spec2.image.default) === '{"repository":"nginx","tag":"1.14.2"}' &&
              JSON.stringify(spec2.ports.default) === '[{"name":"http","port":80,"protocol":"TCP"}]' &&
              spec2.ports.items.properties.protocol.default === 'TCP' &&
              spec2.service.default.type === 'ClusterIP' && spec2.paused.default === false,
              'docs/api.md §1.4');
        const conv = s.conversion || {};
        const svc = (((conv.webhook || {}).clientConfig || {}).service) || {};
        check('crd conversion webhook', conv.strategy === 'Webhook' && svc.name === 'kop-webhook-service' &&
              svc.namespace === 'kop-system' && svc.path === '/convert' && svc.port === 443 &&
              JSON.stringify(conv.webhook.conversionReviewVersions) === '["v1","v1beta1"]',
              JSON.stringify(conv));
    }

    // Validating webhook (docs/api.md §4.1).
    const vwc = find(docs, 'ValidatingWebhookConfiguration', 'kop-validating-webhook');
    if (!vwc) {
        fail('validating webhook', 'missing');
    } else {
        const w = vwc.webhooks[0];
        const svc = w.clientConfig.service || {};
        const r = w.rules[0];
        const nsSel = JSON.stringify(w.namespaceSelector);
        check('validating webhook', vwc.webhooks.length === 1 && svc.name === 'kop-webhook-service' &&
              svc.namespace === 'kop-system' && svc.port === 443 &&
              svc.path === '/validate-mygroup-example-com-myresource' &&
              w.sideEffects === 'None' && w.failurePolicy === 'Fail' && w.matchPolicy === 'Equivalent' &&
              w.timeoutSeconds === 5 && JSON.stringify(r.operations) === '["CREATE","UPDATE"]' &&
              JSON.stringify(r.apiVersions) === '["v1","v2"]' &&
              JSON.stringify(r.resources) === '["myresources"]' &&
              nsSel.includes('kube-system') && nsSel.includes('kop-system'), JSON.stringify(w));
    }

    // Services -> pods.
    const dep = find(docs, 'Deployment', 'kop-controller-manager');
    if (!dep) {
        fail('deployment', 'missing');
        return {};
    }
    const pod = dep.spec.template;
    const c = pod.spec.containers[0];
    const portNames = new Set((c.ports || []).map((p) => p.name));
    check('deployment selector matches its pods', labelsMatch(dep.spec.selector.matchLabels, pod.metadata.labels),
          'selector does not select the template');
    const wsvc = find(docs, 'Service', 'kop-webhook-service');
    check('webhook service 443 -> webhook-server (9443)', wsvc && labelsMatch(wsvc.spec.selector, pod.metadata.labels) &&
          wsvc.spec.ports.some((p) => p.port === 443 && p.targetPort === 'webhook-server') &&
          c.ports.some((p) => p.name === 'webhook-server' && p.containerPort === 9443),
          'service, selector or ports wrong');
    const msvc = find(docs, 'Service', 'kop-metrics-service');
    check('metrics service 8080', msvc && labelsMatch(msvc.spec.selector, pod.metadata.labels) &&
          msvc.spec.ports.some((p) => p.port === 8080 && portNames.has(p.targetPort)) &&
          c.ports.some((p) => p.name === 'metrics' && p.containerPort === 8080), 'service, selector or ports wrong');

    // Pod hardening (restricted Pod Security Standard and more).
    const psc = pod.spec.securityContext || {};
    const csc = c.securityContext || {};
    check('pod security', psc.runAsNonRoot === true && psc.runAsUser === 65532 &&
          (psc.seccompProfile || {}).type === 'RuntimeDefault' && csc.readOnlyRootFilesystem === true &&
          csc.allowPrivilegeEscalation === false && JSON.stringify((csc.capabilities || {}).drop) === '["ALL"]' &&
          !(csc.capabilities || {}).add && csc.privileged !== true && !pod.spec.hostNetwork &&
          !pod.spec.hostPID && !pod.spec.hostIPC, JSON.stringify({psc, csc}));
    const args = c.args || [];
    for (const a of ['--leader-elect', '--cert-dir=/tmp/k8s-webhook-server/serving-certs',
                     '--metrics-bind-address=:8080', '--health-probe-bind-address=:8081'])
        check(`deployment arg ${a}`, args.includes(a), JSON.stringify(args));
    check('probes on 8081', c.livenessProbe && c.livenessProbe.httpGet.path === '/healthz' &&
          c.readinessProbe && c.readinessProbe.httpGet.path === '/readyz' &&
          [c.livenessProbe.httpGet.port, c.readinessProbe.httpGet.port].every(
              (p) => p === 8081 || c.ports.some((q) => q.name === p && q.containerPort === 8081)),
          'liveness /healthz, readiness /readyz on 8081');
    const env = Object.fromEntries((c.env || []).map((e) => [e.name, e]));
    check('downward API env', env.POD_NAMESPACE && env.POD_NAMESPACE.valueFrom.fieldRef.fieldPath === 'metadata.namespace' &&
          env.POD_NAME && env.POD_NAME.valueFrom.fieldRef.fieldPath === 'metadata.name', 'POD_NAMESPACE/POD_NAME');
    const res = c.resources || {};
    check('resources', res.requests && res.requests.memory === '32Mi' && res.requests.cpu === '10m' &&
          res.limits && res.limits.memory === '128Mi', JSON.stringify(res));
    check('termination grace above --shutdown-timeout (30s)', pod.spec.terminationGracePeriodSeconds > 30,
          String(pod.spec.terminationGracePeriodSeconds));
    check('image kop:0.1.0', c.image === 'kop:0.1.0', c.image);

    // The API token: one projected source, in the manager container only.
    const sa = find(docs, 'ServiceAccount', pod.spec.serviceAccountName);
    check('service account kop', pod.spec.serviceAccountName === 'kop' && !!sa, 'missing');
    const projected = (pod.spec.volumes || []).find((v) => v.projected &&
        v.projected.sources.some((s) => s.serviceAccountToken));
    check('api token mounted as needed', pod.spec.automountServiceAccountToken === true ||
          (projected && (c.volumeMounts || []).some((m) => m.name === projected.name &&
           m.mountPath === '/var/run/secrets/kubernetes.io/serviceaccount')), 'kop has no token');

    // Cert dir.
    const certMount = (c.volumeMounts || []).find((m) => m.mountPath === '/tmp/k8s-webhook-server/serving-certs');
    const certVol = certMount && (pod.spec.volumes || []).find((v) => v.name === certMount.name);
    check('cert dir mounted without subPath', !!certVol && !certMount.subPath, 'missing');

    // RBAC wiring: every binding names an existing role and the kop account.
    for (const b of docs.filter((o) => o.kind === 'ClusterRoleBinding' || o.kind === 'RoleBinding')) {
        const role = find(docs, b.roleRef.kind, b.roleRef.name);
        check(`${idOf(b)} wiring`, !!role && b.subjects.length === 1 && b.subjects[0].kind === 'ServiceAccount' &&
              b.subjects[0].name === 'kop' && b.subjects[0].namespace === 'kop-system' &&
              (b.kind === 'ClusterRoleBinding' || role.metadata.namespace === b.metadata.namespace),
              'role missing or subject wrong');
    }
    // Roles for people, aggregated into the built-in view/edit (rbac-users.yaml):
    // bound to nobody here, MyResources only, status read-only, no wildcards.
    const aggregated = (r) => Object.keys(r.metadata.labels || {}).some((k) =>
        k.startsWith('rbac.authorization.k8s.io/aggregate-to-'));
    for (const r of docs.filter((o) => o.kind === 'ClusterRole' && aggregated(o))) {
        const bound = docs.some((b) => (b.kind === 'ClusterRoleBinding' || b.kind === 'RoleBinding') &&
                                      b.roleRef.name === r.metadata.name);
        const only = r.rules.every((x) => (x.apiGroups || []).length === 1 && x.apiGroups[0] === 'mygroup.example.com' &&
                                          (x.resources || []).every((res) => res === 'myresources' || res === 'myresources/status') &&
                                          !(x.verbs || []).includes('*'));
        const statusWrite = r.rules.some((x) => (x.resources || []).includes('myresources/status') &&
                                                (x.verbs || []).some((v) => !['get', 'list', 'watch'].includes(v)));
        check(`${idOf(r)} aggregated user role: unbound, MyResources only, status read-only`,
              !bound && only && !statusWrite, bound ? 'bound' : only ? 'status written' : 'other resources or wildcard');
    }
    // The fleet overlay's Role reads Secrets on purpose (cmdFleet checks it
    // rule by rule); nothing else may.
    const fleetRole = (r) => mode === 'fleet' && r.kind === 'Role' && r.metadata.name === 'kop-cluster-secrets-role';
    for (const r of docs.filter((o) => (o.kind === 'ClusterRole' && !aggregated(o)) || o.kind === 'Role')) {
        const wild = r.rules.some((x) => [x.verbs, x.resources, x.apiGroups].some((l) => (l || []).includes('*')));
        const secrets = !fleetRole(r) && r.rules.some((x) => (x.resources || []).includes('secrets'));
        const del = r.rules.some((x) => (x.verbs || []).some((v) => v === 'delete' || v === 'deletecollection'));
        check(`${idOf(r)} least privilege`, !wild && !secrets && !del, 'wildcard, secrets or delete granted');
    }
    return {dep, pod, c, certVol, certMount, crd, vwc};
}

function cmdInstall(file, manager = 'kustomize') {
    const docs = loadDocs(file);
    const {dep, pod, crd, vwc, certVol} = commonChecks(docs, 'install', manager);
    if (!dep) return;
    check('2 replicas', dep.spec.replicas === 2, String(dep.spec.replicas));
    const aff = ((pod.spec.affinity || {}).podAntiAffinity || {}).preferredDuringSchedulingIgnoredDuringExecution || [];
    check('preferred anti-affinity on hostname', aff.some((t) => t.podAffinityTerm.topologyKey === 'kubernetes.io/hostname' &&
          labelsMatch(t.podAffinityTerm.labelSelector.matchLabels, pod.metadata.labels)), 'missing');
    const pdb = docs.find((o) => o.kind === 'PodDisruptionBudget');
    check('pdb minAvailable 1 selects the pods', pdb && pdb.spec.minAvailable === 1 &&
          labelsMatch(pdb.spec.selector.matchLabels, pod.metadata.labels), 'missing or wrong');

    // cert-manager chain: selfSigned Issuer -> CA Certificate -> CA Issuer -> serving Certificate.
    const serving = find(docs, 'Certificate', 'kop-serving-cert');
    const caIssuer = serving && find(docs, 'Issuer', serving.spec.issuerRef.name);
    const caSecret = caIssuer && caIssuer.spec.ca && caIssuer.spec.ca.secretName;
    const caCert = docs.find((o) => o.kind === 'Certificate' && o.spec.secretName === caSecret);
    const root = caCert && find(docs, 'Issuer', caCert.spec.issuerRef.name);
    check('certificate chain', serving && caIssuer && caCert && caCert.spec.isCA === true && root &&
          root.spec.selfSigned !== undefined, 'selfSigned Issuer -> CA Certificate -> CA Issuer -> serving cert');
    if (serving) {
        const sp = serving.spec;
        check('serving cert names', JSON.stringify([...sp.dnsNames].sort()) ===
              JSON.stringify(['kop-webhook-service.kop-system.svc', 'kop-webhook-service.kop-system.svc.cluster.local']),
              JSON.stringify(sp.dnsNames));
        check('serving cert ECDSA P-256', sp.privateKey && sp.privateKey.algorithm === 'ECDSA' && sp.privateKey.size === 256,
              JSON.stringify(sp.privateKey));
        const hours = (d) => Number((/^(\d+)h$/.exec(d || '') || [])[1]);
        check('serving cert renewed before expiry', hours(sp.duration) > 0 && hours(sp.renewBefore) > 0 &&
              hours(sp.renewBefore) < hours(sp.duration), `${sp.duration} / ${sp.renewBefore}`);
        check('serving secret mounted', sp.secretName === 'kop-webhook-server-cert' && certVol && certVol.secret &&
              certVol.secret.secretName === sp.secretName, 'cert volume is not the serving Secret');
        check('serving cert rotates its own key (rotationPolicy Always)',
              sp.privateKey && sp.privateKey.rotationPolicy === 'Always', JSON.stringify(sp.privateKey));
    }
    // CA rotation without an outage (docs/operations.md §6.1): cainjector
    // moves the caBundles to the new Secret's ca.crt before the pods reload
    // the new pair, so a renewed CA must verify the pair signed before it:
    // same key (rotationPolicy Never), pinned so the kept key matches the
    // spec, and renewed at least one serving duration ahead, so no serving
    // certificate outlives the CA certificate in its Secret.
    if (caCert) {
        const cp = caCert.spec;
        const pk = cp.privateKey || {};
        check('CA keeps its key across renewals (privateKey.rotationPolicy Never)', pk.rotationPolicy === 'Never',
              `rotationPolicy ${pk.rotationPolicy === undefined ? 'unset (Always since cert-manager 1.18)' : pk.rotationPolicy}`);
        check('CA key algorithm and size pinned', pk.algorithm === 'ECDSA' && pk.size === 256, JSON.stringify(pk));
        const hours = (d) => Number((/^(\d+)h$/.exec(d || '') || [])[1]);
        const sp = serving ? serving.spec : {};
        check('CA renewed at least one serving duration before expiry', hours(cp.renewBefore) >= hours(sp.duration) &&
              hours(cp.renewBefore) < hours(cp.duration),
              `CA ${cp.duration} / ${cp.renewBefore}, serving duration ${sp.duration}`);
    }
    for (const o of [crd, vwc].filter(Boolean))
        check(`inject-ca-from on ${idOf(o)}`, ((o.metadata.annotations || {})['cert-manager.io/inject-ca-from']) ===
              'kop-system/kop-serving-cert', 'missing');
    const cr = find(docs, 'ClusterRole', 'kop-self-signed-certs-role');
    check('no self-signed rights in the default install', !cr &&
          !docs.some((o) => o.kind === 'ClusterRole' && o.rules.some((r) =>
              (r.resources || []).some((x) => x === 'customresourcedefinitions' || x === 'validatingwebhookconfigurations'))),
          'CRD/webhook-configuration rights granted');
}

function cmdSelfSigned(file, manager = 'kustomize') {
    const docs = loadDocs(file);
    const {dep, c, crd, vwc, certVol, certMount} = commonChecks(docs, 'self-signed', manager);
    if (!dep) return;
    check('no cert-manager objects', !docs.some((o) => String(o.apiVersion).startsWith('cert-manager.io/')), 'still there');
    for (const o of [crd, vwc].filter(Boolean))
        check(`no inject-ca-from on ${idOf(o)}`, !((o.metadata.annotations || {})['cert-manager.io/inject-ca-from']),
              'still there');
    check('--self-signed-certs', (c.args || []).includes('--self-signed-certs'), JSON.stringify(c.args));
    check('writable emptyDir cert dir', certVol && certVol.emptyDir && !certVol.secret && !certMount.readOnly,
          JSON.stringify(certVol));
    check('one replica, no PDB', dep.spec.replicas === 1 && !docs.some((o) => o.kind === 'PodDisruptionBudget'),
          'each replica would generate its own CA');
    const cr = find(docs, 'ClusterRole', 'kop-self-signed-certs-role');
    // kop merge-patches the CRD, and GETs then PUTs the webhook configuration
    // (a merge patch would replace its whole webhooks list).
    const ok = cr && cr.rules.length === 2 && cr.rules.every((r) => (r.resourceNames || []).length === 1) &&
        cr.rules.some((r) => r.resources[0] === 'customresourcedefinitions' &&
                      r.resourceNames[0] === 'myresources.mygroup.example.com' &&
                      JSON.stringify(r.verbs) === '["get","patch"]') &&
        cr.rules.some((r) => r.resources[0] === 'validatingwebhookconfigurations' &&
                      r.resourceNames[0] === 'kop-validating-webhook' &&
                      JSON.stringify(r.verbs) === '["get","update"]');
    check('self-signed ClusterRole: CRD get/patch, webhook configuration get/update, named objects only', ok,
          JSON.stringify(cr && cr.rules));
}

function cmdStorageV2(file) {
    const docs = loadDocs(file);
    const {dep, c, crd} = commonChecks(docs, 'storage-v2', 'kustomize');
    if (!dep || !crd) return;
    const storage = crd.spec.versions.filter((v) => v.storage).map((v) => v.name);
    check('v2 is the storage version, v1 still served', JSON.stringify(storage) === '["v2"]' &&
          crd.spec.versions.some((v) => v.name === 'v1' && v.served), JSON.stringify(crd.spec.versions.map(
              (v) => [v.name, v.served, v.storage])));
    const args = c.args || [];
    check('--storage-version=v2 --storage-migration', args.includes('--storage-version=v2') &&
          args.includes('--storage-migration'), JSON.stringify(args));
    const cr = find(docs, 'ClusterRole', 'kop-storage-migration-role');
    const rule = (res, verbs, named) => cr && cr.rules.some((r) => r.resources.length === 1 &&
        r.resources[0] === res && JSON.stringify(r.verbs) === JSON.stringify(verbs) &&
        (named ? JSON.stringify(r.resourceNames) === '["myresources.mygroup.example.com"]' : !r.resourceNames));
    check('migration ClusterRole: CRD get and status patch by name, myresources update, ' +
          'storageversionmigrations create/get', cr && cr.rules.length === 4 &&
          rule('customresourcedefinitions', ['get'], true) &&
          rule('customresourcedefinitions/status', ['patch'], true) &&
          rule('myresources', ['update'], false) && rule('storageversionmigrations', ['create', 'get'], false),
          JSON.stringify(cr && cr.rules));
    const role = find(docs, 'Role', 'kop-storage-migration-checkpoint-role');
    check('checkpoint Role in kop-system: the one ConfigMap', role && role.metadata.namespace === 'kop-system' &&
          role.rules.some((r) => JSON.stringify(r.resourceNames) === '["kop-leader-storage-migration"]' &&
                          JSON.stringify(r.verbs) === '["get","update"]') &&
          role.rules.some((r) => !r.resourceNames && JSON.stringify(r.verbs) === '["create"]'),
          JSON.stringify(role));
    for (const [kind, name] of [['ClusterRoleBinding', 'kop-storage-migration-rolebinding'],
                                ['RoleBinding', 'kop-storage-migration-checkpoint-rolebinding']]) {
        const b = find(docs, kind, name);
        check(`${kind} ${name} binds kop`, b && b.subjects.some((s) => s.kind === 'ServiceAccount' &&
              s.name === 'kop' && s.namespace === 'kop-system'), JSON.stringify(b && b.subjects));
    }
}

// ---- a fleet: the local install and a member's ------------------------------

// Everything of `base` is in `docs`, unchanged but for what `strip` takes out
// of both copies (e.g. a field the overlay sets); `extra` names the ids
// `docs` may have on top. One check per object.
function sameAs(what, docs, base, strip, extra) {
    const clean = (o) => {
        const c = JSON.parse(JSON.stringify(o));
        strip(c);
        return JSON.stringify(c, Object.keys(flatKeys(c)).sort());
    };
    const byId = new Map(docs.map((o) => [idOf(o), o]));
    for (const b of base) {
        const o = byId.get(idOf(b));
        check(`${what}: ${idOf(b)} as in the default install`, o && clean(o) === clean(b),
              o ? 'changed' : 'missing');
    }
    const baseIds = new Set(base.map(idOf));
    const more = docs.map(idOf).filter((id) => !baseIds.has(id));
    check(`${what}: nothing else added`, JSON.stringify(more.sort()) === JSON.stringify([...extra].sort()),
          JSON.stringify(more));
}

// Every key name at any depth, for a stable JSON.stringify key order.
function flatKeys(o, acc = {}) {
    if (o && typeof o === 'object')
        for (const [k, v] of Object.entries(o)) {
            acc[k] = true;
            flatKeys(v, acc);
        }
    return acc;
}

function rulesOf(docs, kind) {
    return docs.filter((o) => o.kind === kind).flatMap((r) => (r.rules || []).map((x) => [r, x]));
}

function cmdFleet(file, defaultFile) {
    const docs = loadDocs(file);
    const {dep, c} = commonChecks(docs, 'fleet', 'kustomize');
    if (!dep) return;
    const args = c.args || [];
    check('--cluster-secrets, still --leader-elect', args.includes('--cluster-secrets') &&
          args.includes('--leader-elect'), JSON.stringify(args));
    const role = find(docs, 'Role', 'kop-cluster-secrets-role');
    const r = role && role.rules;
    check('Role kop-cluster-secrets-role: get/list/watch on Secrets, in kop-system only', role &&
          role.metadata.namespace === 'kop-system' && r.length === 1 &&
          JSON.stringify(r[0].apiGroups) === '[""]' && JSON.stringify(r[0].resources) === '["secrets"]' &&
          JSON.stringify([...r[0].verbs].sort()) === '["get","list","watch"]', JSON.stringify(role));
    const b = find(docs, 'RoleBinding', 'kop-cluster-secrets-rolebinding');
    check('RoleBinding kop-cluster-secrets-rolebinding: the Role to kop, in kop-system', b &&
          b.metadata.namespace === 'kop-system' && b.roleRef.kind === 'Role' &&
          b.roleRef.name === 'kop-cluster-secrets-role' && b.subjects.length === 1 &&
          b.subjects[0].kind === 'ServiceAccount' && b.subjects[0].name === 'kop' &&
          b.subjects[0].namespace === 'kop-system', JSON.stringify(b));
    const secretRules = [...rulesOf(docs, 'ClusterRole'), ...rulesOf(docs, 'Role')]
        .filter(([, x]) => (x.resources || []).some((res) => res === 'secrets' || res === '*'));
    check('no other role grants Secrets (no ClusterRole at all)', secretRules.length === 1 &&
          secretRules[0][0] === role, JSON.stringify(secretRules.map(([o]) => idOf(o))));
    const noFlag = (o) => {
        if (o.kind !== 'Deployment') return;
        const cc = o.spec.template.spec.containers[0];
        cc.args = (cc.args || []).filter((a) => a !== '--cluster-secrets');
    };
    sameAs('fleet', docs, loadDocs(defaultFile), noFlag,
           ['Role/kop-system/kop-cluster-secrets-role', 'RoleBinding/kop-system/kop-cluster-secrets-rolebinding']);
}

function cmdMember(file, defaultFile, cluster, url, caBundle) {
    const docs = loadDocs(file);
    const base = loadDocs(defaultFile);
    const want = ['Namespace/kop-system', 'CustomResourceDefinition/myresources.mygroup.example.com',
                  'ValidatingWebhookConfiguration/kop-validating-webhook', 'ServiceAccount/kop-system/kop',
                  'ClusterRole/kop-manager-role', 'ClusterRoleBinding/kop-manager-rolebinding',
                  'ClusterRole/kop-myresource-viewer-role', 'ClusterRole/kop-myresource-editor-role',
                  'Secret/kop-system/kop-token'];
    const ids = docs.map(idOf);
    check('member: the CRD, the webhook, kop\'s RBAC and token, the user roles; nothing that runs kop',
          JSON.stringify([...ids].sort()) === JSON.stringify([...want].sort()), JSON.stringify(ids));
    for (const o of docs) {
        const l = (o.metadata && o.metadata.labels) || {};
        check(`member: labels ${idOf(o)}`, l['app.kubernetes.io/name'] === 'kop' &&
              l['app.kubernetes.io/part-of'] === 'kop' && l['app.kubernetes.io/managed-by'] === 'kustomize',
              JSON.stringify(l));
        check(`member: no cert-manager annotation on ${idOf(o)}`,
              !((o.metadata.annotations || {})['cert-manager.io/inject-ca-from']), 'inject-ca-from left');
    }
    const text = JSON.stringify(docs);
    check('member: no placeholder left', !/KOP_MEMBER_/.test(text), 'a KOP_MEMBER_ placeholder is in the output');
    check('member: the inputs ConfigMap is not in the output', !docs.some((o) => o.kind === 'ConfigMap'),
          'kop-member rendered');
    const pem = Buffer.from(caBundle, 'base64').toString('latin1');
    check('member: the given caBundle is a PEM certificate', /^-----BEGIN CERTIFICATE-----/m.test(pem), pem.slice(0, 40));

    // The CRD and the webhook: the default install's, clientConfig aside.
    const crd = find(docs, 'CustomResourceDefinition', 'myresources.mygroup.example.com');
    const vwc = find(docs, 'ValidatingWebhookConfiguration', 'kop-validating-webhook');
    const convUrl = `${url}/convert`;
    const valUrl = `${url}/validate-mygroup-example-com-myresource/clusters/${cluster}`;
    if (crd) {
        const cc = crd.spec.conversion.webhook.clientConfig;
        check('member: conversion webhook by url, ends in /convert', cc.url === convUrl && !cc.service &&
              /^https:\/\/[^/]+\/convert$/.test(cc.url), JSON.stringify(cc));
        check('member: conversion caBundle is the given CA', cc.caBundle === caBundle, String(cc.caBundle).slice(0, 40));
    }
    if (vwc) {
        const w = vwc.webhooks;
        const cc = (w[0] || {}).clientConfig || {};
        check(`member: validating webhook by url, path /validate-mygroup-example-com-myresource/clusters/${cluster}`,
              w.length === 1 && cc.url === valUrl && !cc.service && cc.url.endsWith(`/clusters/${cluster}`) &&
              /^https:\/\/[^/]+\/validate-mygroup-example-com-myresource\/clusters\/[a-z0-9]([-a-z0-9]*[a-z0-9])?$/
                  .test(cc.url), JSON.stringify(cc));
        check('member: validating caBundle is the given CA', cc.caBundle === caBundle, String(cc.caBundle).slice(0, 40));
    }
    const noClient = (o) => {
        if (o.metadata) delete o.metadata.annotations;
        if (o.kind === 'CustomResourceDefinition') delete o.spec.conversion.webhook.clientConfig;
        if (o.kind === 'ValidatingWebhookConfiguration') for (const w of o.webhooks) delete w.clientConfig;
    };
    const shared = base.filter((o) => want.includes(idOf(o)));
    sameAs('member', docs, shared, noClient, ['Secret/kop-system/kop-token']);

    // kop's identity: what the reconciler does, no Lease, no Secret.
    const grants = [...rulesOf(docs, 'ClusterRole'), ...rulesOf(docs, 'Role')];
    const bad = grants.filter(([, x]) => (x.resources || []).some((res) => res === 'leases' || res === 'secrets' ||
        res === '*') || (x.apiGroups || []).includes('coordination.k8s.io') || (x.verbs || []).includes('*'));
    check('member: no Lease or Secret rights', bad.length === 0, JSON.stringify(bad.map(([o, x]) => [idOf(o), x])));
    check('member: no namespaced Role or RoleBinding', !docs.some((o) => o.kind === 'Role' || o.kind === 'RoleBinding'),
          'a Role is there');
    const cr = find(docs, 'ClusterRole', 'kop-manager-role');
    const res = cr ? cr.rules.flatMap((x) => x.resources) : [];
    check('member: kop-manager-role covers MyResources and status, Deployments, Services, Events',
          ['myresources', 'myresources/status', 'deployments', 'services', 'events'].every((x) => res.includes(x)),
          JSON.stringify(res));
    const crb = find(docs, 'ClusterRoleBinding', 'kop-manager-rolebinding');
    check('member: kop-manager-role bound to kop-system/kop', crb && crb.roleRef.name === 'kop-manager-role' &&
          crb.subjects.length === 1 && crb.subjects[0].kind === 'ServiceAccount' && crb.subjects[0].name === 'kop' &&
          crb.subjects[0].namespace === 'kop-system', JSON.stringify(crb && crb.subjects));
    const tok = find(docs, 'Secret', 'kop-token');
    check('member: kop-token is a service-account-token Secret of kop, to be filled by the token controller',
          tok && tok.type === 'kubernetes.io/service-account-token' && tok.metadata.namespace === 'kop-system' &&
          (tok.metadata.annotations || {})['kubernetes.io/service-account.name'] === 'kop' && !tok.data &&
          !tok.stringData, JSON.stringify(tok));
}

// ---- the checker checks itself ---------------------------------------------

// Each mutation breaks the rendered install in one way the schema check must
// catch: an unknown field (deep and shallow), a wrong type, a bad enum, a
// missing required field, a bad quantity.
const MUTATIONS = [
    ['unknown container field', 'Deployment', (o) => { o.spec.template.spec.containers[0].imagePullPolicyy = 'Always'; }],
    ['unknown field in a probe', 'Deployment', (o) => { o.spec.template.spec.containers[0].livenessProbe.httpGet.paht = '/'; }],
    ['wrong type', 'Service', (o) => { o.spec.ports[0].port = '443'; }],
    ['missing required field', 'ClusterRoleBinding', (o) => { delete o.roleRef.name; }],
    ['bad quantity', 'Deployment', (o) => { o.spec.template.spec.containers[0].resources.limits.memory = '128 MB'; }],
    ['unknown Certificate field', 'Certificate', (o) => { o.spec.dnsName = ['kop.example']; }],
    ['bad cert-manager enum', 'Certificate', (o) => { (o.spec.privateKey = o.spec.privateKey || {}).algorithm = 'DSA'; }],
    ['unknown Issuer type', 'Issuer', (o) => { o.spec.selfsigned = {}; }],
    ['unknown webhook field', 'ValidatingWebhookConfiguration', (o) => { o.webhooks[0].failPolicy = 'Fail'; }],
    ['unknown CRD field', 'CustomResourceDefinition', (o) => { o.spec.versions[0].servedd = true; }],
];

function cmdSelftest(file) {
    const docs = loadDocs(file);
    const mutated = [];
    for (const [what, kind, mutate] of MUTATIONS) {
        const o = docs.find((d) => d.kind === kind);
        if (!o) {
            fail(`selftest ${what}`, `no ${kind} in ${file}`);
            continue;
        }
        const copy = JSON.parse(JSON.stringify(o));
        mutate(copy);
        mutated.push([what, copy]);
    }
    const results = schemaCheck(mutated.map((m) => m[1]));
    mutated.forEach(([what], i) => {
        const e = results[i].error;
        check(`selftest schema catches: ${what}`, e !== null && e !== 'skip', 'accepted');
    });
}

function main(argv) {
    const cmds = {schema: cmdSchema, install: cmdInstall, 'self-signed': cmdSelfSigned, 'storage-v2': cmdStorageV2,
                  selftest: cmdSelftest, fleet: cmdFleet, member: cmdMember};
    const withManager = argv[0] === 'install' || argv[0] === 'self-signed';
    const argc = {fleet: 3, member: 6}[argv[0]] || 2;
    if (!cmds[argv[0]] || (argv.length !== argc && !(withManager && argv.length === 3))) {
        console.error('usage: node check.js schema|install|self-signed|storage-v2|selftest FILE | install|self-signed FILE MANAGER\n' +
                      '       node check.js fleet FILE DEFAULT | member FILE DEFAULT CLUSTER URL CABUNDLE');
        return 2;
    }
    try {
        cmds[argv[0]](...argv.slice(1));
    } catch (e) {
        fail(`${argv[0]} ${argv[1]}`, e && e.stack ? e.stack : String(e));
    }
    return failed ? 1 : 0;
}

if (require.main === module) process.exitCode = main(process.argv.slice(2));
