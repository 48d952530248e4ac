/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim Table output (meta.k8s.io/v1 Table), what `kubectl get` asks for
 * with "Accept: application/json;as=Table;v=v1;g=meta.k8s.io,...": the
 * column definitions and one row of cells per object. Built-in types get
 * the apiserver's printer columns, kept as data: one table of column
 * definitions per resource (the `printers` array below: Deployment,
 * ReplicaSet, Node, Pod, Service, Namespace, ConfigMap, Secret, Event,
 * Lease, RoleBinding, ClusterRoleBinding, Endpoints, PodDisruptionBudget,
 * EndpointSlice, ServiceAccount, the webhook configurations; Name and
 * Created At for Role, ClusterRole and CustomResourceDefinition, which have
 * no printer and get the default table convertor; Name and Age for the
 * rest), each column with a small cell function and its argument (mostly
 * a field path). Custom resources get Name plus the CRD's
 * additionalPrinterColumns (or Age when it has none), evaluated with a
 * small JSONPath subset: .a.b, [N], ['k'] and [?(@.k=="v")]. Dates are
 * shown as ages the way the apiserver rounds them ("5s", "3m20s", "2d").
 * Rows carry the object as PartialObjectMetadata (includeObject=Metadata,
 * the default), the whole object (Object) or nothing (None).
 */
#include "kubesim.h"

#include <assert.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char name_desc[] =
    "Name must be unique within a namespace. Is required when creating resources, although "
    "some resources may allow a client to request the generation of an appropriate name "
    "automatically. Name is primarily intended for creation idempotence and configuration "
    "definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names";

static const char age_desc[] =
    "CreationTimestamp is a timestamp representing the server time when this object was "
    "created. It is not guaranteed to be set in happens-before order across separate "
    "operations. Clients may not set this value. It is represented in RFC3339 form and is in "
    "UTC.\n\nPopulated by the system. Read-only. Null for lists. More info: "
    "https://git.k8s.io/community/contributors/devel/sig-architecture/"
    "api-conventions.md#metadata";

const char *ks_table_accept(const char *accept)
{
    /* The first acceptable Table entry wins; kubectl lists v1 first. */
    const char *p = accept;
    while (p && *p) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        char entry[256];
        if (n < sizeof(entry)) {
            memcpy(entry, p, n);
            entry[n] = '\0';
            if (strstr(entry, "as=Table") && strstr(entry, "g=meta.k8s.io")) {
                if (strstr(entry, "v=v1beta1"))
                    return "v1beta1";
                if (strstr(entry, "v=v1"))
                    return "v1";
            }
        }
        p = end ? end + 1 : NULL;
    }
    return NULL;
}

enum ks_include ks_table_include(const char *query)
{
    if (query && strcmp(query, "Object") == 0)
        return KS_INCLUDE_OBJECT;
    if (query && strcmp(query, "None") == 0)
        return KS_INCLUDE_NONE;
    return KS_INCLUDE_METADATA;
}

/* ---- ages ------------------------------------------------------------------ */

static bool parse_time(const char *s, time_t *ret)
{
    struct tm tm;
    memset(&tm, 0, sizeof(tm));
    if (!s)
        return false;
    const char *end = strptime(s, "%Y-%m-%dT%H:%M:%S", &tm);
    if (!end)
        return false;
    if (*end == '.') {
        end++;
        while (isdigit((unsigned char)*end))
            end++;
    }
    if (strcmp(end, "Z") != 0)
        return false;
    *ret = timegm(&tm);
    return true;
}

char *ks_human_duration(long long secs)
{
    if (secs < -1)
        return ks_strdup("<invalid>");
    if (secs < 0)
        return ks_strdup("0s");
    if (secs < 120)
        return ks_printf("%llds", secs);
    long long minutes = secs / 60;
    if (minutes < 10)
        return secs % 60 ? ks_printf("%lldm%llds", minutes, secs % 60)
                         : ks_printf("%lldm", minutes);
    if (minutes < 180)
        return ks_printf("%lldm", minutes);
    long long hours = secs / 3600;
    if (hours < 8)
        return minutes % 60 ? ks_printf("%lldh%lldm", hours, minutes % 60)
                            : ks_printf("%lldh", hours);
    if (hours < 48)
        return ks_printf("%lldh", hours);
    if (hours < 24 * 8)
        return hours % 24 ? ks_printf("%lldd%lldh", hours / 24, hours % 24)
                          : ks_printf("%lldd", hours / 24);
    if (hours < 24 * 365 * 2)
        return ks_printf("%lldd", hours / 24);
    if (hours < 24 * 365 * 8) {
        long long days = (hours / 24) % 365;
        return days ? ks_printf("%lldy%lldd", hours / 24 / 365, days)
                    : ks_printf("%lldy", hours / 24 / 365);
    }
    return ks_printf("%lldy", hours / 24 / 365);
}

/* Age of an RFC 3339 timestamp; "<unknown>" when absent. @ref new */
static json_t *age_cell(const char *ts)
{
    time_t t;
    if (!ts || !*ts)
        return json_string("<unknown>");
    if (!parse_time(ts, &t))
        return json_string("<invalid>");
    char *s = ks_human_duration((long long)(time(NULL) - t));
    json_t *v = json_string(s);
    free(s);
    return v;
}

/* ---- JSONPath subset ---------------------------------------------------------- */

/* Evaluate path on obj; the value (@ref borrow) or NULL when missing or
 * the path is beyond the subset. */
