/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim's stand-in for Service routing: a webhook clientConfig that names
 * a Service (namespace, name, port) is sent to a loopback HOST:PORT instead
 * (there are no Pods or Endpoints here). The map comes from --service
 * NS/NAME=HOST:PORT flags at start and from /_kubesim/services at run time:
 *   POST   {"namespace":"kop-system","name":"kop-webhook-service",
 *           "target":"127.0.0.1:9443"}      add or replace
 *   DELETE {"namespace":"kop-system","name":"kop-webhook-service"}  remove
 *   GET                                      list
 * each answering {"services":[{"namespace","name","target"}]}. The map is
 * under ks->lock; a webhook call copies its target and calls without it.
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
        if (*p == '/' || *p == ' ' || *p == '\\' || (unsigned char)*p < 0x21)
            return false;
    char *end = NULL;
    long port = strtol(colon + 1, &end, 10);
    return colon[1] >= '0' && colon[1] <= '9' && end && *end == '\0' && port > 0 && port <= 65535;
}

int ks_services_set(struct ks_server *ks, const char *ns, const char *name, const char *target,
                    char **ret_err)
{
    if (!ns || !is_label(ns) || !name || !is_label(name)) {
        *ret_err = ks_strdup("namespace and name must be DNS labels (lowercase letters, digits "
                             "and '-', at most 63)");
        return -EINVAL;
    }
    if (!target || !is_target(target)) {
        *ret_err = ks_strdup("target must be HOST:PORT");
        return -EINVAL;
    }
    for (size_t i = 0; i < ks->nservices; i++) {
        struct ks_service_map *m = &ks->services[i];
        if (strcmp(m->ns, ns) == 0 && strcmp(m->name, name) == 0) {
            char *t = ks_strdup(target);
            free(m->hostport);
            m->hostport = t;
            return 0;
        }
    }
    struct ks_service_map *nm = realloc(ks->services, (ks->nservices + 1) * sizeof(*nm));
    if (!nm) {
        *ret_err = ks_strdup("out of memory");
        return -ENOMEM;
    }
    ks->services = nm;
    struct ks_service_map *m = &ks->services[ks->nservices++];
    m->ns = ks_strdup(ns);
    m->name = ks_strdup(name);
    m->hostport = ks_strdup(target);
    return 0;
}

int ks_services_remove(struct ks_server *ks, const char *ns, const char *name)
{
    for (size_t i = 0; i < ks->nservices; i++) {
        struct ks_service_map *m = &ks->services[i];
        if (strcmp(m->ns, ks_nz(ns)) != 0 || strcmp(m->name, ks_nz(name)) != 0)
            continue;
        free(m->ns);
        free(m->name);
        free(m->hostport);
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
    char *err = NULL;
    int rc = ns && name ? ks_services_set(ks, ns, name, eq + 1, &err) : -ENOMEM;
    if (rc != 0 && err)
        fprintf(stderr, "kubesim: --service %s: %s\n", spec, err);
    free(err);
    free(ns);
    free(name);
    return rc;
}

json_t *ks_services_describe(struct ks_server *ks)
{
    json_t *list = json_array();
    for (size_t i = 0; i < ks->nservices; i++)
        json_array_append_new(list,
                              json_pack("{s:s,s:s,s:s}", "namespace", ks->services[i].ns, "name",
                                        ks->services[i].name, "target", ks->services[i].hostport));
    return json_pack("{s:o}", "services", list);
}

char *ks_services_lookup(struct ks_server *ks, const char *ns, const char *name)
{
    char *target = NULL;
    pthread_mutex_lock(&ks->lock);
    for (size_t i = 0; i < ks->nservices; i++)
        if (strcmp(ks->services[i].ns, ns) == 0 && strcmp(ks->services[i].name, name) == 0)
            target = ks_strdup(ks->services[i].hostport);
    pthread_mutex_unlock(&ks->lock);
    return target;
}

void ks_services_free(struct ks_server *ks)
{
    for (size_t i = 0; i < ks->nservices; i++) {
        free(ks->services[i].ns);
        free(ks->services[i].name);
        free(ks->services[i].hostport);
    }
    free(ks->services);
    ks->services = NULL;
    ks->nservices = 0;
}
