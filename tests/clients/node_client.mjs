// SPDX-License-Identifier: Apache-2.0
//
// @kubernetes/client-node (pinned in package-lock.json) against kubesim,
// run by tests/scripts/test_clients.sh:
//   node node_client.mjs KUBECONFIG NAMESPACE
// create, list (with a label selector), an informer's list+watch (add,
// update and delete events), merge and JSON patches, the Node, a Pod the
// scheduler and the kubelet run and its graceful delete, and kubesim's
// typed checks as the client sees them (a 400 for a wrong type).
// Output: "PASS name" / "FAIL name: why" lines; exit 1 on any failure.
import * as k8s from '@kubernetes/client-node';

const [kubeconfig, ns] = process.argv.slice(2);
let failed = 0;
function check(name, ok, why) {
    if (ok) console.log(`PASS ${name}`);
    else {
        failed++;
        console.log(`FAIL ${name}: ${why}`);
    }
}

// Resolves when pred() holds, polling; rejects after ms (generous: the
// machine may be loaded; nothing here waits on a timer to pass).
function until(pred, ms, what) {
    return new Promise((resolve, reject) => {
        const start = Date.now();
        const tick = () => {
            if (pred()) return resolve();
            if (Date.now() - start > ms) return reject(new Error(`timed out waiting for ${what}`));
            setTimeout(tick, 20);
        };
        tick();
    });
}

const kc = new k8s.KubeConfig();
kc.loadFromFile(kubeconfig);
const core = kc.makeApiClient(k8s.CoreV1Api);
const apps = kc.makeApiClient(k8s.AppsV1Api);

async function main() {
    // create
    const cm = await core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'node-a', labels: { app: 'node' } }, data: { k: '1' } },
    });
    check('create', cm.metadata.uid && cm.data.k === '1', JSON.stringify(cm));

    // list with a label selector
    await core.createNamespacedConfigMap({
        namespace: ns,
        body: { metadata: { name: 'node-other', labels: { app: 'other' } } },
    });
    const list = await core.listNamespacedConfigMap({ namespace: ns, labelSelector: 'app=node' });
    check('list', list.items.length === 1 && list.items[0].metadata.name === 'node-a' &&
        list.metadata.resourceVersion, JSON.stringify(list.metadata));

    // an informer: list, then watch
    const seen = { add: [], update: [], delete: [] };
    const informer = k8s.makeInformer(kc, `/api/v1/namespaces/${ns}/configmaps`,
        () => core.listNamespacedConfigMap({ namespace: ns }));
    for (const ev of ['add', 'update', 'delete'])
        informer.on(ev, (o) => seen[ev].push(o.metadata.name));
    let informerError = null;
    informer.on('error', (e) => { informerError = e; });
    await informer.start();
    await until(() => seen.add.includes('node-a'), 30000, 'the initial list');
    check('informer-list', seen.add.includes('node-a') && seen.add.includes('node-other'),
        JSON.stringify(seen));
    await core.createNamespacedConfigMap({ namespace: ns, body: { metadata: { name: 'node-b' } } });
    await until(() => seen.add.includes('node-b'), 30000, 'ADDED node-b');
    check('informer-watch-add', true, '');

    // merge patch, seen by the informer
    const patched = await core.patchNamespacedConfigMap(
        { name: 'node-a', namespace: ns, body: { data: { k: '2' } } },
        k8s.setHeaderOptions('Content-Type', k8s.PatchStrategy.MergePatch));
    check('merge-patch', patched.data.k === '2', JSON.stringify(patched.data));
    await until(() => seen.update.includes('node-a'), 30000, 'MODIFIED node-a');
    check('informer-watch-update', true, '');

    // JSON patch (the client's default) on a Deployment
    const dep = await apps.createNamespacedDeployment({
        namespace: ns,
        body: {
            metadata: { name: 'node-dep' },
            spec: {
                replicas: 1,
                selector: { matchLabels: { app: 'node-dep' } },
                template: {
                    metadata: { labels: { app: 'node-dep' } },
                    spec: { containers: [{ name: 'c', image: 'nginx:1.27' }] },
                },
            },
        },
    });
    check('create-deployment', dep.status !== undefined && dep.spec.template.metadata,
        JSON.stringify(dep.status));
    const jp = await apps.patchNamespacedDeployment({
        name: 'node-dep', namespace: ns,
        body: [{ op: 'replace', path: '/spec/replicas', value: 3 }],
    });
    check('json-patch', jp.spec.replicas === 3, JSON.stringify(jp.spec.replicas));

    // kubesim refuses what the apiserver refuses
    let code = 0;
    try {
        await core.createNamespacedService({
            namespace: ns,
            body: { metadata: { name: 'node-bad' }, spec: { ports: [{ port: '80' }] } },
        });
    } catch (e) {
        code = e.code;
    }
    check('typed-400', code === 400, `got ${code}`);

    // the Node, a Pod the scheduler and the kubelet run, its graceful delete
    const nodes = await core.listNode();
    check('list-node', nodes.items.length === 1 && nodes.items[0].metadata.name === 'kubesim-node' &&
        nodes.items[0].status.conditions.some((c) => c.type === 'Ready' && c.status === 'True'),
        JSON.stringify(nodes.items.map((n) => n.metadata.name)));
    await core.createNamespacedPod({
        namespace: ns,
        body: { metadata: { name: 'node-pod' }, spec: { containers: [{ name: 'c', image: 'busybox:1.36' }] } },
    });
    let phase = '';
    const pollPod = async () => {
        for (let i = 0; i < 300 && phase !== 'Running'; i++) {
            phase = (await core.readNamespacedPod({ name: 'node-pod', namespace: ns })).status.phase;
            if (phase !== 'Running') await new Promise((r) => setTimeout(r, 100));
        }
    };
    await pollPod();
    check('pod-running', phase === 'Running', phase);
    const del = await core.deleteNamespacedPod({ name: 'node-pod', namespace: ns });
    check('pod-delete-graceful', del.kind === 'Pod' && del.metadata.deletionTimestamp !== undefined,
        JSON.stringify(del.metadata));

    await core.deleteNamespacedConfigMap({ name: 'node-b', namespace: ns });
    await until(() => seen.delete.includes('node-b'), 30000, 'DELETED node-b');
    check('informer-watch-delete', true, '');
    check('informer-no-error', informerError === null, String(informerError));
    await informer.stop();
}

main().then(() => process.exit(failed ? 1 : 0), (e) => {
    console.log(`FAIL exception: ${e && e.stack ? e.stack : e}`);
    process.exit(1);
});