static const json_t *eval_path(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    const char *p = path;
    if (*p == '{') /* "{.a.b}" */
        p++;
    while (cur && *p && *p != '}') {
        if (*p == '.') {
            p++;
            size_t n = strcspn(p, ".[}");
            if (n == 0)
                return NULL;
            char key[256];
            if (n >= sizeof(key))
                return NULL;
            memcpy(key, p, n);
            key[n] = '\0';
            cur = json_object_get(cur, key);
            p += n;
        } else if (*p == '[') {
            p++;
            const char *close = strchr(p, ']');
            if (!close)
                return NULL;
            char inner[256];
            size_t n = (size_t)(close - p);
            if (n >= sizeof(inner))
                return NULL;
            memcpy(inner, p, n);
            inner[n] = '\0';
            p = close + 1;
            if (inner[0] == '\'' || inner[0] == '"') {
                if (n < 2 || inner[n - 1] != inner[0])
                    return NULL;
                inner[n - 1] = '\0';
                cur = json_object_get(cur, inner + 1);
            } else if (strncmp(inner, "?(@.", 4) == 0 && n > 5 && inner[n - 1] == ')') {
                /* [?(@.key=="value")]: the first element that matches */
                inner[n - 1] = '\0';
                char *eq = strstr(inner + 4, "==");
                if (!eq)
                    return NULL;
                *eq = '\0';
                char *val = eq + 2;
                size_t vl = strlen(val);
                if (vl >= 2 && (val[0] == '"' || val[0] == '\'') && val[vl - 1] == val[0]) {
                    val[vl - 1] = '\0';
                    val++;
                }
                const json_t *found = NULL;
                size_t i;
                const json_t *el;
                json_array_foreach(cur, i, el)
                {
                    const char *s = json_string_value(json_object_get(el, inner + 4));
                    if (s && strcmp(s, val) == 0) {
                        found = el;
                        break;
                    }
                }
                cur = found;
            } else {
                char *end = NULL;
                long idx = strtol(inner, &end, 10);
                if (!end || *end || end == inner)
                    return NULL;
                if (idx < 0)
                    idx += (long)json_array_size(cur);
                cur = idx >= 0 ? json_array_get(cur, (size_t)idx) : NULL;
            }
        } else {
            return NULL;
        }
    }
    return cur;
}

/* A CRD column's cell as the apiserver types it. @ref new */
static json_t *crd_cell(const char *type, const json_t *v)
{
    if (!v || json_is_null(v))
        return json_null();
    if (strcmp(type, "integer") == 0) {
        if (json_is_integer(v))
            return json_integer(json_integer_value(v));
        if (json_is_real(v))
            return json_integer((json_int_t)json_real_value(v));
        return json_null();
    }
    if (strcmp(type, "number") == 0)
        return json_is_number(v) ? json_real(json_number_value(v)) : json_null();
    if (strcmp(type, "boolean") == 0)
        return json_is_boolean(v) ? json_incref((json_t *)v) : json_null();
    if (strcmp(type, "date") == 0)
        return json_is_string(v) ? age_cell(json_string_value(v)) : json_null();
    if (strcmp(type, "string") == 0) {
        /* JSONPath prints whatever it finds as text. */
        if (json_is_string(v))
            return json_incref((json_t *)v);
        char *txt = ks_dump(v, true, NULL);
        json_t *s = json_string(txt ? txt : "");
        free(txt);
        return s;
    }
    return json_null();
}

/* ---- built-in printers -------------------------------------------------------- */

/*
 * A built-in kind's columns are data: each one is a definition (name,
 * type, format, description, priority, as printers.go's ColumnDefinitions)
 * and a cell function with its argument, most often a field path ("a.b.c",
 * member names only). The printer of a kind is looked up once per table.
 */

/* One cell of a column for obj; arg is the column's argument. @ref new */
typedef json_t *cell_fn(const json_t *obj, const char *arg);

struct column {
    const char *name, *type, *format, *desc;
    int priority;
    cell_fn *cell;
    const char *arg;
};

struct printer {
    const char *key; /* ks_res key */
    const struct column *cols;
    size_t ncols;
};

/* The member at a dotted path. @ref borrow or NULL */
static const json_t *at(const json_t *obj, const char *path)
{
    const json_t *cur = obj;
    while (cur && *path) {
        char key[64];
        size_t n = strcspn(path, ".");
        assert(n < sizeof(key));
        memcpy(key, path, n);
        key[n] = '\0';
        cur = json_object_get(cur, key);
        path += n;
        if (*path == '.')
            path++;
    }
    return cur;
}

static const char *str_at(const json_t *obj, const char *path)
{
    return json_string_value(at(obj, path));
}

static json_t *str_cell_owned(char *s, const char *dflt)
{
    json_t *v = json_string(s ? s : dflt);
    free(s);
    return v;
}

static char *join_list(char *list, const char *sep, const char *item)
{
    char *next = ks_printf("%s%s%s", list, *list ? sep : "", item);
    free(list);
    return next;
}

static void list_add(char **list, const char *item)
{
    *list = join_list(*list, ",", item);
}

/* "k=v,k2=v2" of a string map, keys sorted; NULL when empty. malloc'd */
static char *join_map(const json_t *m)
{
    if (json_object_size(m) == 0)
        return NULL;
    size_t k;
    const char **keys = ks_sorted_keys(m, &k);
    char *out = ks_strdup("");
    for (size_t i = 0; i < k; i++) {
        char *next = ks_printf("%s%s%s=%s", out, i ? "," : "", keys[i],
                               ks_nz(json_string_value(json_object_get(m, keys[i]))));
        free(out);
        out = next;
    }
    free(keys);
    return out;
}

/* The string at the path; "" when absent. */
static json_t *str_cell(const json_t *obj, const char *path)
{
    return json_string(ks_nz(str_at(obj, path)));
}

/* The string at the path; "<none>" when absent or empty. */
static json_t *str_or_none(const json_t *obj, const char *path)
{
    const char *s = str_at(obj, path);
    return json_string(s && *s ? s : "<none>");
}

/* The integer at the path; 0 when absent. */
static json_t *int_cell(const json_t *obj, const char *path)
{
    return json_integer(json_integer_value(at(obj, path)));
}

/* The integer at the path as a string ("0" when absent). */
static json_t *int_str_cell(const json_t *obj, const char *path)
{
    return str_cell_owned(ks_printf("%lld", (long long)json_integer_value(at(obj, path))), "");
}

/* The length of the array at the path. */
static json_t *count_cell(const json_t *obj, const char *path)
{
    return json_integer((json_int_t)json_array_size(at(obj, path)));
}

/* The age of the timestamp at the path. */
static json_t *age_at(const json_t *obj, const char *path)
{
    return age_cell(str_at(obj, path));
}

/* The default table convertor's Created At: the timestamp as it is. */
static json_t *time_cell(const json_t *obj, const char *path)
{
    const char *t = str_at(obj, path);
    return json_string(t ? t : "0001-01-01T00:00:00Z");
}

/* A label map ("k=v,...") at the path; "<none>" when empty. */
static json_t *map_cell(const json_t *obj, const char *path)
{
    return str_cell_owned(join_map(at(obj, path)), "<none>");
}

