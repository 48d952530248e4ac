/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's stand-in for a Service in front of pods: a webhook clientConfig
 * that names a Service (namespace, name, port) is sent to one of the
 * Service's endpoints, loopback HOST:PORT addresses, each ready or not
 * (independent of the Pods and Endpoints kubesim keeps). The sets come from
 *   --service NS/NAME=HOST:PORT[,HOST:PORT...]   (all ready, at start)
 *   POST /_kubesim/endpoints {"service":"ns/name",
 *        "endpoints":[{"address":"H:P","ready":true}]}   replaces the set
 * and, the older single-target form, /_kubesim/services:
 *   POST   {"namespace","name","target":"H:P"}   one ready endpoint
 *   DELETE {"namespace","name"}                  remove the Service
 *   GET                                          list
 *
 * DESIGN (propagation): the apiserver dials a Service's ClusterIP and the
 * node's proxy picks a ready endpoint per new connection; a change of the
 * EndpointSlice reaches that proxy a moment later, and connections already
 * established stay with their endpoint until one side closes them. So a set
 * posted to /_kubesim/endpoints is queued with a due time (now +
 * --endpoint-propagation-delay); a new connection uses the newest set whose
 * due time has passed (ks_services_pick). /_kubesim/services and the
 * --service flag take effect at once (test setup, not a rollout; the
 * former also closes the Service's idle pooled connections, http.c). The
 * connection pool (whclient.c) never consults the set for a pooled
 * connection.
 *
 * Everything here is under ks->lock; a webhook call copies the address it
 * picked and dials without the lock.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A DNS-1123 label: what Service and Namespace names are. */
static bool is_label(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 63 || s[0] == '-' || s[n - 1] == '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-'))
            return false;
    }
    return true;
}

/* HOST:PORT (HOST may be [v6]); the port 1..65535. */
static bool is_target(const char *s)
{
    const char *colon = strrchr(s, ':');
    if (!colon || colon == s || strlen(s) > 255)
        return false;
    for (const char *p = s; p < colon; p++)
        if (*p == '/' || *p == ' ' || *p == '\\' || *p == ',' || (unsigned char)*p < 0x21)
            return false;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    return colon[1] >= '0' && colon[1] <= '9' && end && *end == '\0' && port > 0 && port <= 65535;
}

static void epset_free(struct ks_epset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->eps[i].addr);
    free(s->eps);
    s->eps = NULL;
    s->n = 0;
}

static struct ks_service_map *find(struct ks_server *ks, const char *ns, const char *name)
{
    for (size_t i = 0; i < ks->nservices; i++)
        if (strcmp(ks->services[i].ns, ns) == 0 && strcmp(ks->services[i].name, name) == 0)
            return &ks->services[i];
    return NULL;
}

/* Find or add the Service; NULL on ENOMEM. */
static struct ks_service_map *find_or_add(struct ks_server *ks, const char *ns, const char *name)
{
    struct ks_service_map *m = find(ks, ns, name);
    if (m)
        return m;
    struct ks_service_map *nm = realloc(ks->services, (ks->nservices + 1) * sizeof(*nm));
    if (!nm)
        return NULL;
    ks->services = nm;
    m = &ks->services[ks->nservices++];
    memset(m, 0, sizeof(*m));
    m->ns = ks_strdup(ns);
    m->name = ks_strdup(name);
    return m;
}

/* Queue set (stolen) to become visible at due_ms; a set due now replaces
 * everything queued before it. */
static int publish(struct ks_service_map *m, struct ks_epset *set)
{
    if (set->due_ms <= ks_mono_ms()) {
        for (size_t i = 0; i < m->nsets; i++)
            epset_free(&m->sets[i]);
        m->nsets = 0;
    }
    struct ks_epset *ns = realloc(m->sets, (m->nsets + 1) * sizeof(*ns));
    if (!ns) {
        epset_free(set);
        return -ENOMEM;
    }
    m->sets = ns;
    m->sets[m->nsets++] = *set;
    return 0;
}

static int check_names(const char *ns, const char *name, char **ret_err)
{
    if (!ns || !is_label(ns) || !name || !is_label(name)) {
        *ret_err = ks_strdup("namespace and name must be DNS labels (lowercase letters, digits "
                             "and '-', at most 63)");
        return -EINVAL;
    }
    return 0;
}

