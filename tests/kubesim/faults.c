/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim fault injection and request statistics.
 *
 * Faults: rules "verb, HTTP code, rate, Retry-After" drawn from a seeded
 * xorshift generator (reproducible for a given --seed and request order),
 * added latency, dropping every open watch, compacting the history.
 * They come from --fault/--latency flags or POST /_kubesim/faults:
 *   {"rules":[{"verb":"list","code":429,"rate":0.5,"retryAfter":1}],
 *    "latencyMs":20, "dropWatches":true, "compact":true, "seed":7}
 * ("rules" replaces the current rules; [] clears them).
 *
 * Stats: every API request (verb, group, resource, namespace, name,
 * subresource) and a per-resource count of writes by verb, for tests that
 * prove a converged operator writes nothing, or compare with RBAC rules.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define KS_STATS_MAX_REQUESTS 200000

double ks_rand01(struct ks_server *ks)
{
    uint64_t x = ks->rng ? ks->rng : 0x9e3779b97f4a7c15ull;
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    ks->rng = x;
    return (double)((x * 0x2545f4914f6cdd1dull) >> 11) / (double)(1ull << 53);
}

unsigned int ks_faults_pick(struct ks_server *ks, const char *verb, int *ret_retry_after)
{
    for (size_t i = 0; i < ks->nfaults; i++) {
        const struct ks_fault_rule *f = &ks->faults[i];
        if (f->verb[0] && strcmp(f->verb, "*") != 0 && strcmp(f->verb, verb) != 0)
            continue;
        if (ks_rand01(ks) < f->rate) {
            *ret_retry_after = f->retry_after;
            return f->code;
        }
    }
    return 0;
}

static int add_rule(struct ks_server *ks, const char *verb, long code, double rate, long retry)
{
    if (code < 400 || code > 599 || rate < 0 || rate > 1 || retry < 0 || strlen(verb) >= 24)
        return -EINVAL;
    struct ks_fault_rule *nf = realloc(ks->faults, (ks->nfaults + 1) * sizeof(*nf));
    if (!nf)
        return -ENOMEM;
    ks->faults = nf;
    struct ks_fault_rule *f = &ks->faults[ks->nfaults++];
    memset(f, 0, sizeof(*f));
    snprintf(f->verb, sizeof(f->verb), "%s", verb);
    f->code = (unsigned int)code;
    f->rate = rate;
    f->retry_after = (int)retry;
    return 0;
}

int ks_faults_add_flag(struct ks_server *ks, const char *spec)
{
    char verb[24] = "";
    long code = 0, retry = 0;
    double rate = 0;
    const char *c1 = strchr(spec, ':');
    if (!c1 || (size_t)(c1 - spec) >= sizeof(verb))
        return -EINVAL;
    memcpy(verb, spec, (size_t)(c1 - spec));
    char *end = NULL;
    code = strtol(c1 + 1, &end, 10);
    if (!end || *end != ':')
        return -EINVAL;
    rate = strtod(end + 1, &end);
    if (!end)
        return -EINVAL;
    if (*end == ':') {
        retry = strtol(end + 1, &end, 10);
    }
    if (!end || *end)
        return -EINVAL;
    return add_rule(ks, verb, code, rate, retry);
}

int ks_faults_apply(struct ks_server *ks, const json_t *doc, char **ret_err)
{
    if (!json_is_object(doc)) {
        *ret_err = ks_strdup("fault document must be a JSON object");
        return -EINVAL;
    }
    const json_t *rules = json_object_get(doc, "rules");
    if (rules) {
        if (!json_is_array(rules)) {
            *ret_err = ks_strdup("rules must be an array");
            return -EINVAL;
        }
        free(ks->faults);
        ks->faults = NULL;
        ks->nfaults = 0;
        size_t i;
        json_t *r;
        json_array_foreach(rules, i, r)
        {
            const char *verb = json_string_value(json_object_get(r, "verb"));
            long code = (long)json_integer_value(json_object_get(r, "code"));
            double rate = json_is_number(json_object_get(r, "rate"))
                              ? json_number_value(json_object_get(r, "rate"))
                              : 1.0;
            long retry = (long)json_integer_value(json_object_get(r, "retryAfter"));
            if (add_rule(ks, verb ? verb : "*", code, rate, retry) != 0) {
                *ret_err = ks_printf("invalid rule %zu (code 400..599, rate 0..1)", i);
                return -EINVAL;
            }
        }
    }
    if (json_is_integer(json_object_get(doc, "latencyMs")))
        ks->latency_ms = (long)json_integer_value(json_object_get(doc, "latencyMs"));
    if (json_is_integer(json_object_get(doc, "seed")))
        ks->rng = (uint64_t)json_integer_value(json_object_get(doc, "seed"));
    if (json_is_true(json_object_get(doc, "dropWatches"))) {
        ks->drop_epoch++;
        pthread_cond_broadcast(&ks->changed);
    }
    if (json_is_true(json_object_get(doc, "compact"))) {
        ks_store_compact(ks);
        pthread_cond_broadcast(&ks->changed);
    }
    return 0;
}