/* spec.replicas, 1 when unset (the apps/v1 default). */
static json_int_t replicas(const json_t *obj)
{
    const json_t *r = at(obj, "spec.replicas");
    return r ? json_integer_value(r) : 1;
}

static json_t *replicas_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    return json_integer(replicas(obj));
}

/* printDeployment's Ready: "readyReplicas/replicas". */
static json_t *deployment_ready(const json_t *obj, const char *arg)
{
    (void)arg;
    return str_cell_owned(ks_printf("%lld/%lld",
                                    (long long)json_integer_value(at(obj, "status.readyReplicas")),
                                    (long long)replicas(obj)),
                          "");
}

/* Names or images (arg) of a pod template's containers, comma-joined. */
static json_t *containers_cell(const json_t *obj, const char *field)
{
    char *out = ks_strdup("");
    size_t i;
    const json_t *c;
    json_array_foreach(at(obj, "spec.template.spec.containers"), i, c)
    {
        char *next = ks_printf("%s%s%s", out, i ? "," : "",
                               ks_nz(json_string_value(json_object_get(c, field))));
        free(out);
        out = next;
    }
    return str_cell_owned(out, "");
}

/* IntOrString.String(), "N/A" when unset (printPodDisruptionBudget). */
static json_t *int_or_string_cell(const json_t *obj, const char *path)
{
    const json_t *v = at(obj, path);
    if (json_is_integer(v))
        return str_cell_owned(ks_printf("%lld", (long long)json_integer_value(v)), "");
    return json_string(json_is_string(v) ? json_string_value(v) : "N/A");
}

/* ConfigMap and Secret Data: the keys of data and binaryData. */
static json_t *data_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    return json_integer((json_int_t)(json_object_size(json_object_get(obj, "data")) +
                                     json_object_size(json_object_get(obj, "binaryData"))));
}

static json_t *service_ports(const json_t *obj, const char *arg)
{
    (void)arg;
    const json_t *ports = at(obj, "spec.ports");
    if (json_array_size(ports) == 0)
        return json_string("<none>");
    char *out = ks_strdup("");
    size_t i;
    const json_t *p;
    json_array_foreach(ports, i, p)
    {
        json_int_t port = json_integer_value(json_object_get(p, "port"));
        json_int_t np = json_integer_value(json_object_get(p, "nodePort"));
        const char *proto = json_string_value(json_object_get(p, "protocol"));
        char *next = np ? ks_printf("%s%s%lld:%lld/%s", out, i ? "," : "", (long long)port,
                                    (long long)np, proto ? proto : "TCP")
                        : ks_printf("%s%s%lld/%s", out, i ? "," : "", (long long)port,
                                    proto ? proto : "TCP");
        free(out);
        out = next;
    }
    return str_cell_owned(out, "");
}

static json_t *service_external(const json_t *obj, const char *arg)
{
    (void)arg;
    const json_t *spec = json_object_get(obj, "spec");
    const char *type = ks_nz(json_string_value(json_object_get(spec, "type")));
    size_t i;
    const json_t *v;
    if (strcmp(type, "ExternalName") == 0)
        return json_string(ks_nz(json_string_value(json_object_get(spec, "externalName"))));
    char *out = ks_strdup("");
    if (strcmp(type, "LoadBalancer") == 0) {
        json_array_foreach(at(obj, "status.loadBalancer.ingress"), i, v)
        {
            const char *ip = json_string_value(json_object_get(v, "ip"));
            if (!ip)
                ip = json_string_value(json_object_get(v, "hostname"));
            list_add(&out, ks_nz(ip));
        }
    }
    json_array_foreach(json_object_get(spec, "externalIPs"), i, v)
        list_add(&out, ks_nz(json_string_value(v)));
    if (*out)
        return str_cell_owned(out, "");
    free(out);
    return json_string(strcmp(type, "LoadBalancer") == 0 ? "<pending>" : "<none>");
}

/* Go's net.JoinHostPort: an IPv6 literal in brackets. malloc'd */
static char *join_host_port(const char *ip, json_int_t port)
{
    return strchr(ip, ':') ? ks_printf("[%s]:%lld", ip, (long long)port)
                           : ks_printf("%s:%lld", ip, (long long)port);
}

/* The list of at most 3 shown and the count of all, as printers.go's
 * formatEndpoints and listWithMoreString end: "a,b,c + N more...".
 * unset: what an empty list prints (NULL: ""). @ref new */
static json_t *more_cell(char *list, bool more, long count, const char *unset)
{
    char *s = more ? ks_printf("%s + %ld more...", list, count - 3)
                   : ks_strdup(*list || !unset ? list : unset);
    free(list);
    return str_cell_owned(s, "");
}

/* pkg/printers/internalversion/printers.go formatEndpoints (every port):
 * IP:PORT of the ready addresses of each subset and port (the bare IP for
 * a subset without ports), three of them and "+ N more..."; "<none>"
 * without subsets. */
static json_t *endpoints_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    const json_t *subsets = json_object_get(obj, "subsets");
    if (json_array_size(subsets) == 0)
        return json_string("<none>");
    char *list = ks_strdup("");
    size_t shown = 0, i, j, k;
    long count = 0;
    bool more = false;
    const json_t *ss, *port, *addr;
    json_array_foreach(subsets, i, ss)
    {
        const json_t *addrs = json_object_get(ss, "addresses");
        const json_t *ports = json_object_get(ss, "ports");
        size_t nports = json_array_size(ports);
        for (j = 0; j < (nports ? nports : 1); j++) {
            port = json_array_get(ports, j);
            count += (long)json_array_size(addrs);
            json_array_foreach(addrs, k, addr)
            {
                if (shown == 3) {
                    more = true;
                    break;
                }
                const char *ip = ks_nz(json_string_value(json_object_get(addr, "ip")));
                char *item =
                    port ? join_host_port(ip, json_integer_value(json_object_get(port, "port")))
                         : ks_strdup(ip);
                list_add(&list, item);
                free(item);
                shown++;
            }
        }
    }
    return more_cell(list, more, count, NULL);
}

/* printers.go formatDiscoveryPorts: each port's number, else its name,
 * else "*". */
