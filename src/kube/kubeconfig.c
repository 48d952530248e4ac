/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubeconfig and in-cluster configuration (see kop/kubeconfig.h).
 *
 * The YAML document is loaded with libyaml's document API and converted to
 * a jansson tree in which every scalar is a string; the lookups below then
 * read that tree. A kubeconfig is small and trusted-ish input (the user's
 * own file), but conversion still bounds depth and node count so an alias
 * bomb cannot exhaust memory.
 */
#include "kop/kubeconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#define MAX_DEPTH 64
#define MAX_NODES 200000
#define MAX_FILE (16u << 20)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- small helpers ------------------------------------------------------- */

static int read_small_file(const char *path, size_t limit, char **ret_buf, size_t *ret_len)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return errno == ENOENT ? -ENOENT : -errno;
    int r = 0;
    size_t cap = 4096, len = 0;
    char *buf = malloc(cap);
    if (!buf) {
        r = -ENOMEM;
        goto out;
    }
    for (;;) {
        if (len + 1 >= cap) {
            if (cap >= limit) {
                r = -EFBIG;
                goto out;
            }
            char *nb = realloc(buf, cap * 2);
            if (!nb) {
                r = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap *= 2;
        }
        size_t n = fread(buf + len, 1, cap - len - 1, f);
        if (n == 0)
            break;
        len += n;
    }
    if (ferror(f)) {
        r = -EIO;
        goto out;
    }
    buf[len] = '\0';
    *ret_buf = buf;
    buf = NULL;
    if (ret_len)
        *ret_len = len;
out:
    free(buf);
    fclose(f);
    return r;
}

static char *join_path(const char *dir, const char *path)
{
    if (!path)
        return NULL;
    if (path[0] == '/' || !dir || !*dir)
        return strdup(path);
    size_t n = strlen(dir) + strlen(path) + 2;
    char *s = malloc(n);
    if (s)
        snprintf(s, n, "%s/%s", dir, path);
    return s;
}

static void trim(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && (s[n - 1] == '\n' || s[n - 1] == '\r' || s[n - 1] == ' ' || s[n - 1] == '\t'))
        s[--n] = '\0';
    size_t i = 0;
    while (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r')
        i++;
    if (i)
        memmove(s, s + i, n - i + 1);
}

static int b64val(unsigned char c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

int kop_base64_decode(const char *in, size_t len, char **ret_buf, size_t *ret_len)
{
    if (!in || !ret_buf)
        return -EINVAL;
    char *out = malloc(len / 4 * 3 + 4);
    if (!out)
        return -ENOMEM;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0, pad = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\n' || c == '\r' || c == '\t')
            continue;
        if (c == '=') {
            pad++;
            continue;
        }
        int v = b64val(c);
        if (v < 0 || pad) {
            free(out);
            return -EINVAL;
        }
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            out[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    /* Leftover bits must be zero padding of a valid length. */
    if (bits >= 6 || pad > 2) {
        free(out);
        return -EINVAL;
    }
    out[o] = '\0';
    *ret_buf = out;
    if (ret_len)
        *ret_len = o;
    return 0;
}

/* ---- YAML -> jansson ----------------------------------------------------- */

static json_t *convert(yaml_document_t *doc, yaml_node_t *node, int depth, size_t *budget)
{
    if (!node || depth > MAX_DEPTH || *budget == 0)
        return NULL;
    (*budget)--;
    switch (node->type) {
    case YAML_SCALAR_NODE:
        return json_stringn((const char *)node->data.scalar.value, node->data.scalar.length);
    case YAML_SEQUENCE_NODE: {
        json_t *arr = json_array();
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             arr && it < node->data.sequence.items.top; it++) {
            json_t *v = convert(doc, yaml_document_get_node(doc, *it), depth + 1, budget);
            if (!v || json_array_append_new(arr, v) < 0) {
                json_decref(arr);
                return NULL;
            }
        }
        return arr;
    }
    case YAML_MAPPING_NODE: {
        json_t *obj = json_object();
        for (yaml_node_pair_t *p = node->data.mapping.pairs.start;
             obj && p < node->data.mapping.pairs.top; p++) {
            yaml_node_t *k = yaml_document_get_node(doc, p->key);
            if (!k || k->type != YAML_SCALAR_NODE)
                continue;
            char *key = strndup((const char *)k->data.scalar.value, k->data.scalar.length);
            json_t *v = convert(doc, yaml_document_get_node(doc, p->value), depth + 1, budget);
            int r = -1;
            if (key && v)
                r = json_object_set_new(obj, key, v);
            else
                json_decref(v);
            free(key);
            if (r < 0) {
                json_decref(obj);
                return NULL;
            }
        }
        return obj;
    }
    case YAML_NO_NODE:
        break;
    }
    return NULL;
}

static int yaml_to_json(const char *data, size_t len, json_t **ret)
{
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    int r = 0;
    if (!yaml_parser_load(&parser, &doc)) {
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    size_t budget = MAX_NODES;
    json_t *j = root ? convert(&doc, root, 0, &budget) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        r = -EINVAL;
    } else {
        *ret = j;
    }
    yaml_document_delete(&doc);
    yaml_parser_delete(&parser);
    return r;
}

/* ---- kubeconfig ---------------------------------------------------------- */

static const char *str_at(const json_t *obj, const char *key)
{
    const char *s = json_string_value(json_object_get(obj, key));
    return (s && *s) ? s : NULL;
}

static bool yaml_true(const char *s)
{
    return s && (!strcasecmp(s, "true") || !strcasecmp(s, "yes") || !strcasecmp(s, "on") ||
                 !strcmp(s, "y") || !strcmp(s, "Y"));
}

/* The "inner" object of the list entry named name: list[i].name == name ->
 * list[i].<inner>. */
static json_t *named(const json_t *root, const char *list, const char *inner, const char *name)
{
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(root, list), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        if (n && strcmp(n, name) == 0) {
            json_t *v = json_object_get(e, inner);
            return json_is_object(v) ? v : NULL;
        }
    }
    return NULL;
}

