/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kubesim fault injection and request statistics.
 *
 * Faults: rules "verb, HTTP code, rate, Retry-After", optionally narrowed
 * to a resource ("leases", or "myresources/status" for a subresource), an
 * API group ("" is core) and a namespace, drawn from a seeded xorshift
 * generator (reproducible for a given --seed and request order); the first
 * matching rule that fires wins. Also added latency, dropping every open
 * watch, compacting the history. They come from --fault/--latency flags or
 * POST /_kubesim/faults:
 *   {"rules":[{"verb":"update","code":500,"rate":0.5,"retryAfter":1,
 *              "resource":"leases","group":"coordination.k8s.io",
 *              "namespace":"kop-system"}],
 *    "latencyMs":20, "dropWatches":true, "compact":true, "seed":7}
 * ("rules" replaces the current rules, or nothing when one is invalid; []
 * clears them; a missing or null filter matches anything, as does "*").
 *
 * Stats: every API request (verb, group, resource, namespace, name,
 * subresource, userAgent) and a per-resource count of writes by verb, for
 * tests that prove a converged operator writes nothing, or compare with
 * RBAC rules. GET /_kubesim/stats?userAgent=PREFIX keeps only the requests
 * whose User-Agent starts with PREFIX ("kop/": the operator's own), and
 * counts the totals and writes from those.
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

/* A rule filter against a request value; "*" matches anything. */
static bool filter_match(const char *rule, const char *value)
{
    return strcmp(rule, "*") == 0 || strcmp(rule, ks_nz(value)) == 0;
}

static bool resource_match(const char *rule, const struct ks_req_info *ri)
{
    if (strcmp(rule, "*") == 0)
        return true;
    const char *slash = strchr(rule, '/');
    if (!slash)
        return !ri->subresource && strcmp(rule, ks_nz(ri->resource)) == 0;
    size_t n = (size_t)(slash - rule);
    return ri->subresource && strlen(ks_nz(ri->resource)) == n &&
           strncmp(rule, ri->resource, n) == 0 && strcmp(slash + 1, ri->subresource) == 0;
}

unsigned int ks_faults_pick(struct ks_server *ks, const struct ks_req_info *ri,
                            int *ret_retry_after)
{
    for (size_t i = 0; i < ks->nfaults; i++) {
        const struct ks_fault_rule *f = &ks->faults[i];
        if (f->verb[0] && !filter_match(f->verb, ri->verb))
            continue;
        if (!resource_match(f->resource, ri) || !filter_match(f->group, ri->group))
            continue;
        if (strcmp(f->ns, "*") != 0 && (!ri->ns || strcmp(f->ns, ri->ns) != 0))
            continue;
        if (ks_rand01(ks) < f->rate) {
            *ret_retry_after = f->retry_after;
            return f->code;
        }
    }
    return 0;
}

/* Filters of a rule; NULL = any. */
struct rule_filters {
    const char *resource;
    const char *group;
    const char *ns;
};

static int set_filter(char *dst, size_t cap, const char *v)
{
    if (!v)
        v = "*";
    if (strlen(v) >= cap || strchr(v, ':') || strchr(v, ','))
        return -EINVAL;
    memcpy(dst, v, strlen(v) + 1);
    return 0;
}

static int add_rule(struct ks_server *ks, const char *verb, long code, double rate, long retry,
                    const struct rule_filters *flt)
{
    struct ks_fault_rule rule;
    memset(&rule, 0, sizeof(rule));
    if (code < 400 || code > 599 || !(rate >= 0 && rate <= 1) || retry < 0 ||
        strlen(verb) >= sizeof(rule.verb))
        return -EINVAL;
    /* An empty resource or namespace names nothing: treat it as "any". */
    const char *res = flt && flt->resource && *flt->resource ? flt->resource : NULL;
    const char *ns = flt && flt->ns && *flt->ns ? flt->ns : NULL;
    if (set_filter(rule.resource, sizeof(rule.resource), res) != 0 ||
        set_filter(rule.group, sizeof(rule.group), flt ? flt->group : NULL) != 0 ||
        set_filter(rule.ns, sizeof(rule.ns), ns) != 0)
        return -EINVAL;
    struct ks_fault_rule *nf = realloc(ks->faults, (ks->nfaults + 1) * sizeof(*nf));
    if (!nf)
        return -ENOMEM;
    ks->faults = nf;
    snprintf(rule.verb, sizeof(rule.verb), "%s", verb);
    rule.code = (unsigned int)code;
    rule.rate = rate;
    rule.retry_after = (int)retry;
    ks->faults[ks->nfaults++] = rule;
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
    if (*end == ':' && end[1] >= '0' && end[1] <= '9')
        retry = strtol(end + 1, &end, 10);
    if (!end)
        return -EINVAL;
    /* Then :key=value filters; the values point into a copy of the flag. */
    char *rest = ks_strdup(end);
    struct rule_filters flt = {0};
    int rc = 0;
    char *p = *rest ? rest : NULL;
    if (p && *p != ':')
        rc = -EINVAL;
    while (rc == 0 && p) {
        char *item = p + 1;
        char *next = strchr(item, ':');
        if (next)
            *next = '\0';
        p = next;
        char *eq = strchr(item, '=');
        if (!eq) {
            rc = -EINVAL;
            break;
        }
        *eq = '\0';
        if (strcmp(item, "resource") == 0)
            flt.resource = eq + 1;
        else if (strcmp(item, "group") == 0)
            flt.group = eq + 1;
        else if (strcmp(item, "namespace") == 0)
            flt.ns = eq + 1;
        else
            rc = -EINVAL;
    }
    if (rc == 0)
        rc = add_rule(ks, verb, code, rate, retry, &flt);
    free(rest);
    return rc;
}

/* A filter of a JSON rule: absent or null = any; otherwise a string. */
static int json_filter(const json_t *r, const char *k, const char **ret)
{
    const json_t *v = json_object_get(r, k);
    if (!v || json_is_null(v)) {
        *ret = NULL;
        return 0;
    }
    if (!json_is_string(v))
        return -EINVAL;
    *ret = json_string_value(v);
    return 0;
}

/* Lock held. Replace the rules with a JSON array of them; on error the old
 * rules stay. */
static int apply_rules(struct ks_server *ks, const json_t *rules, char **ret_err)
{
    struct ks_fault_rule *old = ks->faults;
    size_t nold = ks->nfaults;
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
        struct rule_filters flt = {0};
        if (!json_is_object(r) || json_filter(r, "resource", &flt.resource) != 0 ||
            json_filter(r, "group", &flt.group) != 0 || json_filter(r, "namespace", &flt.ns) != 0 ||
            add_rule(ks, verb ? verb : "*", code, rate, retry, &flt) != 0) {
            *ret_err = ks_printf("invalid rule %zu (code 400..599, rate 0..1; verb, resource, "
                                 "group and namespace strings)",
                                 i);
            free(ks->faults);
            ks->faults = old;
            ks->nfaults = nold;
            return -EINVAL;
        }
    }
    free(old);
    return 0;
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
        if (apply_rules(ks, rules, ret_err) != 0)
            return -EINVAL;
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
    for (size_t i = 0; i < ks->nfaults; i++) {
        const struct ks_fault_rule *f = &ks->faults[i];
        json_t *r = json_pack("{s:s,s:i,s:f,s:i}", "verb", f->verb, "code", (int)f->code, "rate",
                              f->rate, "retryAfter", f->retry_after);
        if (strcmp(f->resource, "*") != 0)
            json_object_set_new(r, "resource", json_string(f->resource));
        if (strcmp(f->group, "*") != 0)
            json_object_set_new(r, "group", json_string(f->group));
        if (strcmp(f->ns, "*") != 0)
            json_object_set_new(r, "namespace", json_string(f->ns));
        json_array_append_new(rules, r);
    }
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

/* Count a write in writes: "resource.group[/sub]" -> { verb -> n }. */
static void count_write(json_t *writes, const char *verb, const char *group, const char *resource,
                        const char *sub)
{
    char *key = group && *group
                    ? ks_printf("%s.%s%s%s", ks_nz(resource), group, sub ? "/" : "", ks_nz(sub))
                    : ks_printf("%s%s%s", ks_nz(resource), sub ? "/" : "", ks_nz(sub));
    json_t *per = json_object_get(writes, key);
    if (!per) {
        per = json_object();
        json_object_set_new(writes, key, per);
    }
    json_object_set_new(per, verb,
                        json_integer(json_integer_value(json_object_get(per, verb)) + 1));
    free(key);
}

void ks_stats_record(struct ks_server *ks, const struct ks_req_info *ri)
{
    ks->stats_total++;
    if (json_array_size(ks->stats_requests) < KS_STATS_MAX_REQUESTS) {
        json_t *r = json_pack("{s:s,s:s,s:s}", "verb", ri->verb, "group", ks_nz(ri->group),
                              "resource", ks_nz(ri->resource));
        if (ri->ns)
            json_object_set_new(r, "namespace", json_string(ri->ns));
        if (ri->name)
            json_object_set_new(r, "name", json_string(ri->name));
        if (ri->subresource)
            json_object_set_new(r, "subresource", json_string(ri->subresource));
        /* jansson wants UTF-8; a header that is not stays out. */
        json_t *ua = json_string(ks_nz(ri->user_agent));
        json_object_set_new(r, "userAgent", ua ? ua : json_string(""));
        json_t *tp = ri->traceparent ? json_string(ri->traceparent) : NULL;
        if (tp)
            json_object_set_new(r, "traceparent", tp);
        json_array_append_new(ks->stats_requests, r);
    }
    if (is_write(ri->verb))
        count_write(ks->stats_writes, ri->verb, ri->group, ri->resource, ri->subresource);
}

static json_int_t sum_writes(json_t *writes)
{
    json_int_t n = 0;
    const char *k;
    json_t *per;
    json_object_foreach(writes, k, per)
    {
        const char *v;
        json_t *c;
        json_object_foreach(per, v, c)
        {
            n += json_integer_value(c);
        }
    }
    return n;
}

json_t *ks_stats_json(struct ks_server *ks, const char *ua_prefix)
{
    if (!ua_prefix)
        return json_pack("{s:I,s:I,s:O,s:O}", "total", (json_int_t)ks->stats_total, "writeTotal",
                         sum_writes(ks->stats_writes), "writes", ks->stats_writes, "requests",
                         ks->stats_requests);
    /* Filtered: everything is counted from the recorded requests. */
    json_t *reqs = json_array();
    json_t *writes = json_object();
    size_t plen = strlen(ua_prefix);
    size_t i;
    json_t *r;
    json_array_foreach(ks->stats_requests, i, r)
    {
        const char *ua = ks_nz(json_string_value(json_object_get(r, "userAgent")));
        if (strncmp(ua, ua_prefix, plen) != 0)
            continue;
        json_array_append(reqs, r);
        const char *verb = json_string_value(json_object_get(r, "verb"));
        if (verb && is_write(verb))
            count_write(writes, verb, json_string_value(json_object_get(r, "group")),
                        json_string_value(json_object_get(r, "resource")),
                        json_string_value(json_object_get(r, "subresource")));
    }
    return json_pack("{s:I,s:I,s:o,s:o,s:s}", "total", (json_int_t)json_array_size(reqs),
                     "writeTotal", sum_writes(writes), "writes", writes, "requests", reqs,
                     "userAgent", ua_prefix);
}

void ks_stats_reset(struct ks_server *ks)
{
    json_object_clear(ks->stats_writes);
    json_array_clear(ks->stats_requests);
    ks->stats_total = 0;
}