static json_t *slice_ports_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    char *list = ks_strdup("");
    size_t i;
    long count = 0;
    bool more = false;
    const json_t *p;
    json_array_foreach(json_object_get(obj, "ports"), i, p)
    {
        const json_t *num = json_object_get(p, "port");
        const char *pname = json_string_value(json_object_get(p, "name"));
        if (count < 3) {
            char *item = json_is_integer(num)
                             ? ks_printf("%lld", (long long)json_integer_value(num))
                             : ks_strdup(pname ? pname : "*");
            list_add(&list, item);
            free(item);
        } else {
            more = true;
        }
        count++;
    }
    return more_cell(list, more, count, "<unset>");
}

/* printers.go formatDiscoveryEndpoints: every address of every endpoint. */
static json_t *slice_endpoints_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    char *list = ks_strdup("");
    size_t i, j;
    long count = 0;
    bool more = false;
    const json_t *ep, *a;
    json_array_foreach(json_object_get(obj, "endpoints"), i, ep)
    {
        json_array_foreach(json_object_get(ep, "addresses"), j, a)
        {
            if (count < 3)
                list_add(&list, ks_nz(json_string_value(a)));
            else
                more = true;
            count++;
        }
    }
    return more_cell(list, more, count, "<unset>");
}

/* printEvent's Last Seen: the last timestamp's age (else eventTime's),
 * "AGE (xN over FIRST)" for a repeated event. */
static json_t *event_last_seen(const json_t *obj, const char *arg)
{
    (void)arg;
    const char *last = str_at(obj, "lastTimestamp");
    if (!last || !*last)
        last = str_at(obj, "eventTime");
    json_t *age = age_cell(last);
    json_int_t count = json_integer_value(json_object_get(obj, "count"));
    if (count > 1) {
        json_t *first = age_cell(str_at(obj, "firstTimestamp"));
        char *s = ks_printf("%s (x%lld over %s)", json_string_value(age), (long long)count,
                            json_string_value(first));
        json_decref(first);
        json_decref(age);
        return str_cell_owned(s, "");
    }
    return age;
}

/* "kind/name" of the involved object, the kind in lower case. */
static json_t *event_object(const json_t *obj, const char *arg)
{
    (void)arg;
    char *kind = ks_strdup(ks_nz(str_at(obj, "involvedObject.kind")));
    for (char *k = kind; *k; k++)
        *k = (char)tolower((unsigned char)*k);
    char *object = ks_printf("%s/%s", kind, ks_nz(str_at(obj, "involvedObject.name")));
    free(kind);
    return str_cell_owned(object, "");
}

/* "component, host"; reportingComponent without source.component. */
static json_t *event_source(const json_t *obj, const char *arg)
{
    (void)arg;
    const char *comp = str_at(obj, "source.component");
    const char *host = str_at(obj, "source.host");
    if (!comp || !*comp)
        comp = str_at(obj, "reportingComponent");
    return str_cell_owned(
        host && *host ? ks_printf("%s, %s", ks_nz(comp), host) : ks_strdup(ks_nz(comp)), "");
}

/* printRoleBinding's Role: "Kind/name". */
static json_t *binding_role(const json_t *obj, const char *arg)
{
    (void)arg;
    return str_cell_owned(
        ks_printf("%s/%s", ks_nz(str_at(obj, "roleRef.kind")), ks_nz(str_at(obj, "roleRef.name"))),
        "");
}

/* rbac.SubjectsStrings of one kind (arg), joined by ", "; a
 * ServiceAccount as "namespace/name". */
static json_t *binding_subjects(const json_t *obj, const char *kind)
{
    bool sa = strcmp(kind, "ServiceAccount") == 0;
    char *list = ks_strdup("");
    size_t i;
    json_t *subj;
    json_array_foreach(json_object_get(obj, "subjects"), i, subj)
    {
        if (strcmp(ks_nz(str_at(subj, "kind")), kind) != 0)
            continue;
        char *one =
            sa ? ks_printf("%s/%s", ks_nz(str_at(subj, "namespace")), ks_nz(str_at(subj, "name")))
               : ks_strdup(ks_nz(str_at(subj, "name")));
        list = join_list(list, ", ", one);
        free(one);
    }
    return str_cell_owned(list, "");
}

/* printPod's Ready, Status and Restarts (pkg/printers/internalversion):
 * the phase or status.reason; an init container's trouble as Init:...;
 * a container's waiting or terminated reason; Terminating once deleted. */
static const char *state_reason(const json_t *cs, char *buf, size_t size)
{
    const json_t *w = at(cs, "state.waiting");
    const json_t *t = at(cs, "state.terminated");
    const char *r = str_at(w, "reason");
    if (r && *r)
        return r;
    if (!t)
        return NULL;
    r = str_at(t, "reason");
    if (r && *r)
        return r;
    json_int_t sig = json_integer_value(json_object_get(t, "signal"));
    if (sig)
        snprintf(buf, size, "Signal:%lld", (long long)sig);
    else
        snprintf(buf, size, "ExitCode:%lld",
                 (long long)json_integer_value(json_object_get(t, "exitCode")));
    return buf;
}

struct pod_summary {
    json_int_t ready, restarts;
    const char *reason; /* a constant, the object's or rbuf */
    char buf[64], rbuf[96];
};

/* The first init container that did not end well: Init:REASON or
 * Init:N/M. false when none. */
static bool pod_init_reason(const json_t *obj, struct pod_summary *s)
{
    size_t i, ninit = json_array_size(at(obj, "spec.initContainers"));
    const json_t *cs;
    json_array_foreach(at(obj, "status.initContainerStatuses"), i, cs)
    {
        s->restarts += json_integer_value(json_object_get(cs, "restartCount"));
        const json_t *t = at(cs, "state.terminated");
        if (t && json_integer_value(json_object_get(t, "exitCode")) == 0)
            continue;
        const char *r = state_reason(cs, s->buf, sizeof(s->buf));
        if (r && strcmp(r, "PodInitializing") != 0)
            snprintf(s->rbuf, sizeof(s->rbuf), "Init:%s", r);
        else
            snprintf(s->rbuf, sizeof(s->rbuf), "Init:%zu/%zu", i, ninit);
        s->reason = s->rbuf;
        return true;
    }
    return false;
}