static int dup_field(const char *v, char **out)
{
    if (!v)
        return 0;
    *out = strdup(v);
    return *out ? 0 : -ENOMEM;
}

static int b64_field(const char *v, char **out, size_t *out_len)
{
    if (!v)
        return 0;
    return kop_base64_decode(v, strlen(v), out, out_len);
}

static int path_field(const char *dir, const char *v, char **out)
{
    if (!v)
        return 0;
    *out = join_path(dir, v);
    return *out ? 0 : -ENOMEM;
}

static int fill(const json_t *root, const char *dir, const char *context, struct kop_kubeconfig *kc)
{
    const char *ctx_name = context ? context : str_at(root, "current-context");
    if (!ctx_name)
        return -ENOENT;
    json_t *ctx = named(root, "contexts", "context", ctx_name);
    if (!ctx)
        return -ENOENT;
    const char *cluster_name = str_at(ctx, "cluster");
    const char *user_name = str_at(ctx, "user");
    json_t *cluster = cluster_name ? named(root, "clusters", "cluster", cluster_name) : NULL;
    if (!cluster)
        return -ENOENT;
    /* A context without a user is valid (anonymous); a named but missing
     * user is an error, as in kubectl. */
    json_t *user = user_name ? named(root, "users", "user", user_name) : NULL;
    if (user_name && !user)
        return -ENOENT;

    const char *server = str_at(cluster, "server");
    if (!server)
        return -EINVAL;
    int r;
    r = dup_field(server, &kc->server);
    if (r < 0)
        return r;
    size_t n = strlen(kc->server);
    while (n > 0 && kc->server[n - 1] == '/')
        kc->server[--n] = '\0';
    if (n == 0)
        return -EINVAL; /* "server: /" names no server */
    r = dup_field(str_at(ctx, "namespace"), &kc->namespace);
    if (r == 0)
        r = path_field(dir, str_at(cluster, "certificate-authority"), &kc->ca_file);
    if (r == 0)
        r = b64_field(str_at(cluster, "certificate-authority-data"), &kc->ca_data,
                      &kc->ca_data_len);
    if (r == 0)
        r = dup_field(str_at(cluster, "tls-server-name"), &kc->tls_server_name);
    if (r < 0)
        return r;
    kc->insecure_skip_tls_verify = yaml_true(str_at(cluster, "insecure-skip-tls-verify"));
    if (!user)
        return 0;
    r = dup_field(str_at(user, "token"), &kc->token);
    if (r == 0)
        r = path_field(dir, str_at(user, "tokenFile"), &kc->token_file);
    if (r == 0)
        r = path_field(dir, str_at(user, "client-certificate"), &kc->cert_file);
    if (r == 0)
        r = path_field(dir, str_at(user, "client-key"), &kc->key_file);
    if (r == 0)
        r = b64_field(str_at(user, "client-certificate-data"), &kc->cert_data, &kc->cert_data_len);
    if (r == 0)
        r = b64_field(str_at(user, "client-key-data"), &kc->key_data, &kc->key_data_len);
    if (r < 0)
        return r;
    bool has_cred = kc->token || kc->token_file || kc->cert_file || kc->cert_data;
    if (!has_cred && (json_object_get(user, "exec") || json_object_get(user, "auth-provider")))
        return -ENOTSUP;
    return 0;
}