int ks_services_set(struct ks_server *ks, const char *ns, const char *name, const char *target,
                    char **ret_err)
{
    if (check_names(ns, name, ret_err) != 0)
        return -EINVAL;
    if (!target || !is_target(target)) {
        *ret_err = ks_strdup("target must be HOST:PORT");
        return -EINVAL;
    }
    struct ks_service_map *m = find_or_add(ks, ns, name);
    struct ks_epset set = {.eps = calloc(1, sizeof(struct ks_endpoint)), .n = 1, .due_ms = 0};
    if (!m || !set.eps) {
        free(set.eps);
        *ret_err = ks_strdup("out of memory");
        return -ENOMEM;
    }
    set.eps[0].addr = ks_strdup(target);
    set.eps[0].ready = true;
    return publish(m, &set);
}

int ks_services_set_endpoints(struct ks_server *ks, const json_t *doc, char **ret_err)
{
    const char *svc = json_string_value(json_object_get(doc, "service"));
    const json_t *list = json_object_get(doc, "endpoints");
    const char *slash = svc ? strchr(svc, '/') : NULL;
    if (!slash || !json_is_array(list)) {
        *ret_err = ks_strdup("body must be {\"service\":\"namespace/name\",\"endpoints\":"
                             "[{\"address\":\"HOST:PORT\",\"ready\":true}]}");
        return -EINVAL;
    }
    char *ns = strndup(svc, (size_t)(slash - svc));
    const char *name = slash + 1;
    int rc = ns ? check_names(ns, name, ret_err) : -ENOMEM;
    struct ks_epset set = {0};
    if (rc != 0)
        goto out;
    set.eps = calloc(json_array_size(list) + 1, sizeof(struct ks_endpoint));
    if (!set.eps) {
        rc = -ENOMEM;
        goto out;
    }
    size_t i;
    json_t *e;
    json_array_foreach(list, i, e)
    {
        const char *addr = json_string_value(json_object_get(e, "address"));
        const json_t *ready = json_object_get(e, "ready");
        if (!addr || !is_target(addr) || (ready && !json_is_boolean(ready))) {
            *ret_err =
                ks_printf("endpoints[%zu]: address must be HOST:PORT and ready a boolean", i);
            rc = -EINVAL;
            goto out;
        }
        set.eps[set.n].addr = ks_strdup(addr);
        /* EndpointConditions.ready: nil means ready (discovery/v1 types.go) */
        set.eps[set.n].ready = !ready || json_is_true(ready);
        set.n++;
    }
    set.due_ms = ks_mono_ms() + ks->propagation_ms;
    struct ks_service_map *m = find_or_add(ks, ns, name);
    if (!m) {
        rc = -ENOMEM;
        goto out;
    }
    rc = publish(m, &set);
    set.eps = NULL;
    set.n = 0;
out:
    epset_free(&set);
    free(ns);
    return rc;
}

int ks_services_remove(struct ks_server *ks, const char *ns, const char *name)
{
    for (size_t i = 0; i < ks->nservices; i++) {
        struct ks_service_map *m = &ks->services[i];
        if (strcmp(m->ns, ks_nz(ns)) != 0 || strcmp(m->name, ks_nz(name)) != 0)
            continue;
        free(m->ns);
        free(m->name);
        for (size_t s = 0; s < m->nsets; s++)
            epset_free(&m->sets[s]);
        free(m->sets);
        memmove(m, m + 1, (ks->nservices - i - 1) * sizeof(*m));
        ks->nservices--;
        return 0;
    }
    return -ENOENT;
}