static void pod_summarize(const json_t *obj, struct pod_summary *s)
{
    const json_t *status = json_object_get(obj, "status");
    const char *sr = str_at(status, "reason");
    s->ready = s->restarts = 0;
    s->reason = sr && *sr ? sr : ks_nz(str_at(status, "phase"));
    if (!pod_init_reason(obj, s)) {
        bool running = false;
        const json_t *list = json_object_get(status, "containerStatuses");
        for (size_t i = json_array_size(list); i-- > 0;) {
            const json_t *cs = json_array_get(list, i);
            s->restarts += json_integer_value(json_object_get(cs, "restartCount"));
            const char *r = state_reason(cs, s->buf, sizeof(s->buf));
            if (r) {
                snprintf(s->rbuf, sizeof(s->rbuf), "%s", r);
                s->reason = s->rbuf;
            } else if (at(cs, "state.running") && json_is_true(json_object_get(cs, "ready"))) {
                running = true;
                s->ready++;
            }
        }
        if (strcmp(s->reason, "Completed") == 0 && running)
            s->reason = ks_pod_ready(obj) ? "Running" : "NotReady";
    }
    if (str_at(obj, "metadata.deletionTimestamp"))
        s->reason =
            strcmp(ks_nz(str_at(status, "reason")), "NodeLost") == 0 ? "Unknown" : "Terminating";
}

static json_t *pod_ready(const json_t *obj, const char *arg)
{
    (void)arg;
    struct pod_summary s;
    pod_summarize(obj, &s);
    return str_cell_owned(
        ks_printf("%lld/%zu", (long long)s.ready, json_array_size(at(obj, "spec.containers"))), "");
}

static json_t *pod_status(const json_t *obj, const char *arg)
{
    (void)arg;
    struct pod_summary s;
    pod_summarize(obj, &s);
    return json_string(s.reason);
}

static json_t *pod_restarts(const json_t *obj, const char *arg)
{
    (void)arg;
    struct pod_summary s;
    pod_summarize(obj, &s);
    return str_cell_owned(ks_printf("%lld", (long long)s.restarts), "");
}

/* Readiness Gates: "met/all" of spec.readinessGates, "<none>" without. */
static json_t *pod_gates(const json_t *obj, const char *arg)
{
    (void)arg;
    const json_t *gates = at(obj, "spec.readinessGates");
    if (!json_array_size(gates))
        return json_string("<none>");
    size_t met = 0, g, i;
    const json_t *gate, *cs;
    json_array_foreach(gates, g, gate)
    {
        json_array_foreach(at(obj, "status.conditions"), i, cs)
        {
            if (strcmp(ks_nz(str_at(cs, "type")), ks_nz(str_at(gate, "conditionType"))) == 0 &&
                strcmp(ks_nz(str_at(cs, "status")), "True") == 0)
                met++;
        }
    }
    return str_cell_owned(ks_printf("%zu/%zu", met, json_array_size(gates)), "");
}

/* printNode's Status: the Ready condition as "Ready"/"NotReady" ("Unknown"
 * without it), then ",SchedulingDisabled" when cordoned. */
static json_t *node_status_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    const char *ready = ks_condition_status(obj, "Ready");
    const char *st = !ready ? "Unknown" : strcmp(ready, "True") == 0 ? "Ready" : "NotReady";
    bool cordoned = json_is_true(at(obj, "spec.unschedulable"));
    return str_cell_owned(ks_printf("%s%s", st, cordoned ? ",SchedulingDisabled" : ""), "");
}

/* findNodeRoles: node-role.kubernetes.io/ROLE labels and a non-empty
 * kubernetes.io/role, sorted and unique, comma-joined; "<none>". */
static json_t *node_roles_cell(const json_t *obj, const char *arg)
{
    (void)arg;
    json_t *roles = json_object();
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)at(obj, "metadata.labels"), k, v)
    {
        if (strncmp(k, "node-role.kubernetes.io/", 24) == 0 && k[24])
            json_object_set_new(roles, k + 24, json_true());
        else if (strcmp(k, "kubernetes.io/role") == 0 && json_string_length(v))
            json_object_set_new(roles, json_string_value(v), json_true());
    }
    size_t n;
    const char **keys = ks_sorted_keys(roles, &n);
    char *out = ks_strdup("");
    for (size_t i = 0; i < n; i++)
        list_add(&out, keys[i]);
    free(keys);
    json_t *cell = json_string(n ? out : "<none>");
    free(out);
    json_decref(roles);
    return cell;
}

/* The first address of a type (arg), or "<none>". */
static json_t *node_address_cell(const json_t *obj, const char *type)
{
    size_t i;
    const json_t *a;
    json_array_foreach(at(obj, "status.addresses"), i, a)
    {
        if (strcmp(ks_nz(json_string_value(json_object_get(a, "type"))), type) == 0)
            return json_string(ks_nz(json_string_value(json_object_get(a, "address"))));
    }
    return json_string("<none>");
}

/* A status.nodeInfo member (arg), "<unknown>" when empty. */
static json_t *node_info_cell(const json_t *obj, const char *path)
{
    const char *v = str_at(obj, path);
    return json_string(v && *v ? v : "<unknown>");
}

/* ---- the printers (printers.go's column definitions) ---- */

/* clang-format off */
#define NAME_COL {"Name", "string", "name", name_desc, 0, str_cell, "metadata.name"}
#define AGE_COL {"Age", "string", NULL, age_desc, 0, age_at, "metadata.creationTimestamp"}
#define COLS(cols) cols, sizeof(cols) / sizeof(cols[0])

/* The wide columns of a kind with a pod template (Deployment, ReplicaSet). */
#define TEMPLATE_COLS(selector_desc)                                                            \
    {"Containers", "string", NULL, "Names of each container in the template.", 1,              \
     containers_cell, "name"},                                                                  \
    {"Images", "string", NULL, "Images referenced by each container in the template.", 1,      \
     containers_cell, "image"},                                                                 \
    {"Selector", "string", NULL, selector_desc, 1, map_cell, "spec.selector.matchLabels"}
/* clang-format on */

static const struct column deployment_cols[] = {
    NAME_COL,
    {"Ready", "string", NULL, "Number of the pod with ready state", 0, deployment_ready, NULL},
    {"Up-to-date", "integer", NULL,
     "Total number of non-terminating pods targeted by this deployment that have the desired "
     "template spec.",
     0, int_cell, "status.updatedReplicas"},
    {"Available", "integer", NULL,
     "Total number of available non-terminating pods (ready for at least minReadySeconds) "
     "targeted by this deployment.",
     0, int_cell, "status.availableReplicas"},
    AGE_COL,
    TEMPLATE_COLS("Label selector for pods. Existing ReplicaSets whose pods are selected by this "
                  "will be the ones affected by this deployment. It must match the pod "
                  "template's labels."),
};

