/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is calling, and what they did: static bearer tokens and the audit
 * log, as the apiserver has them.
 *
 * Users: the --token token (rotated by POST /_kubesim/token) is the user
 * "kubernetes-admin" (groups kubeadm:cluster-admins, system:authenticated,
 * what kubeadm's admin.conf authenticates as). --token-auth-file FILE
 * adds users from a file in the apiserver's --token-auth-file format
 * (k8s.io/apiserver/pkg/authentication/token/tokenfile/tokenfile.go): CSV
 * records "token,user,uid[,\"group1,group2\"]" read as Go's encoding/csv
 * reads them (quoted fields, "" for a quote, blank lines skipped, a bare
 * quote in an unquoted field or fewer than 3 columns is an error); an empty
 * token is skipped, a later duplicate replaces the earlier one. Every
 * authenticated user is also in system:authenticated, as the apiserver's
 * AuthenticatedGroupAdder makes it.
 *
 * Audit: --audit-log-path FILE ("-": standard output) writes one
 * audit.k8s.io/v1 Event per line, as the apiserver's log backend does in
 * its json format (k8s.io/apiserver/plugin/pkg/audit/log/backend.go), for
 * every authenticated request except kubesim's own /_kubesim endpoints.
 * kubesim has no policy file: --audit-level Metadata or Request is the
 * level of a one-rule policy. An event is written once per request at
 * stage ResponseComplete (a watch: ResponseStarted, when its stream
 * begins). objectRef is completed from the request body's metadata as
 * LogRequestObject does (k8s.io/apiserver/pkg/audit/request.go); at level
 * Request a JSON body is the requestObject (a protobuf body is not
 * decoded for the log). The auditID is the response's Audit-Id header.
 */
#include "kubesim.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static const char *admin_groups[] = {"kubeadm:cluster-admins", "system:authenticated"};

void ks_user_free(struct ks_user *u)
{
    free(u->token);
    free(u->name);
    free(u->uid);
    for (size_t i = 0; i < u->ngroups; i++)
        free(u->groups[i]);
    free(u->groups);
    json_decref(u->extra);
    memset(u, 0, sizeof(*u));
}

static void add_group(struct ks_user *u, const char *g, size_t len)
{
    char **ng = realloc(u->groups, (u->ngroups + 1) * sizeof(*ng));
    if (!ng)
        abort();
    u->groups = ng;
    u->groups[u->ngroups] = strndup(g, len);
    if (!u->groups[u->ngroups])
        abort();
    u->ngroups++;
}

void ks_user_add_group(struct ks_user *u, const char *g)
{
    add_group(u, g, strlen(g));
}

void ks_users_init(struct ks_server *ks)
{
    ks->admin.name = ks_strdup("kubernetes-admin");
    ks->admin.uid = ks_strdup("");
    for (size_t i = 0; i < sizeof(admin_groups) / sizeof(admin_groups[0]); i++)
        add_group(&ks->admin, admin_groups[i], strlen(admin_groups[i]));
}

void ks_users_free(struct ks_server *ks)
{
    ks_user_free(&ks->admin);
    for (size_t i = 0; i < ks->nusers; i++)
        ks_user_free(&ks->users[i]);
    free(ks->users);
    ks->users = NULL;
    ks->nusers = 0;
    if (ks->audit && ks->audit != stdout)
        fclose(ks->audit);
    ks->audit = NULL;
}

/* ---- CSV, as Go's encoding/csv reads it (LazyQuotes off) ---------------------------------- */

struct csv {
    const char *p, *end;
    int line;
};

/* Append ch to the field *f (room kept for the NUL). */
static void put_char(char **f, size_t *len, size_t *cap, char ch)
{
    if (*len + 2 > *cap) {
        *cap *= 2;
        char *nf = realloc(*f, *cap);
        if (!nf)
            abort();
        *f = nf;
    }
    (*f)[(*len)++] = ch;
}

/* One record into fields (malloc'd strings, *nf of them). 1 = a record,
 * 0 = end of input, -1 = syntax error (*err set, malloc'd). */
static int csv_record(struct csv *c, char ***fields, size_t *nf, char **err)
{
    *fields = NULL;
    *nf = 0;
    /* Blank lines are skipped. */
    while (c->p < c->end &&
           (*c->p == '\n' || (*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n'))) {
        c->p += *c->p == '\r' ? 2 : 1;
        c->line++;
    }
    if (c->p >= c->end)
        return 0;
    for (;;) {
        size_t cap = 64, len = 0;
        char *f = malloc(cap);
        if (!f)
            abort();
        bool quoted = c->p < c->end && *c->p == '"';
        if (quoted) {
            c->p++;
            for (;;) {
                if (c->p >= c->end) {
                    free(f);
                    *err = ks_printf("line %d: extraneous or missing \" in quoted-field", c->line);
                    goto fail;
                }
                char ch = *c->p++;
                if (ch == '"') {
                    if (c->p < c->end && *c->p == '"') {
                        c->p++;
                    } else if (c->p >= c->end || *c->p == ',' || *c->p == '\n' ||
                               (*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n')) {
                        break;
                    } else {
                        free(f);
                        *err =
                            ks_printf("line %d: extraneous or missing \" in quoted-field", c->line);
                        goto fail;
                    }
                } else if (ch == '\r' && c->p < c->end && *c->p == '\n') {
                    continue; /* \r\n inside quotes reads as \n */
                } else if (ch == '\n') {
                    c->line++;
                }
                put_char(&f, &len, &cap, ch);
            }
        } else {
            while (c->p < c->end && *c->p != ',' && *c->p != '\n' &&
                   !(*c->p == '\r' && c->p + 1 < c->end && c->p[1] == '\n')) {
                if (*c->p == '"') {
                    free(f);
                    *err = ks_printf("line %d: bare \" in non-quoted-field", c->line);
                    goto fail;
                }
                put_char(&f, &len, &cap, *c->p++);
            }
        }
        f[len] = '\0';
        char **nfs = realloc(*fields, (*nf + 1) * sizeof(*nfs));
        if (!nfs)
            abort();
        *fields = nfs;
        (*fields)[(*nf)++] = f;
        if (c->p < c->end && *c->p == ',') {
            c->p++;
            continue;
        }
        if (c->p < c->end)
            c->p += *c->p == '\r' ? 2 : 1;
        c->line++;
        return 1;
    }
fail:
    for (size_t i = 0; i < *nf; i++)
        free((*fields)[i]);
    free(*fields);
    *fields = NULL;
    *nf = 0;
    return -1;
}

int ks_users_load(struct ks_server *ks, const char *path, char **ret_err)
{
    *ret_err = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) {
        char eb[128];
        *ret_err = ks_printf("open %s: %s", path, strerror_r(errno, eb, sizeof(eb)));
        return -EINVAL;
    }
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len + 4096 > cap) {
            cap = cap ? cap * 2 : 8192;
            char *nd = realloc(data, cap);
            if (!nd)
                abort();
            data = nd;
        }
        size_t n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool rerr = ferror(f);
    fclose(f);
    if (rerr) {
        free(data);
        *ret_err = ks_printf("read %s: I/O error", path);
        return -EIO;
    }
    struct csv c = {.p = data, .end = data + len, .line = 1};
    int rc = 0;
    for (;;) {
        char **fields;
        size_t nf;
        char *err = NULL;
        int r = csv_record(&c, &fields, &nf, &err);
        if (r == 0)
            break;
        if (r < 0) {
            *ret_err = ks_printf("token file '%s': %s", path, err);
            free(err);
            rc = -EINVAL;
            break;
        }
        if (nf < 3) {
            *ret_err = ks_printf("token file '%s' must have at least 3 columns (token, user "
                                 "name, user uid), found %zu",
                                 path, nf);
            rc = -EINVAL;
        } else if (*fields[0]) {
            struct ks_user u = {.token = ks_strdup(fields[0]),
                                .name = ks_strdup(fields[1]),
                                .uid = ks_strdup(fields[2])};
            if (nf >= 4) {
                /* strings.Split: "a,b" -> a, b; "" -> one empty group */
                const char *g = fields[3];
                for (;;) {
                    const char *comma = strchr(g, ',');
                    size_t gl = comma ? (size_t)(comma - g) : strlen(g);
                    add_group(&u, g, gl);
                    if (!comma)
                        break;
                    g = comma + 1;
                }
            }
            bool has_auth = false;
            for (size_t i = 0; i < u.ngroups; i++)
                has_auth = has_auth || strcmp(u.groups[i], "system:authenticated") == 0;
            if (!has_auth)
                add_group(&u, "system:authenticated", strlen("system:authenticated"));
            size_t at = ks->nusers;
            for (size_t i = 0; i < ks->nusers; i++)
                if (strcmp(ks->users[i].token, u.token) == 0)
                    at = i; /* a later duplicate replaces the earlier one */
            if (at == ks->nusers) {
                struct ks_user *nu = realloc(ks->users, (ks->nusers + 1) * sizeof(*nu));
                if (!nu)
                    abort();
                ks->users = nu;
                ks->nusers++;
            } else {
                ks_user_free(&ks->users[at]);
            }
            ks->users[at] = u;
        }
        for (size_t i = 0; i < nf; i++)
            free(fields[i]);
        free(fields);
        if (rc)
            break;
    }
    free(data);
    return rc;
}

/* Constant time in the token's bytes. */
static bool token_equal(const char *a, const char *b)
{
    size_t la = strlen(a), lb = strlen(b);
    unsigned char diff = (unsigned char)(la != lb);
    for (size_t i = 0; i < la && i < lb; i++)
        diff |= (unsigned char)(a[i] ^ b[i]);
    return diff == 0;
}

const struct ks_user *ks_authenticate(struct ks_server *ks, const char *authorization)
{
    if (!authorization || strncmp(authorization, "Bearer ", 7) != 0)
        return NULL;
    const char *tok = authorization + 7;
    const struct ks_user *who = NULL;
    /* Under the lock: POST /_kubesim/token replaces the admin's token. */
    pthread_mutex_lock(&ks->lock);
    if (token_equal(tok, ks->token))
        who = &ks->admin;
    pthread_mutex_unlock(&ks->lock);
    for (size_t i = 0; i < ks->nusers; i++)
        if (token_equal(tok, ks->users[i].token))
            who = &ks->users[i];
    return *tok ? who : NULL;
}

json_t *ks_user_info(const struct ks_user *u)
{
    json_t *groups = json_array();
    for (size_t i = 0; i < u->ngroups; i++)
        json_array_append_new(groups, json_string(u->groups[i]));
    json_t *info = json_pack("{s:s}", "username", u->name);
    if (*u->uid)
        json_object_set_new(info, "uid", json_string(u->uid));
    json_object_set_new(info, "groups", groups);
    if (json_object_size(u->extra))
        json_object_set_new(info, "extra", json_deep_copy(u->extra));
    return info;
}

/* ---- audit log ---------------------------------------------------------------------------- */

int ks_audit_open(struct ks_server *ks, const char *path, const char *level, char **ret_err)
{
    *ret_err = NULL;
    if (strcmp(level, "Metadata") == 0) {
        ks->audit_request = false;
    } else if (strcmp(level, "Request") == 0) {
        ks->audit_request = true;
    } else {
        *ret_err = ks_printf("--audit-level must be Metadata or Request, not %s", level);
        return -EINVAL;
    }
    if (strcmp(path, "-") == 0) {
        ks->audit = stdout;
        return 0;
    }
    ks->audit = fopen(path, "a");
    if (!ks->audit) {
        char eb[128];
        *ret_err = ks_printf("open %s: %s", path, strerror_r(errno, eb, sizeof(eb)));
        return -EINVAL;
    }
    return 0;
}

/* requestURI: the path and the query string (re-encoded from the parsed
 * arguments, in their order). */
struct query_acc {
    char *s;
    size_t len, cap;
};

static void acc_put(struct query_acc *a, const char *s, bool escape)
{
    for (; *s; s++) {
        if (a->len + 4 > a->cap) {
            a->cap = a->cap ? a->cap * 2 : 128;
            char *ns = realloc(a->s, a->cap);
            if (!ns)
                abort();
            a->s = ns;
        }
        unsigned char ch = (unsigned char)*s;
        bool plain = !escape || (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                     (ch >= '0' && ch <= '9') || strchr("-_.~", ch);
        if (plain) {
            a->s[a->len++] = (char)ch;
        } else {
            snprintf(a->s + a->len, 4, "%%%02X", ch);
            a->len += 3;
        }
        a->s[a->len] = '\0';
    }
}

static enum MHD_Result query_arg(void *cls, enum MHD_ValueKind kind, const char *key,
                                 const char *value)
{
    struct query_acc *a = cls;
    (void)kind;
    acc_put(a, a->len ? "&" : "?", false);
    acc_put(a, key, true);
    if (value) {
        acc_put(a, "=", false);
        acc_put(a, value, true);
    }
    return MHD_YES;
}

void ks_audit_log(struct ks_server *ks, const struct ks_audit_rec *rec)
{
    if (!ks->audit || !rec->user)
        return;
    const struct ks_api_req *q = rec->q;
    json_t *ev =
        json_pack("{s:s,s:s,s:s,s:s,s:s}", "kind", "Event", "apiVersion", "audit.k8s.io/v1",
                  "level", ks->audit_request ? "Request" : "Metadata", "auditID", rec->audit_id,
                  "stage", rec->watch ? "ResponseStarted" : "ResponseComplete");
    struct query_acc qa = {0};
    MHD_get_connection_values(rec->conn, MHD_GET_ARGUMENT_KIND, query_arg, &qa);
    char *uri = ks_printf("%s%s", rec->url, qa.s ? qa.s : "");
    free(qa.s);
    json_object_set_new(ev, "requestURI", json_string(uri));
    free(uri);
    if (q && q->verb) {
        json_object_set_new(ev, "verb", json_string(q->verb));
    } else {
        /* non-resource requests: the lower-case HTTP method */
        char verb[16];
        ks_lower_method(rec->method, verb, sizeof(verb));
        json_object_set_new(ev, "verb", json_string(verb));
    }
    json_object_set_new(ev, "user", ks_user_info(rec->user));
    if (rec->impersonated)
        json_object_set_new(ev, "impersonatedUser", ks_user_info(rec->impersonated));
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(rec->conn, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    char ip[INET6_ADDRSTRLEN] = "";
    if (ci && ci->client_addr) {
        const struct sockaddr *sa = ci->client_addr;
        if (sa->sa_family == AF_INET)
            inet_ntop(AF_INET, &((const struct sockaddr_in *)(const void *)sa)->sin_addr, ip,
                      sizeof(ip));
        else if (sa->sa_family == AF_INET6)
            inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)(const void *)sa)->sin6_addr, ip,
                      sizeof(ip));
    }
    if (*ip)
        json_object_set_new(ev, "sourceIPs", json_pack("[s]", ip));
    const char *ua = MHD_lookup_connection_value(rec->conn, MHD_HEADER_KIND, "User-Agent");
    if (ua)
        json_object_set_new(ev, "userAgent", json_string(ua));
    json_t *body = NULL;
    if (q && q->body_len && !(q->content_type && strstr(q->content_type, "protobuf")))
        body = json_loadb(q->body, q->body_len, 0, NULL);
    if (q && q->plural) {
        json_t *md = json_object_get(body, "metadata");
        const char *ns = q->ns ? q->ns : json_string_value(json_object_get(md, "namespace"));
        const char *name = q->name ? q->name : json_string_value(json_object_get(md, "name"));
        json_t *ref = json_pack("{s:s}", "resource", q->plural);
        if (ns && *ns)
            json_object_set_new(ref, "namespace", json_string(ns));
        if (name && *name)
            json_object_set_new(ref, "name", json_string(name));
        if (q->group && *q->group)
            json_object_set_new(ref, "apiGroup", json_string(q->group));
        json_object_set_new(ref, "apiVersion", json_string(q->version));
        if (q->sub)
            json_object_set_new(ref, "subresource", json_string(q->sub));
        json_object_set_new(ev, "objectRef", ref);
    }
    /* metav1.Status member order: metadata, status, message, reason, code */
    json_t *st = json_pack("{s:{}}", "metadata");
    if (rec->code >= 400 && rec->status_body) {
        json_t *sb = json_loadb(rec->status_body, rec->status_len, 0, NULL);
        const char *keys[] = {"status", "message", "reason"};
        for (size_t i = 0; i < 3; i++) {
            json_t *v = json_object_get(sb, keys[i]);
            if (json_is_string(v))
                json_object_set(st, keys[i], v);
        }
        json_decref(sb);
    }
    json_object_set_new(st, "code", json_integer(rec->code));
    json_object_set_new(ev, "responseStatus", st);
    if (ks->audit_request && body)
        json_object_set(ev, "requestObject", body);
    json_decref(body);
    json_object_set_new(ev, "requestReceivedTimestamp", json_string(rec->received));
    char now[64];
    ks_now_rfc3339_micro(now, sizeof(now));
    json_object_set_new(ev, "stageTimestamp", json_string(now));
    char *dump = json_dumps(ev, JSON_COMPACT | JSON_PRESERVE_ORDER);
    json_decref(ev);
    char *line = dump ? ks_printf("%s\n", dump) : NULL;
    free(dump);
    if (!line)
        abort();
    /* One write(2) per line (no stdio buffer splitting it), so a reader
     * of the file sees whole lines but perhaps the last. */
    pthread_mutex_lock(&ks->audit_lock);
    size_t len = strlen(line), off = 0;
    while (off < len) {
        ssize_t n = write(fileno(ks->audit), line + off, len - off);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break; /* the log is lost, not the request */
        off += (size_t)n;
    }
    pthread_mutex_unlock(&ks->audit_lock);
    free(line);
}