int kop_kubeconfig_load_buffer(const char *data, size_t len, const char *dir, const char *context,
                               struct kop_kubeconfig *ret)
{
    if (!data || !ret)
        return -EINVAL;
    json_t *root = NULL;
    int r = yaml_to_json(data, len, &root);
    if (r < 0)
        return r;
    struct kop_kubeconfig kc = {0};
    r = fill(root, dir, context, &kc);
    json_decref(root);
    if (r < 0) {
        kop_kubeconfig_cleanup(&kc);
        return r;
    }
    *ret = kc;
    return 0;
}

int kop_kubeconfig_load_file(const char *path, const char *context, struct kop_kubeconfig *ret)
{
    if (!path || !ret)
        return -EINVAL;
    char *data = NULL;
    size_t len = 0;
    int r = read_small_file(path, MAX_FILE, &data, &len);
    if (r < 0)
        return r;
    char *dir = strdup(path);
    if (!dir) {
        free(data);
        return -ENOMEM;
    }
    char *slash = strrchr(dir, '/');
    if (slash)
        *(slash == dir ? slash + 1 : slash) = '\0';
    else
        dir[0] = '\0';
    r = kop_kubeconfig_load_buffer(data, len, dir, context, ret);
    free(dir);
    free(data);
    return r;
}

int kop_kubeconfig_in_cluster(const char *root, struct kop_kubeconfig *ret)
{
    if (!ret)
        return -EINVAL;
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port)
        return -ENOENT;
    if (!root)
        root = "";
    int r = 0;
    struct kop_kubeconfig kc = {0};
    kc.in_cluster = true;
    char path[4096];
    size_t n = strlen(host) + strlen(port) + 16;
    kc.server = malloc(n);
    if (!kc.server) {
        r = -ENOMEM;
        goto out;
    }
    if (strchr(host, ':'))
        snprintf(kc.server, n, "https://[%s]:%s", host, port);
    else
        snprintf(kc.server, n, "https://%s:%s", host, port);

    snprintf(path, sizeof(path), "%s" SA_DIR "/token", root);
    if (access(path, R_OK) != 0) {
        r = -ENOENT;
        goto out;
    }
    kc.token_file = strdup(path);
    snprintf(path, sizeof(path), "%s" SA_DIR "/ca.crt", root);
    if (access(path, R_OK) == 0)
        kc.ca_file = strdup(path);
    snprintf(path, sizeof(path), "%s" SA_DIR "/namespace", root);
    char *ns = NULL;
    if (read_small_file(path, 4096, &ns, NULL) == 0) {
        trim(ns);
        if (*ns)
            kc.namespace = ns;
        else
            free(ns);
    }
    if (!kc.token_file) {
        r = -ENOMEM;
        goto out;
    }
    *ret = kc;
    return 0;
out:
    kop_kubeconfig_cleanup(&kc);
    return r;
}

int kop_kubeconfig_load_default(const char *explicit_path, const char *in_cluster_root,
                                struct kop_kubeconfig *ret)
{
    if (explicit_path && *explicit_path)
        return kop_kubeconfig_load_file(explicit_path, NULL, ret);
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
        /* Only the first file of the list (documented). */
        char *first = strndup(env, strcspn(env, ":"));
        if (!first)
            return -ENOMEM;
        int r = *first ? kop_kubeconfig_load_file(first, NULL, ret) : -ENOENT;
        free(first);
        return r;
    }
    int r = kop_kubeconfig_in_cluster(in_cluster_root, ret);
    if (r != -ENOENT)
        return r;
    const char *home = getenv("HOME");
    if (!home || !*home)
        return -ENOENT;
    char path[4096];
    snprintf(path, sizeof(path), "%s/.kube/config", home);
    return kop_kubeconfig_load_file(path, NULL, ret);
}

static void wipe_free(char *p, size_t n)
{
    if (!p)
        return;
    explicit_bzero(p, n);
    free(p);
}

void kop_kubeconfig_cleanup(struct kop_kubeconfig *kc)
{
    if (!kc)
        return;
    free(kc->server);
    free(kc->ca_file);
    free(kc->ca_data);
    free(kc->cert_file);
    free(kc->cert_data);
    free(kc->key_file);
    wipe_free(kc->key_data, kc->key_data_len);
    wipe_free(kc->token, kc->token ? strlen(kc->token) : 0);
    free(kc->token_file);
    free(kc->tls_server_name);
    free(kc->namespace);
    memset(kc, 0, sizeof(*kc));
}