static const struct column replicaset_cols[] = {
    NAME_COL,
    {"Desired", "integer", NULL, "Replicas is the number of desired pods.", 0, replicas_cell, NULL},
    {"Current", "integer", NULL,
     "Replicas is the most recently observed number of non-terminating pods.", 0, int_cell,
     "status.replicas"},
    {"Ready", "integer", NULL,
     "The number of non-terminating pods targeted by this ReplicaSet with a Ready Condition.", 0,
     int_cell, "status.readyReplicas"},
    AGE_COL,
    TEMPLATE_COLS("Selector is a label query over pods that should match the replica count."),
};

static const char node_addresses_desc[] =
    "List of addresses reachable to the node. Queried from cloud provider, if available. More "
    "info: https://kubernetes.io/docs/reference/node/node-status/#addresses Note: This field is "
    "declared as mergeable, but the merge key is not sufficiently unique, which can cause data "
    "corruption when it is merged. Callers should instead use a full-replacement patch. See "
    "https://pr.k8s.io/79391 for an example. Consumers should assume that addresses can change "
    "during the lifetime of a Node. However, there are some exceptions where this may not be "
    "possible, such as Pods that inherit a Node's address in its own status or consumers of the "
    "downward API (status.hostIP).";

static const struct column node_cols[] = {
    NAME_COL,
    {"Status", "string", NULL, "The status of the node", 0, node_status_cell, NULL},
    {"Roles", "string", NULL, "The roles of the node", 0, node_roles_cell, NULL},
    AGE_COL,
    {"Version", "string", NULL, "Kubelet Version reported by the node.", 0, str_cell,
     "status.nodeInfo.kubeletVersion"},
    {"Internal-IP", "string", NULL, node_addresses_desc, 1, node_address_cell, "InternalIP"},
    {"External-IP", "string", NULL, node_addresses_desc, 1, node_address_cell, "ExternalIP"},
    {"OS-Image", "string", NULL,
     "OS Image reported by the node from /etc/os-release (e.g. Debian GNU/Linux 7 (wheezy)).", 1,
     node_info_cell, "status.nodeInfo.osImage"},
    {"Kernel-Version", "string", NULL,
     "Kernel Version reported by the node from 'uname -r' (e.g. 3.16.0-0.bpo.4-amd64).", 1,
     node_info_cell, "status.nodeInfo.kernelVersion"},
    {"Container-Runtime", "string", NULL,
     "ContainerRuntime Version reported by the node through runtime remote API (e.g. "
     "containerd://1.4.2).",
     1, node_info_cell, "status.nodeInfo.containerRuntimeVersion"},
};

static const struct column pod_cols[] = {
    NAME_COL,
    {"Ready", "string", NULL, "The aggregate readiness state of this pod for accepting traffic.", 0,
     pod_ready, NULL},
    {"Status", "string", NULL, "The aggregate status of the containers in this pod.", 0, pod_status,
     NULL},
    {"Restarts", "string", NULL,
     "The number of times the containers in this pod have been restarted and when the last "
     "container in this pod has restarted.",
     0, pod_restarts, NULL},
    AGE_COL,
    {"IP", "string", NULL,
     "podIP address allocated to the pod. Routable at least within the cluster. Empty if not yet "
     "allocated.",
     1, str_or_none, "status.podIP"},
    {"Node", "string", NULL,
     "NodeName indicates in which node this pod is scheduled. If empty, this pod is a candidate "
     "for scheduling by the scheduler defined in schedulerName. Once this field is set, the "
     "kubelet for this node becomes responsible for the lifecycle of this pod. This field should "
     "not be used to express a desire for the pod to be scheduled on a specific node. "
     "https://kubernetes.io/docs/concepts/scheduling-eviction/assign-pod-node/#nodename",
     1, str_or_none, "spec.nodeName"},
    {"Nominated Node", "string", NULL,
     "nominatedNodeName is set only when this pod preempts other pods on the node, but it cannot "
     "be scheduled right away as preemption victims receive their graceful termination periods. "
     "This field does not guarantee that the pod will be scheduled on this node. Scheduler may "
     "decide to place the pod elsewhere if other nodes become available sooner. Scheduler may "
     "also decide to give the resources on this node to a higher priority pod that is created "
     "after preemption. As a result, this field may be different than PodSpec.nodeName when the "
     "pod is scheduled.",
     1, str_or_none, "status.nominatedNodeName"},
    {"Readiness Gates", "string", NULL,
     "If specified, all readiness gates will be evaluated for pod readiness. A pod is ready when "
     "all its containers are ready AND all conditions specified in the readiness gates have "
     "status equal to \"True\" More info: "
     "https://git.k8s.io/enhancements/keps/sig-network/580-pod-readiness-gates",
     1, pod_gates, NULL},
};

static const struct column service_cols[] = {
    NAME_COL,
    {"Type", "string", NULL, "type determines how the Service is exposed.", 0, str_cell,
     "spec.type"},
    {"Cluster-IP", "string", NULL, "clusterIP is the IP address of the service.", 0, str_or_none,
     "spec.clusterIP"},
    {"External-IP", "string", NULL,
     "externalIPs is a list of IP addresses for which nodes in the cluster will also accept "
     "traffic for this service.",
     0, service_external, NULL},
    {"Port(s)", "string", NULL, "The list of ports that are exposed by this service.", 0,
     service_ports, NULL},
    AGE_COL,
    {"Selector", "string", NULL,
     "Route service traffic to pods with label keys and values matching this selector.", 1,
     map_cell, "spec.selector"},
};

static const struct column namespace_cols[] = {
    NAME_COL,
    {"Status", "string", NULL, "The status of the namespace", 0, str_cell, "status.phase"},
    AGE_COL,
};

static const struct column configmap_cols[] = {
    NAME_COL,
    {"Data", "string", NULL, "Data contains the configuration data.", 0, data_cell, NULL},
    AGE_COL,
};

