# SPDX-License-Identifier: Apache-2.0
#
# The official Python client (Debian's python3-kubernetes) against kubesim,
# run by tests/scripts/test_clients.sh:
#   python3 python_client.py KUBECONFIG NAMESPACE
# list with paging (limit/continue), watch (the client sends watch=True),
# read status (status: {} is there on a new Deployment), strategic merge
# patch, delete with propagationPolicy Background (dependents collected)
# and Orphan (dependents kept, owner reference removed), the Node, a Pod
# the scheduler places (its Scheduled Event) and deletes gracefully, and a
# 400 for a wrong JSON type. Output: "PASS name" / "FAIL name: why" lines; exit 1 on
# any failure.
import sys
import time

from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

kubeconfig, ns = sys.argv[1], sys.argv[2]
failed = 0


def check(name, ok, why=""):
    global failed
    if ok:
        print("PASS " + name, flush=True)
    else:
        failed += 1
        print("FAIL %s: %s" % (name, why), flush=True)


def until(pred, secs, what):
    """Polls pred until it holds; generous bound, the machine may be loaded."""
    deadline = time.monotonic() + secs
    while time.monotonic() < deadline:
        if pred():
            return True
        time.sleep(0.05)
    print("timed out waiting for " + what, flush=True)
    return False


config.load_kube_config(config_file=kubeconfig)
core = client.CoreV1Api()
apps = client.AppsV1Api()

# ---- list with paging ----------------------------------------------------------
for i in range(5):
    core.create_namespaced_config_map(
        ns, {"metadata": {"name": "py-%d" % i, "labels": {"app": "py"}}, "data": {"i": str(i)}})
names, token, pages = [], None, 0
while True:
    page = core.list_namespaced_config_map(ns, label_selector="app=py", limit=2, _continue=token)
    pages += 1
    names += [c.metadata.name for c in page.items]
    token = page.metadata._continue
    if not token:
        break
check("list-paging", pages == 3 and names == ["py-%d" % i for i in range(5)],
      "pages=%d names=%s" % (pages, names))

# ---- watch -----------------------------------------------------------------------
rv = core.list_namespaced_config_map(ns).metadata.resource_version
core.create_namespaced_config_map(ns, {"metadata": {"name": "py-watched"}})
w = watch.Watch()
events = []
for ev in w.stream(core.list_namespaced_config_map, ns, resource_version=rv, timeout_seconds=30):
    events.append((ev["type"], ev["object"].metadata.name))
    if ev["object"].metadata.name == "py-watched":
        w.stop()
check("watch", ("ADDED", "py-watched") in events, str(events))

# ---- read status -------------------------------------------------------------------
dep = {
    "metadata": {"name": "py-dep"},
    "spec": {
        "replicas": 2,
        "selector": {"matchLabels": {"app": "py-dep"}},
        "template": {
            "metadata": {"labels": {"app": "py-dep"}},
            "spec": {"containers": [{"name": "c", "image": "nginx:1.27"}]},
        },
    },
}
apps.create_namespaced_deployment(ns, dep)
st = apps.read_namespaced_deployment_status("py-dep", ns)
check("read-status", st.status is not None, "status is None")
check("read-status-replicas",
      until(lambda: (apps.read_namespaced_deployment_status("py-dep", ns).status.ready_replicas
                     or 0) == 2, 60, "readyReplicas 2"))

# ---- patch (the client sends a dict as a strategic merge patch) ------------------------
p = apps.patch_namespaced_deployment("py-dep", ns, {"spec": {"replicas": 3},
                                                    "metadata": {"labels": {"patched": "yes"}}})
check("patch", p.spec.replicas == 3 and p.metadata.labels.get("patched") == "yes",
      "replicas=%s labels=%s" % (p.spec.replicas, p.metadata.labels))

# ---- delete with propagation -----------------------------------------------------------
owner = apps.read_namespaced_deployment("py-dep", ns)
ref = {"apiVersion": "apps/v1", "kind": "Deployment", "name": "py-dep",
       "uid": owner.metadata.uid}
core.create_namespaced_config_map(ns, {"metadata": {"name": "py-owned", "ownerReferences": [ref]}})
apps.delete_namespaced_deployment("py-dep", ns, propagation_policy="Background")


def gone(read):
    try:
        read()
        return False
    except ApiException as e:
        return e.status == 404


check("delete-background-owner",
      until(lambda: gone(lambda: apps.read_namespaced_deployment("py-dep", ns)), 30, "py-dep"))
check("delete-background-dependent",
      until(lambda: gone(lambda: core.read_namespaced_config_map("py-owned", ns)), 60,
            "py-owned collected"))

apps.create_namespaced_deployment(ns, dict(dep, metadata={"name": "py-dep2"}))
owner = apps.read_namespaced_deployment("py-dep2", ns)
ref = dict(ref, name="py-dep2", uid=owner.metadata.uid)
core.create_namespaced_config_map(ns, {"metadata": {"name": "py-kept", "ownerReferences": [ref]}})
apps.delete_namespaced_deployment("py-dep2", ns,
                                  body=client.V1DeleteOptions(propagation_policy="Orphan"))
check("delete-orphan-owner",
      until(lambda: gone(lambda: apps.read_namespaced_deployment("py-dep2", ns)), 30, "py-dep2"))
kept = core.read_namespaced_config_map("py-kept", ns)
check("delete-orphan-dependent", not kept.metadata.owner_references,
      str(kept.metadata.owner_references))

# ---- the Node, a Pod the scheduler places, its Event, its graceful delete -----------------
nodes = core.list_node()
node = nodes.items[0] if nodes.items else None
check("list-node",
      [n.metadata.name for n in nodes.items] == ["kubesim-node"] and
      node.status.node_info.kubelet_version.startswith("v1.") and
      any(c.type == "Ready" and c.status == "True" for c in node.status.conditions),
      str([n.metadata.name for n in nodes.items]))
core.create_namespaced_pod(ns, {"metadata": {"name": "py-pod"},
                                "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}]}})
check("pod-running",
      until(lambda: core.read_namespaced_pod("py-pod", ns).status.phase == "Running", 30,
            "py-pod running"))
evs = core.list_namespaced_event(ns, field_selector="involvedObject.name=py-pod,reason=Scheduled")
check("scheduled-event",
      len(evs.items) == 1 and evs.items[0].reporting_component == "default-scheduler" and
      evs.items[0].event_time is not None and evs.items[0].action == "Binding",
      str([(e.reason, e.reporting_component, e.event_time) for e in evs.items]))
core.delete_namespaced_pod("py-pod", ns)
check("pod-deleted",
      until(lambda: gone(lambda: core.read_namespaced_pod("py-pod", ns)), 30, "py-pod gone"))

# ---- what the apiserver refuses ------------------------------------------------------------
try:
    core.create_namespaced_service(
        ns, {"metadata": {"name": "py-bad"}, "spec": {"ports": [{"port": "80"}]}})
    check("typed-400", False, "created")
except ApiException as e:
    check("typed-400", e.status == 400 and "cannot unmarshal string" in e.body, e.body)

sys.exit(1 if failed else 0)
