#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Build kubesim's protobuf field table (tests/kubesim/pbtable.c).

Usage: gen-protobuf.py API_DIR APIMACHINERY_DIR API_REF |
         clang-format --assume-filename=pbtable.c >tests/kubesim/pbtable.c

API_DIR is a checkout of k8s.io/api and APIMACHINERY_DIR one of
k8s.io/apimachinery (the same release, e.g. both at tag v0.36.3); API_REF
names that release in the generated file's header.

The message structure (field numbers, proto types, repeated, map) comes
from each package's generated.proto; the messages are listed in the order
of the Go struct fields, which is the order Go's encoding/json writes.
What protobuf does not say comes from the Go struct tags of the same
package (types.go and its siblings): the JSON name, omitempty/omitzero and
whether the Go field is a pointer (a pointer keeps a zero value that
protobuf carries; omitempty drops the zero of a plain field, as
encoding/json does), and embedded structs inlined in JSON (json:",inline":
Volume's VolumeSource, Probe's ProbeHandler, RuleWithOperations' Rule). Go types declared as slices (type X []string) are
marked: their JSON form is the bare list of their only field.

Only the messages reachable from the kinds below go into the table.
"""
import os
import re
import sys

# group, version, kind: the built-in kinds kubesim serves (resources.c),
# plus the bodies typed clients send besides objects.
ROOTS = [
    ("", "v1", "ConfigMap"),
    ("", "v1", "Endpoints"),
    ("", "v1", "Event"),
    ("", "v1", "Namespace"),
    ("", "v1", "Node"),
    ("", "v1", "Pod"),
    ("", "v1", "Secret"),
    ("", "v1", "ServiceAccount"),
    ("", "v1", "Service"),
    ("admissionregistration.k8s.io", "v1", "MutatingWebhookConfiguration"),
    ("admissionregistration.k8s.io", "v1", "ValidatingWebhookConfiguration"),
    ("apps", "v1", "Deployment"),
    ("apps", "v1", "ReplicaSet"),
    ("autoscaling", "v1", "Scale"),
    ("coordination.k8s.io", "v1", "Lease"),
    ("discovery.k8s.io", "v1", "EndpointSlice"),
    ("networking.k8s.io", "v1", "NetworkPolicy"),
    ("policy", "v1", "PodDisruptionBudget"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
    ("rbac.authorization.k8s.io", "v1", "RoleBinding"),
    ("rbac.authorization.k8s.io", "v1", "Role"),
    ("meta.k8s.io", "v1", "DeleteOptions"),
    ("meta.k8s.io", "v1", "Status"),
    # create-only reviews (no List kinds): kubectl auth can-i / whoami
    ("authentication.k8s.io", "v1", "SelfSubjectReview"),
    ("authentication.k8s.io", "v1", "TokenReview"),
    ("authorization.k8s.io", "v1", "LocalSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SelfSubjectAccessReview"),
    ("authorization.k8s.io", "v1", "SelfSubjectRulesReview"),
    ("authorization.k8s.io", "v1", "SubjectAccessReview"),
]

# Roots without a List kind.
NO_LIST = {"meta.k8s.io", "authentication.k8s.io", "authorization.k8s.io"}

# Where a group's proto package lives in k8s.io/api.
GROUP_DIRS = {
    "": "core",
    "admissionregistration.k8s.io": "admissionregistration",
    "apps": "apps",
    "authentication.k8s.io": "authentication",
    "authorization.k8s.io": "authorization",
    "autoscaling": "autoscaling",
    "coordination.k8s.io": "coordination",
    "discovery.k8s.io": "discovery",
    "networking.k8s.io": "networking",
    "policy": "policy",
    "rbac.authorization.k8s.io": "rbac",
}

# Messages whose JSON form is not their protobuf structure (the Go types
# have their own MarshalJSON).
SPECIAL = {
    "k8s.io.apimachinery.pkg.apis.meta.v1.Time": "KS_PB_M_TIME",
    "k8s.io.apimachinery.pkg.apis.meta.v1.MicroTime": "KS_PB_M_MICROTIME",
    "k8s.io.apimachinery.pkg.apis.meta.v1.Duration": "KS_PB_M_DURATION",
    "k8s.io.apimachinery.pkg.apis.meta.v1.FieldsV1": "KS_PB_M_RAWJSON",
    "k8s.io.apimachinery.pkg.runtime.RawExtension": "KS_PB_M_RAWJSON",
    "k8s.io.apimachinery.pkg.api.resource.Quantity": "KS_PB_M_QUANTITY",
    "k8s.io.apimachinery.pkg.util.intstr.IntOrString": "KS_PB_M_INTSTR",
}

SCALARS = {
    "string": "KS_PB_STRING",
    "bytes": "KS_PB_BYTES",
    "bool": "KS_PB_BOOL",
    "int32": "KS_PB_INT32",
    "int64": "KS_PB_INT64",
    "uint32": "KS_PB_UINT32",
    "uint64": "KS_PB_UINT64",
    "double": "KS_PB_DOUBLE",
    "float": "KS_PB_FLOAT",
}

FIELD_RE = re.compile(
    r"^\s*(optional|repeated)?\s*(map<\s*(\S+?)\s*,\s*(\S+?)\s*>|\S+)\s+(\w+)\s*=\s*(\d+)\s*;")
STRUCT_RE = re.compile(r"^type\s+(\w+)\s+struct\s*{")
SLICE_RE = re.compile(r"^type\s+(\w+)\s+\[\](\S+)")
GOFIELD_RE = re.compile(r'^\s*(?:(\w+)\s+)?(\S+)\s+`(.*)`')


def read_proto(path):
    """{full message name: [fields]} and the package name."""
    msgs = {}
    pkg = None
    cur = None
    optional = False
    with open(path, encoding="utf-8") as f:
        for line in f:
            s = line.strip()
            m = re.match(r"^package\s+([\w.]+);", s)
            if m:
                pkg = m.group(1)
                continue
            m = re.match(r"^message\s+(\w+)\s*{", s)
            if m:
                cur = []
                msgs[pkg + "." + m.group(1)] = cur
                optional = False
                continue
            if s == "}":
                cur = None
                continue
            if cur is None:
                continue
            if s.startswith("//"):
                if s == "// +optional":
                    optional = True
                continue
            m = FIELD_RE.match(line)
            if m:
                label, typ, mk, mv, name, num = m.groups()
                cur.append({
                    "label": label or "optional",
                    "type": typ if not mk else None,
                    "map": (mk, mv) if mk else None,
                    "name": name,
                    "num": int(num),
                    "optional": optional,
                })
                optional = False
    return pkg, msgs


def read_go(dirpath):
    """{struct: {proto number: (json name, omitempty, pointer)}} and the
    set of slice types."""
    structs = {}
    slices = set()
    for fn in sorted(os.listdir(dirpath)):
        if not fn.endswith(".go") or fn.endswith("_test.go"):
            continue
        cur = None
        with open(os.path.join(dirpath, fn), encoding="utf-8") as f:
            for line in f:
                m = SLICE_RE.match(line)
                if m:
                    slices.add(m.group(1))
                m = STRUCT_RE.match(line)
                if m:
                    cur = structs.setdefault(m.group(1), {})
                    continue
                if cur is None:
                    continue
                if line.startswith("}"):
                    cur = None
                    continue
                m = GOFIELD_RE.match(line)
                if not m:
                    continue
                gotype, tag = m.group(2), m.group(3)
                pm = re.search(r'protobuf:"[^"]*?,(\d+),', tag)
                jm = re.search(r'json:"([^"]*)"', tag)
                if not pm or not jm:
                    continue
                parts = jm.group(1).split(",")
                cur[int(pm.group(1))] = (parts[0], "omitempty" in parts[1:] or
                                         "omitzero" in parts[1:], gotype.startswith("*"),
                                         parts[0] == "" and "inline" in parts[1:])
    return structs, slices


def main():
    api, mach, ref = sys.argv[1], sys.argv[2], sys.argv[3]
    protos = []
    for root, _, files in os.walk(api):
        if "generated.proto" in files:
            protos.append(os.path.join(root, "generated.proto"))
    for sub in ("pkg/apis/meta/v1", "pkg/runtime", "pkg/api/resource", "pkg/util/intstr"):
        protos.append(os.path.join(mach, sub, "generated.proto"))
    msgs = {}
    gomap = {}
    for p in sorted(protos):
        pkg, m = read_proto(p)
        structs, slices = read_go(os.path.dirname(p))
        msgs.update(m)
        for full in m:
            short = full.rsplit(".", 1)[1]
            gomap[full] = (structs.get(short, {}), short in slices)

    def resolve(pkg, typ):
        if typ.startswith("."):
            return typ[1:]
        return pkg + "." + typ

    roots = []
    lists = [(g, v, k + "List") for g, v, k in ROOTS if g not in NO_LIST and k != "Scale"]
    for group, version, kind in ROOTS + lists:
        if group == "meta.k8s.io":
            full = "k8s.io.apimachinery.pkg.apis.meta.v1." + kind
        else:
            full = "k8s.io.api.%s.%s.%s" % (GROUP_DIRS[group], version, kind)
        if full not in msgs:
            sys.exit("no message " + full)
        roots.append((group, version, kind, full))

    # Reachable messages, in discovery order.
    order = []
    index = {}
    todo = [r[3] for r in roots]
    while todo:
        full = todo.pop(0)
        if full in index:
            continue
        index[full] = len(order)
        order.append(full)
        if full in SPECIAL:
            continue
        pkg = full.rsplit(".", 1)[0]
        for f in msgs[full]:
            t = f["map"][1] if f["map"] else f["type"]
            if t not in SCALARS:
                todo.append(resolve(pkg, t))

    out = []
    w = out.append
    w("/* SPDX-License-Identifier: Apache-2.0 */")
    w("/*")
    w(" * GENERATED by tests/kubesim/gen/gen-protobuf.py: do not edit.")
    w(" * Source: k8s.io/api and k8s.io/apimachinery %s, the generated.proto" % ref)
    w(" * of each package and the Go struct tags beside it (JSON names,")
    w(" * omitempty, pointers). %d messages reachable from %d kinds." % (len(order), len(roots)))
    w(" */")
    w('#include "protobuf.h"')
    w("")
    w("#include <stddef.h>")
    w("")
    for i, full in enumerate(order):
        if full in SPECIAL or not msgs[full]:
            continue
        pkg = full.rsplit(".", 1)[0]
        tags, _ = gomap[full]
        w("static const struct ks_pb_field f%d[] = {" % i)
        for f in msgs[full]:
            flags = []
            if f["label"] == "repeated":
                flags.append("KS_PB_F_REPEATED")
            t = f["type"]
            if f["map"]:
                if f["map"][0] != "string":
                    sys.exit("%s.%s: map key %s" % (full, f["name"], f["map"][0]))
                flags.append("KS_PB_F_MAP")
                t = f["map"][1]
            jname, omit, ptr, inline = tags.get(f["num"],
                                                (f["name"], f["optional"], False, False))
            if omit:
                flags.append("KS_PB_F_OMITEMPTY")
            if ptr:
                flags.append("KS_PB_F_POINTER")
            if inline:
                flags.append("KS_PB_F_INLINE")
                jname = f["name"]
            if t in SCALARS:
                kind, msg = SCALARS[t], -1
            else:
                kind, msg = "KS_PB_MESSAGE", index[resolve(pkg, t)]
            w('    {%d, "%s", %s, %s, %d},' % (f["num"], jname, kind,
                                               " | ".join(flags) or "0", msg))
        w("};")
    w("")
    w("const struct ks_pb_msg ks_pb_msgs[] = {")
    for i, full in enumerate(order):
        _, is_slice = gomap.get(full, ({}, False))
        mk = SPECIAL.get(full, "KS_PB_M_SLICE" if is_slice else "KS_PB_M_PLAIN")
        has = full not in SPECIAL and msgs[full]
        w('    {"%s", %s, %s, %d},' % (full.rsplit(".", 1)[1], mk, "f%d" % i if has else "NULL",
                                      len(msgs[full]) if has else 0))
    w("};")
    w("const size_t ks_pb_nmsgs = %d;" % len(order))
    w("")
    w("const struct ks_pb_kind ks_pb_kinds[] = {")
    for group, version, kind, full in roots:
        w('    {"%s", "%s", "%s", %d},' % (group, version, kind, index[full]))
    w("};")
    w("const size_t ks_pb_nkinds = %d;" % len(roots))
    print("\n".join(out))


if __name__ == "__main__":
    main()