static const struct column secret_cols[] = {
    NAME_COL,
    {"Type", "string", NULL, "Used to facilitate programmatic handling of secret data.", 0,
     str_cell, "type"},
    {"Data", "string", NULL, "Data contains the secret data.", 0, data_cell, NULL},
    AGE_COL,
};

static const struct column event_cols[] = {
    {"Last Seen", "string", NULL,
     "The time at which the most recent occurrence of this event was recorded.", 0, event_last_seen,
     NULL},
    {"Type", "string", NULL,
     "Type of this event (Normal, Warning), new types could be added in the future", 0, str_cell,
     "type"},
    {"Reason", "string", NULL,
     "This should be a short, machine understandable string that gives the reason for the "
     "transition into the object's current status.",
     0, str_cell, "reason"},
    {"Object", "string", NULL, "The object that this event is about.", 0, event_object, NULL},
    {"Subobject", "string", NULL, "The subobject that this event is about.", 1, str_cell,
     "involvedObject.fieldPath"},
    {"Source", "string", NULL,
     "The component reporting this event. Should be a short machine understandable string.", 1,
     event_source, NULL},
    {"Message", "string", NULL, "A human-readable description of the status of this operation.", 0,
     str_cell, "message"},
    {"First Seen", "string", NULL,
     "The time at which the event was first recorded. (Time of server receipt is in TypeMeta.)", 1,
     age_at, "firstTimestamp"},
    {"Count", "string", NULL, "The number of times this event has occurred.", 1, int_str_cell,
     "count"},
    {"Name", "string", "name", name_desc, 1, str_cell, "metadata.name"},
};

static const struct column lease_cols[] = {
    NAME_COL,
    {"Holder", "string", NULL,
     "holderIdentity contains the identity of the holder of a current lease.", 0, str_cell,
     "spec.holderIdentity"},
    AGE_COL,
};

/* clang-format off */
#define BINDING_COLS(role_desc, binding)                                                        \
    NAME_COL,                                                                                   \
    {"Role", "string", NULL, role_desc, 0, binding_role, NULL},                                 \
    AGE_COL,                                                                                    \
    {"Users", "string", NULL, "Users in the " binding, 1, binding_subjects, "User"},            \
    {"Groups", "string", NULL, "Groups in the " binding, 1, binding_subjects, "Group"},         \
    {"ServiceAccounts", "string", NULL, "ServiceAccounts in the " binding, 1, binding_subjects, \
     "ServiceAccount"}
/* clang-format on */

static const struct column rolebinding_cols[] = {
    BINDING_COLS("RoleRef can reference a Role in the current namespace or a ClusterRole in the "
                 "global namespace. If the RoleRef cannot be resolved, the Authorizer must return "
                 "an error. This field is immutable.",
                 "roleBinding"),
};

static const struct column clusterrolebinding_cols[] = {
    BINDING_COLS("RoleRef can only reference a ClusterRole in the global namespace. If the "
                 "RoleRef cannot be resolved, the Authorizer must return an error. This field is "
                 "immutable.",
                 "clusterRoleBinding"),
};

static const struct column endpoints_cols[] = {
    NAME_COL,
    {"Endpoints", "string", NULL,
     "The set of all endpoints is the union of all subsets. Addresses are placed into subsets "
     "according to the IPs they share. A single address with multiple ports, some of which are "
     "ready and some of which are not (because they come from different containers) will result "
     "in the address being displayed in different subsets for the different ports. No address "
     "will appear in both Addresses and NotReadyAddresses in the same subset. Sets of addresses "
     "and ports that comprise a service.",
     0, endpoints_cell, NULL},
    AGE_COL,
};

static const struct column pdb_cols[] = {
    NAME_COL,
    {"Min Available", "string", NULL, "The minimum number of pods that must be available.", 0,
     int_or_string_cell, "spec.minAvailable"},
    {"Max Unavailable", "string", NULL, "The maximum number of pods that may be unavailable.", 0,
     int_or_string_cell, "spec.maxUnavailable"},
    {"Allowed Disruptions", "integer", NULL,
     "Calculated number of pods that may be disrupted at this time.", 0, int_cell,
     "status.disruptionsAllowed"},
    AGE_COL,
};

/* discovery v1beta1's descriptions */
static const struct column endpointslice_cols[] = {
    NAME_COL,
    {"AddressType", "string", NULL,
     "addressType specifies the type of address carried by this EndpointSlice. All addresses in "
     "this slice must be the same type. This field is immutable after creation. The following "
     "address types are currently supported: * IPv4: Represents an IPv4 Address. * IPv6: "
     "Represents an IPv6 Address. * FQDN: Represents a Fully Qualified Domain Name.",
     0, str_cell, "addressType"},
    {"Ports", "string", NULL,
     "ports specifies the list of network ports exposed by each endpoint in this slice. Each port "
     "must have a unique name. When ports is empty, it indicates that there are no defined "
     "ports. When a port is defined with a nil port value, it indicates \"all ports\". Each "
     "slice may include a maximum of 100 ports.",
     0, slice_ports_cell, NULL},
    {"Endpoints", "string", NULL,
     "endpoints is a list of unique endpoints in this slice. Each slice may include a maximum of "
     "1000 endpoints.",
     0, slice_endpoints_cell, NULL},
    AGE_COL,
};

static const struct column serviceaccount_cols[] = {
    NAME_COL,
    {"Secrets", "string", NULL,
     "Secrets is a list of the secrets in the same namespace that pods running using this "
     "ServiceAccount are allowed to use.",
     0, count_cell, "secrets"},
    AGE_COL,
};

static const struct column webhook_cols[] = {
    NAME_COL,
    {"Webhooks", "integer", NULL,
     "Webhooks indicates the number of webhooks registered in this configuration", 0, count_cell,
     "webhooks"},
    AGE_COL,
};

/* No printer: the apiserver's default table convertor (registry/rest
 * table.go), the creation time in RFC 3339, UTC. */
static const struct column default_convertor_cols[] = {
    NAME_COL,
    {"Created At", "date", NULL, age_desc, 0, time_cell, "metadata.creationTimestamp"},
};

/* Any other kind. */
static const struct column name_age_cols[] = {NAME_COL, AGE_COL};