int ks_services_add_flag(struct ks_server *ks, const char *spec)
{
    const char *slash = strchr(spec, '/');
    const char *eq = strchr(spec, '=');
    if (!slash || !eq || eq < slash)
        return -EINVAL;
    char *ns = strndup(spec, (size_t)(slash - spec));
    char *name = strndup(slash + 1, (size_t)(eq - slash - 1));
    json_t *eps = json_array();
    char *err = NULL;
    int rc = ns && name ? 0 : -ENOMEM;
    for (const char *p = eq + 1; rc == 0;) {
        const char *comma = strchr(p, ',');
        char *addr = comma ? strndup(p, (size_t)(comma - p)) : ks_strdup(p);
        json_array_append_new(eps, json_pack("{s:s,s:b}", "address", addr ? addr : "", "ready", 1));
        free(addr);
        if (!comma)
            break;
        p = comma + 1;
    }
    if (rc == 0) {
        json_t *doc =
            json_pack("{s:s%,s:O}", "service", spec, (size_t)(eq - spec), "endpoints", eps);
        long delay = ks->propagation_ms;
        ks->propagation_ms = 0; /* at start: in place before anything dials */
        rc = ks_services_set_endpoints(ks, doc, &err);
        ks->propagation_ms = delay;
        json_decref(doc);
    }
    if (rc != 0 && err)
        fprintf(stderr, "kubesim: --service %s: %s\n", spec, err);
    json_decref(eps);
    free(err);
    free(ns);
    free(name);
    return rc;
}

/* Drop the sets that a newer due set has replaced; the set new connections
 * use now, or NULL when none is due yet. */
static const struct ks_epset *active(struct ks_service_map *m, long long now)
{
    size_t last = m->nsets;
    for (size_t i = 0; i < m->nsets; i++)
        if (m->sets[i].due_ms <= now)
            last = i;
    if (last == m->nsets)
        return NULL;
    for (size_t i = 0; i < last; i++)
        epset_free(&m->sets[i]);
    memmove(m->sets, m->sets + last, (m->nsets - last) * sizeof(*m->sets));
    m->nsets -= last;
    return &m->sets[0];
}

static json_t *describe_set(const struct ks_epset *s)
{
    json_t *a = json_array();
    for (size_t i = 0; s && i < s->n; i++)
        json_array_append_new(
            a, json_pack("{s:s,s:b}", "address", s->eps[i].addr, "ready", s->eps[i].ready));
    return a;
}

json_t *ks_services_describe(struct ks_server *ks)
{
    json_t *list = json_array();
    long long now = ks_mono_ms();
    for (size_t i = 0; i < ks->nservices; i++) {
        struct ks_service_map *m = &ks->services[i];
        const struct ks_epset *cur = active(m, now);
        const struct ks_epset *latest = m->nsets ? &m->sets[m->nsets - 1] : NULL;
        const char *target = "";
        for (size_t e = 0; cur && e < cur->n && !*target; e++)
            if (cur->eps[e].ready)
                target = cur->eps[e].addr;
        json_array_append_new(list, json_pack("{s:s,s:s,s:s,s:o,s:o}", "namespace", m->ns, "name",
                                              m->name, "target", target, "endpoints",
                                              describe_set(latest), "active", describe_set(cur)));
    }
    return json_pack("{s:o}", "services", list);
}

int ks_services_pick(struct ks_server *ks, const char *ns, const char *name, char **ret_addr)
{
    int rc = -ENOENT;
    pthread_mutex_lock(&ks->lock);
    struct ks_service_map *m = find(ks, ns, name);
    const struct ks_epset *s = m ? active(m, ks_mono_ms()) : NULL;
    if (m)
        rc = -EHOSTUNREACH;
    size_t nready = 0;
    for (size_t i = 0; s && i < s->n; i++)
        nready += s->eps[i].ready;
    if (nready > 0) {
        /* xorshift64*, its own stream so --seed fault sequences stay put */
        uint64_t x = ks->ep_rng ? ks->ep_rng : 0x9e3779b97f4a7c15ull;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        ks->ep_rng = x;
        size_t k = (size_t)(((x * 0x2545f4914f6cdd1dull) >> 11) % nready);
        for (size_t i = 0; i < s->n; i++) {
            if (!s->eps[i].ready)
                continue;
            if (k-- == 0) {
                *ret_addr = ks_strdup(s->eps[i].addr);
                rc = 0;
                break;
            }
        }
    }
    pthread_mutex_unlock(&ks->lock);
    return rc;
}

void ks_services_free(struct ks_server *ks)
{
    while (ks->nservices > 0)
        ks_services_remove(ks, ks->services[0].ns, ks->services[0].name);
    free(ks->services);
    ks->services = NULL;
}
