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

#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#include <jansson.h>
#include <yaml.h>

#include "kop/file.h"
#include "kop/json.h"
#include "kop/log.h"

#define MAX_DEPTH 64
#define MAX_NODES 200000
/* libyaml's loader looks anchors up by a linear search (and its scanner
 * does work per flow level for every token): a file of a few MiB made of
 * anchors and aliases, or of nested '[', keeps it busy for hours. A
 * pre-pass over the events refuses both before the loader runs. */
#define MAX_ANCHORS 4096
/* Largest kubeconfig or CA file, and largest namespace file, in bytes:
 * 16 MiB and 4 KiB less the two bytes the reader always kept free. */
#define MAX_FILE ((16u << 20) - 2)
#define MAX_NAMESPACE_FILE (4096 - 2)
#define SA_DIR "/var/run/secrets/kubernetes.io/serviceaccount"

/* ---- small helpers ------------------------------------------------------- */

/* Why a load failed, for the log line (never holds a secret). */
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
    assert(in);
    assert(ret_buf);
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

int kop_base64_encode(const void *in, size_t len, char **ret)
{
    static const char tab[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    assert(in || !len);
    assert(ret);
    if (len > ((size_t)-1 / 4) * 3 - 3)
        return -EINVAL;
    const unsigned char *p = in;
    char *out = malloc((len + 2) / 3 * 4 + 1);
    if (!out)
        return -ENOMEM;
    size_t o = 0, i = 0;
    for (; i + 2 < len; i += 3) {
        unsigned v = (unsigned)p[i] << 16 | (unsigned)p[i + 1] << 8 | p[i + 2];
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = tab[(v >> 6) & 63];
        out[o++] = tab[v & 63];
    }
    if (i < len) {
        unsigned v = (unsigned)p[i] << 16 | (i + 1 < len ? (unsigned)p[i + 1] << 8 : 0);
        out[o++] = tab[v >> 18];
        out[o++] = tab[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tab[(v >> 6) & 63] : '=';
        out[o++] = '=';
    }
    out[o] = '\0';
    *ret = out;
    return 0;
}

/* ---- YAML -> jansson ----------------------------------------------------- */

/* A plain (unquoted) scalar under an "extension" key keeps its YAML type:
 * an exec plugin receives the extension as JSON (spec.cluster.config), and
 * client-go hands it over as written (null, booleans and numbers of the
 * YAML 1.2 core schema). Everywhere else every scalar stays a string. */
static json_t *typed_scalar(const char *v, size_t n)
{
    if (n == 0 || (n == 1 && v[0] == '~') ||
        (n == 4 && (!memcmp(v, "null", 4) || !memcmp(v, "Null", 4) || !memcmp(v, "NULL", 4))))
        return json_null();
    if ((n == 4 && (!memcmp(v, "true", 4) || !memcmp(v, "True", 4) || !memcmp(v, "TRUE", 4))))
        return json_true();
    if ((n == 5 && (!memcmp(v, "false", 5) || !memcmp(v, "False", 5) || !memcmp(v, "FALSE", 5))))
        return json_false();
    if (n < 64 && strspn(v, "0123456789+-.eE") == n && strpbrk(v, "0123456789")) {
        char buf[64], *end;
        memcpy(buf, v, n);
        buf[n] = '\0';
        errno = 0;
        long long ll = strtoll(buf, &end, 10);
        if (*end == '\0' && errno == 0)
            return json_integer(ll);
        double d = strtod(buf, &end);
        if (*end == '\0' && errno == 0)
            return json_real(d);
    }
    return json_stringn(v, n);
}

static json_t *convert(yaml_document_t *doc, yaml_node_t *node, int depth, size_t *budget,
                       bool typed)
{
    if (!node || depth > MAX_DEPTH || *budget == 0)
        return NULL;
    (*budget)--;
    switch (node->type) {
    case YAML_SCALAR_NODE:
        if (typed && node->data.scalar.style == YAML_PLAIN_SCALAR_STYLE)
            return typed_scalar((const char *)node->data.scalar.value, node->data.scalar.length);
        return json_stringn((const char *)node->data.scalar.value, node->data.scalar.length);
    case YAML_SEQUENCE_NODE: {
        json_t *arr = json_array();
        for (yaml_node_item_t *it = node->data.sequence.items.start;
             arr && it < node->data.sequence.items.top; it++) {
            json_t *v = convert(doc, yaml_document_get_node(doc, *it), depth + 1, budget, typed);
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
            bool sub = typed || (key && strcmp(key, "extension") == 0);
            json_t *v = convert(doc, yaml_document_get_node(doc, p->value), depth + 1, budget, sub);
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

/* The pre-pass (see MAX_ANCHORS): syntax, nesting depth and anchors, with
 * the event parser, which stops at the first excess. */
static int yaml_check(const char *data, size_t len, char *why, size_t why_len)
{
    yaml_parser_t parser;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    int r = 0, depth = 0;
    size_t anchors = 0;
    for (;;) {
        yaml_event_t ev;
        if (!yaml_parser_parse(&parser, &ev)) {
            kop_msgf(why, why_len, "not valid YAML: %s at line %zu, column %zu",
                     parser.problem ? parser.problem : "syntax error",
                     (size_t)parser.problem_mark.line + 1, (size_t)parser.problem_mark.column + 1);
            r = -EINVAL;
            break;
        }
        yaml_event_type_t type = ev.type;
        const yaml_char_t *anchor = NULL;
        if (type == YAML_SCALAR_EVENT)
            anchor = ev.data.scalar.anchor;
        else if (type == YAML_SEQUENCE_START_EVENT)
            anchor = ev.data.sequence_start.anchor;
        else if (type == YAML_MAPPING_START_EVENT)
            anchor = ev.data.mapping_start.anchor;
        /* "\0" in a double-quoted scalar: every C string after this
         * point would be cut there ("a\0b" read as the token "a"). */
        if (type == YAML_SCALAR_EVENT &&
            memchr(ev.data.scalar.value, '\0', ev.data.scalar.length) != NULL) {
            kop_msgf(why, why_len, "a NUL character in a value (line %zu)",
                     (size_t)ev.start_mark.line + 1);
            r = -EINVAL;
        }
        if (anchor && ++anchors > MAX_ANCHORS) {
            kop_msgf(why, why_len, "more than %d YAML anchors", MAX_ANCHORS);
            r = -EINVAL;
        }
        if ((type == YAML_SEQUENCE_START_EVENT || type == YAML_MAPPING_START_EVENT) &&
            ++depth > MAX_DEPTH) {
            kop_msgf(why, why_len, "nested deeper than %d levels (line %zu)", MAX_DEPTH,
                     (size_t)ev.start_mark.line + 1);
            r = -EINVAL;
        }
        if (type == YAML_SEQUENCE_END_EVENT || type == YAML_MAPPING_END_EVENT)
            depth--;
        yaml_event_delete(&ev);
        if (r < 0 || type == YAML_STREAM_END_EVENT)
            break;
    }
    yaml_parser_delete(&parser);
    return r;
}

static int yaml_to_json(const char *data, size_t len, json_t **ret, char *why, size_t why_len)
{
    int r = yaml_check(data, len, why, why_len);
    if (r < 0)
        return r;
    yaml_parser_t parser;
    yaml_document_t doc;
    if (!yaml_parser_initialize(&parser))
        return -ENOMEM;
    yaml_parser_set_input_string(&parser, (const unsigned char *)data, len);
    if (!yaml_parser_load(&parser, &doc)) {
        kop_msgf(why, why_len, "not valid YAML: %s", parser.problem ? parser.problem : "");
        yaml_parser_delete(&parser);
        return -EINVAL;
    }
    yaml_node_t *root = yaml_document_get_root_node(&doc);
    size_t budget = MAX_NODES;
    json_t *j = root ? convert(&doc, root, 0, &budget, false) : NULL;
    if (!json_is_object(j)) {
        json_decref(j);
        if (budget == 0)
            kop_msgf(why, why_len, "more than %d YAML nodes (aliases expanded)", MAX_NODES);
        else
            kop_msgf(why, why_len, "not a kubeconfig: the document is not a mapping");
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

/* Replace the relative path at obj[key] with dir/path (client-go's
 * ResolvePath, clientcmd/loader.go). The tree is kop's own; the joined
 * path is stored unchecked, as a file name need not be UTF-8. */
static int resolve_at(json_t *obj, const char *key, const char *dir)
{
    const char *v = str_at(obj, key);
    if (!v || v[0] == '/' || !dir || !*dir)
        return 0;
    char *p = join_path(dir, v);
    if (!p)
        return -ENOMEM;
    int r = json_object_set_new_nocheck(obj, key, json_string_nocheck(p)) == 0 ? 0 : -ENOMEM;
    free(p);
    return r;
}

/*
 * Resolve the relative file names of one kubeconfig against its directory
 * before anything else reads it, as client-go's ResolveLocalPaths
 * (clientcmd/loader.go) does with each entry's LocationOfOrigin: in a
 * merged $KUBECONFIG list a cluster and a user may come from different
 * files. The names are those of GetClusterFileReferences and
 * GetAuthInfoFileReferences: certificate-authority; client-certificate,
 * client-key, tokenFile, and an exec command that holds a '/' (a bare
 * name is a $PATH lookup).
 */
static int resolve_paths(json_t *root, const char *dir)
{
    size_t i;
    json_t *e;
    int r = 0;
    json_array_foreach(json_object_get(root, "clusters"), i, e)
    {
        json_t *c = json_object_get(e, "cluster");
        if (r == 0 && json_is_object(c))
            r = resolve_at(c, "certificate-authority", dir);
    }
    json_array_foreach(json_object_get(root, "users"), i, e)
    {
        json_t *u = json_object_get(e, "user");
        if (!json_is_object(u))
            continue;
        if (r == 0)
            r = resolve_at(u, "client-certificate", dir);
        if (r == 0)
            r = resolve_at(u, "client-key", dir);
        if (r == 0)
            r = resolve_at(u, "tokenFile", dir);
        json_t *x = json_object_get(u, "exec");
        const char *command = str_at(x, "command");
        if (r == 0 && json_is_object(x) && command && strchr(command, '/'))
            r = resolve_at(x, "command", dir);
    }
    return r;
}

void kop_exec_config_free(struct kop_exec_config *ec)
{
    if (!ec)
        return;
    free(ec->command);
    for (size_t i = 0; i < ec->n_args; i++)
        free(ec->args[i]);
    free(ec->args);
    for (size_t i = 0; i < ec->n_env; i++) {
        free(ec->env[i].name);
        if (ec->env[i].value) /* plugin env often carries secrets */
            explicit_bzero(ec->env[i].value, strlen(ec->env[i].value));
        free(ec->env[i].value);
    }
    free(ec->env);
    free(ec->api_version);
    free(ec->install_hint);
    json_decref(ec->cluster);
    free(ec);
}

/* set_new that reports failure (it steals v either way). */
static int set_new(json_t *obj, const char *key, json_t *v)
{
    return json_object_set_new(obj, key, v) == 0 ? 0 : -ENOMEM;
}

/*
 * The ExecCredential's spec.cluster (client.authentication.k8s.io/v1
 * Cluster; the field set of client-go's rest.ConfigToExecCluster): the CA
 * goes as bytes (base64 in JSON), read from the file when the kubeconfig
 * names one.
 */
static int exec_cluster(const json_t *cluster, const struct kop_kubeconfig *kc, json_t **ret)
{
    json_t *c = json_object();
    if (!c)
        return -ENOMEM;
    int r = set_new(c, "server", json_string(str_at(cluster, "server")));
    const char *tsn = str_at(cluster, "tls-server-name");
    if (r == 0 && tsn)
        r = set_new(c, "tls-server-name", json_string(tsn));
    if (r == 0 && kc->insecure_skip_tls_verify)
        r = set_new(c, "insecure-skip-tls-verify", json_true());
    char *ca = NULL;
    size_t ca_len = 0;
    if (r == 0 && kc->ca_data) {
        r = kop_base64_encode(kc->ca_data, kc->ca_data_len, &ca);
    } else if (r == 0 && kc->ca_file) {
        char *pem = NULL;
        r = kop_file_read(kc->ca_file, MAX_FILE, 0, &pem, &ca_len);
        if (r < 0 && r != -ENOENT && r != -ENOMEM)
            r = -EINVAL; /* a directory, unreadable, too large: not a CA file */
        if (r == 0)
            r = kop_base64_encode(pem, ca_len, &ca);
        free(pem);
    }
    if (r == 0 && ca)
        r = set_new(c, "certificate-authority-data", json_string(ca));
    free(ca);
    const char *proxy = str_at(cluster, "proxy-url");
    if (r == 0 && proxy)
        r = set_new(c, "proxy-url", json_string(proxy));
    if (r == 0 && yaml_true(str_at(cluster, "disable-compression")))
        r = set_new(c, "disable-compression", json_true());
    size_t i;
    json_t *e;
    json_array_foreach(json_object_get(cluster, "extensions"), i, e)
    {
        const char *n = json_string_value(json_object_get(e, "name"));
        json_t *ext = json_object_get(e, "extension");
        if (r == 0 && n && ext && strcmp(n, "client.authentication.k8s.io/exec") == 0)
            r = set_new(c, "config", json_deep_copy(ext));
    }
    if (r < 0) {
        json_decref(c);
        return r;
    }
    *ret = c;
    return 0;
}

static int parse_exec(const json_t *exec, const json_t *cluster, struct kop_kubeconfig *kc)
{
    if (!json_is_object(exec))
        return -EINVAL;
    const char *command = str_at(exec, "command");
    const char *api_version = str_at(exec, "apiVersion");
    const char *mode = str_at(exec, "interactiveMode");
    if (!command || !api_version)
        return -EINVAL;
    bool v1 = strcmp(api_version, "client.authentication.k8s.io/v1") == 0;
    if (!v1 && strcmp(api_version, "client.authentication.k8s.io/v1beta1") != 0)
        return -ENOTSUP; /* v1alpha1 is gone since Kubernetes 1.24 */
    enum kop_exec_interactive im;
    if (!mode && v1)
        return -EINVAL; /* required in v1 */
    if (!mode || strcmp(mode, "IfAvailable") == 0)
        im = KOP_EXEC_INTERACTIVE_IF_AVAILABLE;
    else if (strcmp(mode, "Never") == 0)
        im = KOP_EXEC_INTERACTIVE_NEVER;
    else if (strcmp(mode, "Always") == 0)
        im = KOP_EXEC_INTERACTIVE_ALWAYS;
    else
        return -EINVAL;
    json_t *args = json_object_get(exec, "args");
    json_t *env = json_object_get(exec, "env");
    if ((args && !json_is_array(args)) || (env && !json_is_array(env)))
        return -EINVAL;
    struct kop_exec_config *ec = calloc(1, sizeof(*ec));
    if (!ec)
        return -ENOMEM;
    int r = 0;
    ec->interactive_mode = im;
    ec->provide_cluster_info = yaml_true(str_at(exec, "provideClusterInfo"));
    /* A command with a '/' was resolved against the kubeconfig's
     * directory (resolve_paths); a bare name is a $PATH lookup. */
    r = dup_field(command, &ec->command);
    if (r == 0)
        r = dup_field(api_version, &ec->api_version);
    if (r == 0)
        r = dup_field(str_at(exec, "installHint"), &ec->install_hint);
    size_t na = json_array_size(args), ne = json_array_size(env);
    if (r == 0 && na) {
        ec->args = calloc(na, sizeof(*ec->args));
        r = ec->args ? 0 : -ENOMEM;
    }
    for (size_t i = 0; r == 0 && i < na; i++) {
        const char *a = json_string_value(json_array_get(args, i));
        if (!a) {
            r = -EINVAL;
            break;
        }
        ec->args[i] = strdup(a);
        r = ec->args[i] ? 0 : -ENOMEM;
        ec->n_args = i + 1;
    }
    if (r == 0 && ne) {
        ec->env = calloc(ne, sizeof(*ec->env));
        r = ec->env ? 0 : -ENOMEM;
    }
    for (size_t i = 0; r == 0 && i < ne; i++) {
        json_t *e = json_array_get(env, i);
        const char *n = str_at(e, "name");
        const char *v = json_string_value(json_object_get(e, "value"));
        if (!n || strchr(n, '=')) {
            r = -EINVAL;
            break;
        }
        ec->n_env = i + 1;
        ec->env[i].name = strdup(n);
        ec->env[i].value = strdup(v ? v : "");
        r = ec->env[i].name && ec->env[i].value ? 0 : -ENOMEM;
    }
    if (r == 0 && ec->provide_cluster_info)
        r = exec_cluster(cluster, kc, &ec->cluster);
    if (r < 0) {
        kop_exec_config_free(ec);
        return r;
    }
    kc->exec = ec;
    return 0;
}

/* Bytes a URL's host part may not hold (whitespace, controls, and the
 * characters that would end it early). */
static bool url_ok(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        if (*p <= 0x20 || *p == 0x7f || *p == '\\' || *p == '"' || *p == '<' || *p == '>')
            return false;
    return true;
}

/* server: an http:// or https:// URL with a host. client-go guesses a
 * scheme for a bare "host:port"; kop refuses it rather than guess (plain
 * http would send the credentials in clear). */
static int check_server(const char *server, char *why, size_t why_len)
{
    const char *host = NULL;
    if (strncasecmp(server, "https://", 8) == 0)
        host = server + 8;
    else if (strncasecmp(server, "http://", 7) == 0)
        host = server + 7;
    if (!host || !*host || *host == '/' || *host == ':' || !url_ok(server)) {
        kop_msgf(why, why_len,
                 "cluster server \"%.200s\" is not an http:// or https:// URL with a host", server);
        return -EINVAL;
    }
    return 0;
}

/* A file the client reads later (libcurl at each handshake, the token
 * reader periodically): when it exists it must be a regular file, as a
 * FIFO would block the reading thread for ever. Whether it must exist
 * already is check_readable's business. */
static int not_special(const char *field, const char *path, char *why, size_t why_len)
{
    struct stat st;
    if (!path || stat(path, &st) != 0 || S_ISREG(st.st_mode))
        return 0;
    kop_msgf(why, why_len, "%s %.300s is not a regular file", field, path);
    return -EINVAL;
}

/*
 * A file the kubeconfig names must be readable when the configuration is
 * loaded, as client-go reads it then: validateClusterInfo and
 * validateAuthInfo (clientcmd/validation.go) open certificate-authority,
 * client-certificate and client-key ("unable to read certificate-authority
 * %v for %v due to %v"; label is client-go's name for the field), so a
 * missing CA file fails the start with one line instead of every request.
 * not_special has refused a FIFO before: opening one would block. owner:
 * the cluster or user that names the file.
 */
static int check_readable(const char *label, const char *path, const char *owner, char *why,
                          size_t why_len)
{
    if (!path)
        return 0;
    char byte[2];
    int r = kop_file_read_into(path, byte, sizeof(byte), NULL);
    explicit_bzero(byte, sizeof(byte));
    if (r < 0) {
        char eb[128];
        kop_msgf(why, why_len, "unable to read %s %.300s for %.200s due to %s", label, path,
                 owner ? owner : "", strerror_r(-r, eb, sizeof(eb)));
    }
    return r;
}

static int b64_named(const char *v, const char *what, char **out, size_t *out_len, char *why,
                     size_t why_len)
{
    int r = b64_field(v, out, out_len);
    if (r == -EINVAL)
        kop_msgf(why, why_len, "%s is not valid base64", what);
    return r;
}

/* The cluster's fields (and the context's namespace) into kc. */
static int fill_cluster(const json_t *ctx, const json_t *cluster, const char *cluster_name,
                        struct kop_kubeconfig *kc, char *why, size_t why_len)
{
    const char *server = str_at(cluster, "server");
    if (!server) {
        kop_msgf(why, why_len, "cluster \"%.200s\" has no server", cluster_name);
        return -EINVAL;
    }
    int r = dup_field(server, &kc->server);
    if (r < 0)
        return r;
    size_t n = strlen(kc->server);
    while (n > 0 && kc->server[n - 1] == '/')
        kc->server[--n] = '\0';
    r = check_server(kc->server, why, why_len);
    if (r < 0)
        return r;
    r = dup_field(str_at(ctx, "namespace"), &kc->namespace);
    if (r == 0)
        r = dup_field(str_at(cluster, "certificate-authority"), &kc->ca_file);
    if (r == 0)
        r = b64_named(str_at(cluster, "certificate-authority-data"), "certificate-authority-data",
                      &kc->ca_data, &kc->ca_data_len, why, why_len);
    if (r == 0)
        r = dup_field(str_at(cluster, "tls-server-name"), &kc->tls_server_name);
    if (r < 0)
        return r;
    kc->insecure_skip_tls_verify = yaml_true(str_at(cluster, "insecure-skip-tls-verify"));
    /* A CA, as a file or as data, with insecure-skip-tls-verify: client-go
     * refuses it when it builds the TLS transport, in transport.TLSConfigFor
     * (transport/transport.go; HasCA in transport/config.go covers both
     * fields), so a client is never made from such a cluster. Its server
     * settings reach the transport only for an https server
     * (DirectClientConfig.ClientConfig, clientcmd/client_config.go), so an
     * http:// server is not refused. */
    bool https = strncasecmp(kc->server, "https://", 8) == 0;
    if (https && kc->insecure_skip_tls_verify && (kc->ca_file || kc->ca_data)) {
        kop_msgf(why, why_len,
                 "cluster \"%.200s\": specifying a root certificates file with the insecure flag "
                 "is not allowed",
                 cluster_name);
        return -EINVAL;
    }
    r = not_special("certificate-authority", kc->ca_file, why, why_len);
    if (r == 0)
        r = check_readable("certificate-authority", kc->ca_file, cluster_name, why, why_len);
    return r;
}

/* The user's exec stanza into kc->exec ("exec:" or "exec: null": none). */
static int fill_exec(const json_t *user, const char *user_name, const json_t *cluster,
                     struct kop_kubeconfig *kc, char *why, size_t why_len)
{
    int r = 0;
    json_t *exec = json_object_get(user, "exec");
    const char *exec_s = json_string_value(exec);
    if (exec_s && (!*exec_s || !strcmp(exec_s, "null") || !strcmp(exec_s, "~")))
        exec = NULL; /* "exec:" or "exec: null" */
    if (exec) {
        r = parse_exec(exec, cluster, kc);
        if (r == -ENOTSUP)
            kop_msgf(why, why_len,
                     "user \"%.200s\": exec apiVersion is not supported (use "
                     "client.authentication.k8s.io/v1 or v1beta1)",
                     user_name);
        else if (r == -EINVAL)
            kop_msgf(why, why_len,
                     "user \"%.200s\": invalid exec stanza (command and apiVersion "
                     "are required, interactiveMode is Never, IfAvailable or Always, env entries "
                     "need a name)",
                     user_name);
    }
    return r;
}

/* The files the user's fields name: never a special file, and read now
 * where client-go reads them when it loads the configuration. */
static int check_user_files(const struct kop_kubeconfig *kc, bool https, const char *user_name,
                            char *why, size_t why_len)
{
    int r = 0;
    /* label: client-go's name for the field in its message. read: client-go
     * reads the file when it loads the configuration. It opens the
     * certificate and key files in validateAuthInfo; it reads the tokenFile
     * in getUserIdentificationPartialConfig (clientcmd/client_config.go),
     * only when no token is given and only for an https server (it applies
     * a user's credentials to a TLS transport only). Otherwise the file
     * may appear later: the client reads it when it needs it. */
    const struct {
        const char *field, *label, *path;
        bool read;
    } files[] = {{"tokenFile", "tokenFile", kc->token_file, https && !kc->token},
                 {"client-certificate", "client-cert", kc->cert_file, true},
                 {"client-key", "client-key", kc->key_file, true}};
    const size_t n_files = sizeof(files) / sizeof(files[0]);
    for (size_t i = 0; r == 0 && i < n_files; i++)
        r = not_special(files[i].field, files[i].path, why, why_len);
    for (size_t i = 0; r == 0 && i < n_files; i++)
        if (files[i].read)
            r = check_readable(files[i].label, files[i].path, user_name, why, why_len);
    return r;
}

/* The user's credentials into kc. */
static int fill_user(const json_t *user, const char *user_name, const json_t *cluster,
                     struct kop_kubeconfig *kc, char *why, size_t why_len)
{
    bool https = strncasecmp(kc->server, "https://", 8) == 0;
    int r = dup_field(str_at(user, "token"), &kc->token);
    if (r == 0 && kc->token && !kop_text_printable(kc->token)) {
        kop_msgf(why, why_len, "user \"%.200s\": token has control characters", user_name);
        return -EINVAL;
    }
    if (r == 0)
        r = dup_field(str_at(user, "tokenFile"), &kc->token_file);
    if (r == 0)
        r = dup_field(str_at(user, "client-certificate"), &kc->cert_file);
    if (r == 0)
        r = dup_field(str_at(user, "client-key"), &kc->key_file);
    if (r == 0)
        r = b64_named(str_at(user, "client-certificate-data"), "client-certificate-data",
                      &kc->cert_data, &kc->cert_data_len, why, why_len);
    if (r == 0)
        r = b64_named(str_at(user, "client-key-data"), "client-key-data", &kc->key_data,
                      &kc->key_data_len, why, why_len);
    if (r < 0)
        return r;
    r = fill_exec(user, user_name, cluster, kc, why, why_len);
    if (r < 0)
        return r;
    /* client-go's validation: a certificate needs its key and the other
     * way round (one alone used to be passed to libcurl, which failed
     * every request with an OpenSSL message). */
    bool has_cert = kc->cert_file || kc->cert_data, has_key = kc->key_file || kc->key_data;
    if (has_cert != has_key) {
        kop_msgf(why, why_len, "user \"%.200s\": %s", user_name,
                 has_cert ? "client-certificate without client-key (or -data)"
                          : "client-key without client-certificate (or -data)");
        return -EINVAL;
    }
    r = check_user_files(kc, https, user_name, why, why_len);
    if (r < 0)
        return r;
    bool has_cred = kc->token || kc->token_file || kc->cert_file || kc->cert_data || kc->exec;
    if (!has_cred && json_object_get(user, "auth-provider")) {
        kop_msgf(why, why_len,
                 "user \"%.200s\" has only auth-provider credentials, which are not "
                 "supported (use an exec plugin)",
                 user_name);
        return -ENOTSUP;
    }
    return 0;
}

static int fill(const json_t *root, const char *context, struct kop_kubeconfig *kc, char *why,
                size_t why_len)
{
    const char *ctx_name = context ? context : str_at(root, "current-context");
    if (!ctx_name) {
        kop_msgf(why, why_len, "no current-context is set");
        return -ENOENT;
    }
    json_t *ctx = named(root, "contexts", "context", ctx_name);
    if (!ctx) {
        kop_msgf(why, why_len, "context \"%.200s\" not found", ctx_name);
        return -ENOENT;
    }
    const char *cluster_name = str_at(ctx, "cluster");
    const char *user_name = str_at(ctx, "user");
    json_t *cluster = cluster_name ? named(root, "clusters", "cluster", cluster_name) : NULL;
    if (!cluster) {
        if (cluster_name)
            kop_msgf(why, why_len, "cluster \"%.200s\" of context \"%.200s\" not found",
                     cluster_name, ctx_name);
        else
            kop_msgf(why, why_len, "context \"%.200s\" names no cluster", ctx_name);
        return -ENOENT;
    }
    /* A context without a user is valid (anonymous); a named but missing
     * user is an error, as in kubectl. */
    json_t *user = user_name ? named(root, "users", "user", user_name) : NULL;
    if (user_name && !user) {
        kop_msgf(why, why_len, "user \"%.200s\" of context \"%.200s\" not found", user_name,
                 ctx_name);
        return -ENOENT;
    }

    int r = fill_cluster(ctx, cluster, cluster_name, kc, why, why_len);
    if (r < 0 || !user)
        return r;
    return fill_user(user, user_name, cluster, kc, why, why_len);
}

/* One kubeconfig's tree, its relative paths resolved against dir. An
 * empty input is an empty kubeconfig, as in client-go's Load
 * (clientcmd/loader.go). */
static int parse(const char *data, size_t len, const char *dir, json_t **ret, char *why,
                 size_t why_len)
{
    json_t *root = NULL;
    int r = len == 0 ? 0 : yaml_to_json(data, len, &root, why, why_len);
    if (r == 0 && !root)
        root = json_object();
    if (r == 0)
        r = root ? resolve_paths(root, dir) : -ENOMEM;
    if (r < 0) {
        json_decref(root);
        return r;
    }
    *ret = root;
    return 0;
}

/* The configuration of context (NULL: current-context) in root. */
static int use(const json_t *root, const char *context, struct kop_kubeconfig *ret, char *why,
               size_t why_len)
{
    struct kop_kubeconfig kc = {0};
    int r = fill(root, context, &kc, why, why_len);
    if (r < 0) {
        kop_kubeconfig_cleanup(&kc);
        return r;
    }
    *ret = kc;
    return 0;
}

int kop_kubeconfig_load_buffer(const char *data, size_t len, const char *dir, const char *context,
                               struct kop_kubeconfig *ret)
{
    assert(data);
    assert(ret);
    json_t *root = NULL;
    int r = parse(data, len, dir, &root, NULL, 0);
    if (r == 0)
        r = use(root, context, ret, NULL, 0);
    json_decref(root);
    return r;
}

/* Only a regular file (or a symlink to one) is read: opening a FIFO for
 * reading blocks until a writer comes, and start-up runs with the stop
 * signals blocked, so kop would hang beyond SIGTERM. O_NONBLOCK makes the
 * open itself return at once. */
static int check_regular(const char *path, char *why, size_t why_len)
{
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        int e = errno;
        kop_msgf(why, why_len, "cannot open: %s", e == ENOENT ? "no such file" : "not readable");
        return -e;
    }
    struct stat st;
    int r = fstat(fd, &st) == 0 ? 0 : -errno;
    close(fd);
    if (r == 0 && S_ISDIR(st.st_mode)) {
        kop_msgf(why, why_len, "is a directory, not a file");
        return -EISDIR;
    }
    if (r == 0 && !S_ISREG(st.st_mode)) {
        kop_msgf(why, why_len, "not a regular file");
        return -EINVAL;
    }
    return r;
}

/* Read and parse the kubeconfig file at path. */
static int read_file(const char *path, json_t **ret, char *why, size_t why_len)
{
    char *data = NULL;
    size_t len = 0;
    int r = check_regular(path, why, why_len);
    if (r == 0)
        r = kop_file_read(path, MAX_FILE, 0, &data, &len);
    if (r == -EFBIG)
        kop_msgf(why, why_len, "larger than %u bytes", MAX_FILE);
    else if (r < 0 && r != -ENOMEM && (!why || !*why))
        kop_msgf(why, why_len, "cannot read (errno %d)", -r);
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
    r = parse(data, len, dir, ret, why, why_len);
    free(dir);
    free(data);
    return r;
}

static int load_file(const char *path, const char *context, struct kop_kubeconfig *ret, char *why,
                     size_t why_len)
{
    json_t *root = NULL;
    int r = read_file(path, &root, why, why_len);
    if (r == 0)
        r = use(root, context, ret, why, why_len);
    json_decref(root);
    return r;
}

static void log_failure(const char *source, const char *path, int r, const char *why)
{
    kop_log_errno(KOP_LOG_ERROR, "kubeconfig", "cannot use the API server configuration", r,
                  json_pack("{s:s, s:s, s:s}", "source", source, "path", path ? path : "", "reason",
                            why && *why ? why : "see error"));
}

int kop_kubeconfig_load_file(const char *path, const char *context, struct kop_kubeconfig *ret)
{
    assert(path);
    assert(ret);
    char why[512] = "";
    int r = load_file(path, context, ret, why, sizeof(why));
    if (r < 0)
        log_failure("kubeconfig", path, r, why);
    return r;
}

/* $KUBERNETES_SERVICE_HOST: a host name or an IP address, nothing else
 * (it goes into the URL as it is). */
static bool service_host_ok(const char *h)
{
    if (strlen(h) > 253)
        return false;
    for (const unsigned char *p = (const unsigned char *)h; *p; p++)
        if (!isalnum(*p) && *p != '.' && *p != '-' && *p != ':' && *p != '_' && *p != '%')
            return false;
    return true;
}

static bool service_port_ok(const char *s)
{
    long v = 0;
    if (!*s || strlen(s) > 5)
        return false;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9')
            return false;
        v = v * 10 + (*p - '0');
    }
    return v >= 1 && v <= 65535;
}

static int in_cluster(const char *root, struct kop_kubeconfig *ret, char *why, size_t why_len)
{
    const char *host = getenv("KUBERNETES_SERVICE_HOST");
    const char *port = getenv("KUBERNETES_SERVICE_PORT");
    if (!host || !*host || !port || !*port) {
        kop_msgf(why, why_len, "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set");
        return -ENOENT;
    }
    if (!service_host_ok(host)) {
        kop_msgf(why, why_len, "KUBERNETES_SERVICE_HOST \"%.100s\" is not a host name or address",
                 host);
        return -EINVAL;
    }
    if (!service_port_ok(port)) {
        kop_msgf(why, why_len, "KUBERNETES_SERVICE_PORT \"%.100s\" is not a port (1-65535)", port);
        return -EINVAL;
    }
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
        kop_msgf(why, why_len, "service account token %s cannot be read", path);
        r = -ENOENT;
        goto out;
    }
    kc.token_file = strdup(path);
    snprintf(path, sizeof(path), "%s" SA_DIR "/ca.crt", root);
    if (access(path, R_OK) == 0)
        kc.ca_file = strdup(path);
    snprintf(path, sizeof(path), "%s" SA_DIR "/namespace", root);
    char *ns = NULL;
    if (kop_file_read(path, MAX_NAMESPACE_FILE, 0, &ns, NULL) == 0) {
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

int kop_kubeconfig_in_cluster(const char *root, struct kop_kubeconfig *ret)
{
    assert(ret);
    return in_cluster(root, ret, NULL, 0);
}

/* The named lists of a kubeconfig, merged entry by entry. */
static const char *const merged_lists[] = {"clusters", "contexts", "users"};
#define N_MERGED (sizeof(merged_lists) / sizeof(merged_lists[0]))

/*
 * Add root's entries to merged, as client-go's ClientConfigLoadingRules.Load
 * (clientcmd/loader.go) does: the first file to set a map entry (a cluster,
 * a user or a context, by name) wins and the entry is never changed; the
 * current-context comes from the first file that sets one. seen holds, per
 * list, the names taken so far.
 */
static int merge_into(json_t *merged, json_t *seen, const json_t *root)
{
    for (size_t l = 0; l < N_MERGED; l++) {
        json_t *dst = json_object_get(merged, merged_lists[l]);
        json_t *taken = json_object_get(seen, merged_lists[l]);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(root, merged_lists[l]), i, e)
        {
            const char *n = json_string_value(json_object_get(e, "name"));
            if (!n || json_object_get(taken, n))
                continue;
            if (json_object_set_new(taken, n, json_true()) < 0 || json_array_append(dst, e) < 0)
                return -ENOMEM;
        }
    }
    const char *cc = str_at(root, "current-context");
    if (cc && !json_object_get(merged, "current-context") &&
        json_object_set_new(merged, "current-context", json_string(cc)) < 0)
        return -ENOMEM;
    return 0;
}

/*
 * $KUBECONFIG, a ':'-separated list, merged as client-go's
 * ClientConfigLoadingRules.Load (clientcmd/loader.go) merges it: files in
 * list order, empty entries skipped, a missing file skipped, a file that
 * cannot be read or parsed an error. Every file gets the checks of one
 * (regular file, size, YAML limits) and its relative paths are resolved
 * against its own directory (read_file). *ret_empty: the list gave no
 * entry and no current-context (client-go's IsConfigEmpty); *ret is then
 * untouched. *ret_where: the file that failed (malloc'd), or NULL.
 */
static int load_list(const char *list, struct kop_kubeconfig *ret, bool *ret_empty,
                     char **ret_where, char *why, size_t why_len)
{
    json_t *merged = json_pack("{s:[], s:[], s:[]}", "clusters", "contexts", "users");
    json_t *seen = json_pack("{s:{}, s:{}, s:{}}", "clusters", "contexts", "users");
    int r = merged && seen ? 0 : -ENOMEM;
    const char *p = list;
    while (r == 0 && *p) {
        size_t n = strcspn(p, ":");
        if (n > 0) {
            char *path = strndup(p, n);
            json_t *root = NULL;
            r = path ? read_file(path, &root, why, why_len) : -ENOMEM;
            if (r == -ENOENT) {
                r = 0; /* skipped, as client-go skips it */
                why[0] = '\0';
            }
            if (r == 0 && root)
                r = merge_into(merged, seen, root);
            json_decref(root);
            if (r < 0 && r != -ENOMEM)
                *ret_where = path;
            else
                free(path);
        }
        p += n;
        if (*p == ':')
            p++;
    }
    bool empty = !json_object_get(merged, "current-context");
    for (size_t l = 0; l < N_MERGED; l++)
        empty = empty && json_object_size(json_object_get(seen, merged_lists[l])) == 0;
    if (r == 0 && empty)
        *ret_empty = true;
    else if (r == 0)
        r = use(merged, NULL, ret, why, why_len);
    json_decref(merged);
    json_decref(seen);
    return r;
}

int kop_kubeconfig_load_default(const char *explicit_path, const char *in_cluster_root,
                                struct kop_kubeconfig *ret)
{
    char why[512] = "";
    int r;
    if (explicit_path && *explicit_path) {
        r = load_file(explicit_path, NULL, ret, why, sizeof(why));
        if (r < 0)
            log_failure("--kubeconfig", explicit_path, r, why);
        return r;
    }
    const char *env = getenv("KUBECONFIG");
    if (env && *env) {
        bool empty = false;
        char *where = NULL;
        r = load_list(env, ret, &empty, &where, why, sizeof(why));
        if (r < 0)
            log_failure("$KUBECONFIG", where ? where : env, r, why);
        free(where);
        if (r < 0 || !empty)
            return r;
        /* Nothing in the list. client-go's DeferredLoadingClientConfig.
         * ClientConfig (clientcmd/merged_client_builder.go) then uses the
         * in-cluster configuration when it can, else fails with ErrEmptyConfig
         * (clientcmd/validation.go). $HOME/.kube/config is not read: client-go's
         * NewDefaultClientConfigLoadingRules (clientcmd/loader.go) lists it
         * only when $KUBECONFIG is unset. */
        r = in_cluster(in_cluster_root, ret, why, sizeof(why));
        if (r == -ENOENT) {
            char all[768];
            kop_msgf(all, sizeof(all),
                     "invalid configuration: no configuration has been provided (no file of the "
                     "list exists or none has an entry, and not in a cluster: %s)",
                     why);
            log_failure("$KUBECONFIG", env, r, all);
        } else if (r < 0) {
            log_failure("in-cluster", "", r, why);
        }
        return r;
    }
    r = in_cluster(in_cluster_root, ret, why, sizeof(why));
    if (r != -ENOENT) {
        if (r < 0)
            log_failure("in-cluster", "", r, why);
        return r;
    }
    const char *home = getenv("HOME");
    char path[4096];
    if (home && *home)
        snprintf(path, sizeof(path), "%s/.kube/config", home);
    if (!home || !*home || access(path, F_OK) != 0) {
        char all[768];
        snprintf(all, sizeof(all),
                 "no --kubeconfig, no $KUBECONFIG, no $HOME/.kube/config, and not in a cluster "
                 "(%s)",
                 why);
        log_failure("default", "", -ENOENT, all);
        return -ENOENT;
    }
    why[0] = '\0';
    r = load_file(path, NULL, ret, why, sizeof(why));
    if (r < 0)
        log_failure("$HOME/.kube/config", path, r, why);
    return r;
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
    kop_exec_config_free(kc->exec);
    memset(kc, 0, sizeof(*kc));
}