static const struct printer printers[] = {
    {"deployments.apps", COLS(deployment_cols)},
    {"replicasets.apps", COLS(replicaset_cols)},
    {"nodes", COLS(node_cols)},
    {"pods", COLS(pod_cols)},
    {"services", COLS(service_cols)},
    {"namespaces", COLS(namespace_cols)},
    {"configmaps", COLS(configmap_cols)},
    {"secrets", COLS(secret_cols)},
    {"events", COLS(event_cols)},
    {"leases.coordination.k8s.io", COLS(lease_cols)},
    {"rolebindings.rbac.authorization.k8s.io", COLS(rolebinding_cols)},
    {"clusterrolebindings.rbac.authorization.k8s.io", COLS(clusterrolebinding_cols)},
    {"endpoints", COLS(endpoints_cols)},
    {"poddisruptionbudgets.policy", COLS(pdb_cols)},
    {"endpointslices.discovery.k8s.io", COLS(endpointslice_cols)},
    {"serviceaccounts", COLS(serviceaccount_cols)},
    {"validatingwebhookconfigurations.admissionregistration.k8s.io", COLS(webhook_cols)},
    {"mutatingwebhookconfigurations.admissionregistration.k8s.io", COLS(webhook_cols)},
    {"roles.rbac.authorization.k8s.io", COLS(default_convertor_cols)},
    {"clusterroles.rbac.authorization.k8s.io", COLS(default_convertor_cols)},
    {"customresourcedefinitions.apiextensions.k8s.io", COLS(default_convertor_cols)},
};

static const struct printer name_age_printer = {NULL, COLS(name_age_cols)};

static const struct printer *printer_for(const struct ks_res *def)
{
    for (size_t i = 0; i < sizeof(printers) / sizeof(printers[0]); i++) {
        if (strcmp(printers[i].key, def->key) == 0)
            return &printers[i];
    }
    return &name_age_printer;
}

static json_t *col(const char *name, const char *type, const char *format, const char *desc,
                   int priority)
{
    return json_pack("{s:s,s:s,s:s,s:s,s:i}", "name", name, "type", type, "format",
                     format ? format : "", "description", desc, "priority", priority);
}

static json_t *builtin_columns(const struct printer *p)
{
    json_t *cols = json_array();
    for (size_t i = 0; i < p->ncols; i++) {
        const struct column *c = &p->cols[i];
        json_array_append_new(cols, col(c->name, c->type, c->format, c->desc, c->priority));
    }
    return cols;
}

static json_t *builtin_cells(const struct printer *p, const json_t *obj)
{
    json_t *cells = json_array();
    for (size_t i = 0; i < p->ncols; i++)
        json_array_append_new(cells, p->cols[i].cell(obj, p->cols[i].arg));
    return cells;
}

/* The CRD's columns for a version (default: Age). @ref borrow or NULL */
static json_t *crd_columns(const struct ks_res *def, const char *version)
{
    const struct ks_version *v = ks_res_version(def, version);
    return v && json_array_size(v->columns) ? v->columns : NULL;
}

static void crd_row(const struct ks_res *def, const char *version, const json_t *obj, json_t *cols,
                    json_t *cells)
{
    const json_t *extra = crd_columns(def, version);
    if (cols)
        json_array_append_new(cols, col("Name", "string", "name", name_desc, 0));
    json_array_append_new(cells, json_string(ks_nz(str_at(obj, "metadata.name"))));
    if (!extra) {
        if (cols)
            json_array_append_new(cols, col("Age", "date", NULL, age_desc, 0));
        json_array_append_new(cells, age_cell(str_at(obj, "metadata.creationTimestamp")));
        return;
    }
    size_t i;
    const json_t *c;
    json_array_foreach(extra, i, c)
    {
        const char *path = ks_nz(str_at(c, "jsonPath"));
        const char *type = ks_nz(str_at(c, "type"));
        if (cols) {
            const char *desc = str_at(c, "description");
            char *d =
                desc && *desc
                    ? ks_strdup(desc)
                    : ks_printf("Custom resource definition column (in JSONPath format): %s", path);
            json_array_append_new(cols,
                                  col(ks_nz(str_at(c, "name")), type, str_at(c, "format"), d,
                                      (int)json_integer_value(json_object_get(c, "priority"))));
            free(d);
        }
        json_array_append_new(cells, crd_cell(type, eval_path(obj, path)));
    }
}

/* The row's object as includeObject asks. @ref new or NULL */
static json_t *row_object(const json_t *obj, const char *table_version, enum ks_include inc)
{
    if (inc == KS_INCLUDE_NONE)
        return NULL;
    if (inc == KS_INCLUDE_OBJECT)
        return json_deep_copy(obj);
    return ks_partial_object(obj, table_version);
}

json_t *ks_table_build(const struct ks_res *def, const char *version, const json_t *objs,
                       const json_t *list_md, const char *table_version, enum ks_include inc,
                       bool headers)
{
    json_t *table = json_object();
    char *av = ks_printf("meta.k8s.io/%s", table_version);
    json_object_set_new(table, "kind", json_string("Table"));
    json_object_set_new(table, "apiVersion", json_string(av));
    free(av);
    json_object_set_new(table, "metadata", list_md ? json_deep_copy(list_md) : json_object());
    const struct printer *p = def->crd ? NULL : printer_for(def);
    json_t *cols = p ? builtin_columns(p) : json_array();
    json_t *rows = json_array();
    size_t i;
    const json_t *o;
    json_array_foreach(objs, i, o)
    {
        json_t *cells;
        if (p) {
            cells = builtin_cells(p, o);
        } else {
            cells = json_array();
            crd_row(def, version, o, i == 0 ? cols : NULL, cells);
        }
        json_t *row = json_pack("{s:o}", "cells", cells);
        json_t *ro = row_object(o, table_version, inc);
        json_object_set_new(row, "object", ro ? ro : json_null());
        json_array_append_new(rows, row);
    }
    if (!p && json_array_size(objs) == 0) {
        /* A CRD's headers do not depend on an object. */
        json_t *cells = json_array();
        json_t *empty = json_pack("{s:{}}", "metadata");
        crd_row(def, version, empty, cols, cells);
        json_decref(empty);
        json_decref(cells);
    }
    if (headers)
        json_object_set_new(table, "columnDefinitions", cols);
    else {
        json_decref(cols);
        json_object_set_new(table, "columnDefinitions", json_null());
    }
    json_object_set_new(table, "rows", rows);
    return table;
}