json_t *ks_faults_describe(struct ks_server *ks)
{
    json_t *rules = json_array();
    for (size_t i = 0; i < ks->nfaults; i++)
        json_array_append_new(rules,
                              json_pack("{s:s,s:i,s:f,s:i}", "verb", ks->faults[i].verb, "code",
                                        (int)ks->faults[i].code, "rate", ks->faults[i].rate,
                                        "retryAfter", ks->faults[i].retry_after));
    char rv[32], floor[32];
    snprintf(rv, sizeof(rv), "%llu", (unsigned long long)ks->rv);
    snprintf(floor, sizeof(floor), "%llu", (unsigned long long)ks->hist_floor);
    return json_pack("{s:o,s:I,s:s,s:s}", "rules", rules, "latencyMs", (json_int_t)ks->latency_ms,
                     "resourceVersion", rv, "compactedResourceVersion", floor);
}

static bool is_write(const char *verb)
{
    return strcmp(verb, "create") == 0 || strcmp(verb, "update") == 0 ||
           strcmp(verb, "patch") == 0 || strcmp(verb, "delete") == 0 ||
           strcmp(verb, "deletecollection") == 0;
}

void ks_stats_record(struct ks_server *ks, const char *verb, const char *group,
                     const char *resource, const char *ns, const char *name,
                     const char *subresource)
{
    ks->stats_total++;
    if (json_array_size(ks->stats_requests) < KS_STATS_MAX_REQUESTS) {
        json_t *r = json_pack("{s:s,s:s,s:s}", "verb", verb, "group", group ? group : "",
                              "resource", resource ? resource : "");
        if (ns)
            json_object_set_new(r, "namespace", json_string(ns));
        if (name)
            json_object_set_new(r, "name", json_string(name));
        if (subresource)
            json_object_set_new(r, "subresource", json_string(subresource));
        json_array_append_new(ks->stats_requests, r);
    }
    if (!is_write(verb))
        return;
    char *key = group && *group ? ks_printf("%s.%s%s%s", resource, group, subresource ? "/" : "",
                                            subresource ? subresource : "")
                                : ks_printf("%s%s%s", resource, subresource ? "/" : "",
                                            subresource ? subresource : "");
    json_t *per = json_object_get(ks->stats_writes, key);
    if (!per) {
        per = json_object();
        json_object_set_new(ks->stats_writes, key, per);
    }
    json_object_set_new(per, verb,
                        json_integer(json_integer_value(json_object_get(per, verb)) + 1));
    free(key);
}

json_t *ks_stats_json(struct ks_server *ks)
{
    json_int_t writes = 0;
    const char *k;
    json_t *per;
    json_object_foreach(ks->stats_writes, k, per)
    {
        const char *v;
        json_t *n;
        json_object_foreach(per, v, n)
        {
            writes += json_integer_value(n);
        }
    }
    return json_pack("{s:I,s:I,s:O,s:O}", "total", (json_int_t)ks->stats_total, "writeTotal",
                     writes, "writes", ks->stats_writes, "requests", ks->stats_requests);
}

void ks_stats_reset(struct ks_server *ks)
{
    json_object_clear(ks->stats_writes);
    json_array_clear(ks->stats_requests);
    ks->stats_total = 0;
}
