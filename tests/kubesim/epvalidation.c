/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A user's EndpointSlice (discovery.k8s.io/v1) and Endpoints (core/v1) as
 * the apiserver's registry takes them in Kubernetes 1.32:
 *  - the v1 defaults: discovery/v1 SetDefaults_EndpointPort (name "",
 *    protocol TCP) and core/v1 SetDefaults_Endpoints (a port's protocol
 *    TCP when empty);
 *  - the EndpointSlice strategy's PrepareForCreate/PrepareForUpdate
 *    (pkg/registry/discovery/endpointslice/strategy.go dropTopologyOnV1:
 *    a v1 write's endpoints lose deprecatedTopology, unless an update
 *    leaves the endpoints as they were);
 *  - pkg/apis/discovery/validation ValidateEndpointSliceCreate and
 *    ValidateEndpointSliceUpdate, and pkg/apis/core/validation
 *    ValidateEndpointsCreate and ValidateEndpointsUpdate, with their field
 *    paths, messages and order. ObjectMeta is validation.c's
 *    (validate_meta), which ks_validate_object runs first, as both
 *    Validate functions do.
 *
 * DESIGN
 * Addresses are parsed as the 1.32 checks parse them: netutils.ParseIPSloppy
 * (k8s.io/utils/net, a copy of the Go 1.16 parser), which takes IPv4 octets
 * with leading zeros ("010.0.0.1" is 10.0.0.1) and IPv6 groups of more than
 * 4 hex digits ("00001"), where inet_pton refuses both. An IPv4-mapped IPv6
 * address (::ffff:1.2.3.4) is an IPv4 one (net.IP.To4), for the address
 * type and the special ranges alike.
 *
 * Both kinds' enums (addressType, protocol) are reported here among the
 * other errors, not by kschema.c's early check (validates_enums there).
 *
 * Not emulated: the strategy's WarningsOnCreate ("FQDN endpoints are
 * deprecated" for addressType FQDN) and the validation of a deprecatedTopology
 * that an update keeps (a v1 write never stores one).
 *
 * kubesim's own controllers (endpoints.c) store their objects directly, not
 * through ks_validate_object: their Endpoints and EndpointSlice
 * default/kubernetes point at 127.0.0.1, which a user's write may not.
 */
#include "kubesim.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* pkg/apis/discovery/validation/validation.go */
#define MAX_ADDRESSES 100
#define MAX_PORTS 20000 /* 100 before 1.21 (kubernetes#99795) */
#define MAX_ENDPOINTS 1000
#define MAX_ZONE_HINTS 8

static const char *const protocols = "\"SCTP\", \"TCP\", \"UDP\""; /* sets.List: sorted */

/* ---- helpers ----------------------------------------------------------------------- */

static const char *str_member(const json_t *obj, const char *k)
{
    return json_string_value(json_object_get(obj, k));
}

/* A member that is there and not JSON null (a Go pointer that is not nil). */
static bool has(const json_t *obj, const char *k)
{
    const json_t *v = json_object_get(obj, k);
    return v && !json_is_null(v);
}

static void set_default(json_t *obj, const char *k, json_t *v)
{
    if (!has(obj, k))
        json_object_set_new(obj, k, v);
    else
        json_decref(v);
}

/* The i-th item of a list as an object to default: a null item decodes as
 * the zero value, made here; NULL for anything else. @ref borrow */
static json_t *item_obj(json_t *list, size_t i)
{
    json_t *v = json_array_get(list, i);
    if (json_is_null(v)) {
        v = json_object();
        json_array_set_new(list, i, v);
    }
    return json_is_object(v) ? v : NULL;
}

/* field.Invalid(field, a string value, detail) */
static void invalid_one(json_t *causes, const char *field, const char *value, const char *detail)
{
    ks_invalid_str(causes, field, value, json_pack("[s]", detail));
}

/* field.TooMany(field, n, max) */
static void too_many(json_t *causes, const char *field, size_t n, int max)
{
    ks_cause(causes, "FieldValueTooMany", field, "Too many: %zu: must have at most %d items", n,
             max);
}

/* ---- IP addresses (netip.c reads them as k8s.io/utils/net ParseIPSloppy) -------- */

/* validation.IsValidIPv4Address (want4) or IsValidIPv6Address */
static void ip_family(json_t *causes, const char *field, const char *addr, bool want4)
{
    unsigned char ip[16];
    if (!ks_ip_parse(addr, ip) || ks_ip_is_v4(ip) != want4)
        invalid_one(causes, field, addr,
                    want4 ? "must be a valid IPv4 address" : "must be a valid IPv6 address");
}

/* apivalidation.ValidateNonSpecialIP: no unspecified, loopback, link-local
 * or link-local multicast address (net.IP's IsUnspecified, IsLoopback,
 * IsLinkLocalUnicast, IsLinkLocalMulticast) */
static void non_special_ip(json_t *causes, const char *field, const char *addr)
{
    unsigned char ip[16];
    if (!ks_ip_parse(addr, ip)) {
        invalid_one(causes, field, addr, "must be a valid IP address");
        return;
    }
    bool v4 = ks_ip_is_v4(ip);
    static const uint8_t zero[16], one[16] = {[15] = 1};
    if ((v4 && memcmp(ip + 12, zero, 4) == 0) || memcmp(ip, zero, 16) == 0) {
        char *m = ks_printf("may not be unspecified (%s)", addr);
        invalid_one(causes, field, addr, m);
        free(m);
    }
    if (v4 ? ip[12] == 127 : memcmp(ip, one, 16) == 0)
        invalid_one(causes, field, addr, "may not be in the loopback range (127.0.0.0/8, ::1/128)");
    if (v4 ? ip[12] == 169 && ip[13] == 254 : ip[0] == 0xfe && (ip[1] & 0xc0) == 0x80)
        invalid_one(causes, field, addr,
                    "may not be in the link-local range (169.254.0.0/16, fe80::/10)");
    if (v4 ? ip[12] == 224 && ip[13] == 0 && ip[14] == 0 : ip[0] == 0xff && (ip[1] & 0x0f) == 0x02)
        invalid_one(causes, field, addr,
                    "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)");
}

/* validation.IsFullyQualifiedDomainName: one trailing dot allowed; a DNS-1123
 * subdomain of two labels at least; the first error only, its messages
 * joined by ",". */
static void fqdn(json_t *causes, const char *field, const char *addr)
{
    if (!*addr) {
        ks_required(causes, field, NULL);
        return;
    }
    char *name = ks_strdup(addr);
    size_t n = strlen(name);
    if (name[n - 1] == '.')
        name[n - 1] = '\0';
    json_t *msgs = ks_msgs_dns1123_subdomain(name);
    if (json_array_size(msgs) > 0) {
        char *all = ks_join(msgs, "", ",", "");
        invalid_one(causes, field, name, all);
        free(all);
    } else if (!strchr(name, '.')) {
        invalid_one(causes, field, name,
                    "should be a domain with at least two segments separated by dots");
    } else {
        char *save = NULL;
        for (char *label = strtok_r(name, ".", &save); label; label = strtok_r(NULL, ".", &save)) {
            json_t *lm = ks_msgs_dns1123_label(label);
            bool bad = json_array_size(lm) > 0;
            if (bad) {
                char *all = ks_join(lm, "", ",", "");
                invalid_one(causes, field, label, all);
                free(all);
            }
            json_decref(lm);
            if (bad)
                break;
        }
    }
    json_decref(msgs);
    free(name);
}

/* ---- defaults ---------------------------------------------------------------------- */

/* The members of an EndpointPort in Go's order (discovery/v1, core/v1), as
 * the apiserver writes a defaulted one. */
static const char *const slice_port_order[] = {"name", "protocol", "port", "appProtocol", NULL};
static const char *const port_order[] = {"name", "port", "protocol", "appProtocol", NULL};

/* Semantic.DeepEqual of two endpoints lists (nil and empty alike) */
static bool same_endpoints(const json_t *a, const json_t *b)
{
    if (json_array_size(a) == 0 && json_array_size(b) == 0)
        return true;
    return a && b && json_equal(a, b);
}

void ks_endpointslice_defaults(json_t *obj, const json_t *old)
{
    json_t *ports = json_object_get(obj, "ports");
    for (size_t i = 0; i < json_array_size(ports); i++) {
        json_t *p = item_obj(ports, i);
        if (!p)
            continue;
        /* discovery/v1 SetDefaults_EndpointPort */
        set_default(p, "name", json_string(""));
        set_default(p, "protocol", json_string("TCP"));
        ks_reorder(p, slice_port_order, NULL);
    }
    /* strategy.go dropTopologyOnV1 (kubesim serves v1 only) */
    json_t *eps = json_object_get(obj, "endpoints");
    if (old && same_endpoints(json_object_get(old, "endpoints"), eps))
        return;
    size_t i;
    json_t *ep;
    json_array_foreach(eps, i, ep)
    {
        if (json_is_object(ep))
            json_object_del(ep, "deprecatedTopology");
    }
}

void ks_endpoints_defaults(json_t *obj)
{
    size_t i;
    json_t *ss;
    json_array_foreach(json_object_get(obj, "subsets"), i, ss)
    {
        json_t *ports = json_object_get(ss, "ports");
        for (size_t k = 0; k < json_array_size(ports); k++) {
            json_t *p = item_obj(ports, k);
            /* core/v1 SetDefaults_Endpoints: Protocol == "" */
            if (p && !*ks_nz(str_member(p, "protocol"))) {
                json_object_set_new(p, "protocol", json_string("TCP"));
                ks_reorder(p, port_order, NULL);
            }
        }
    }
}

/* ---- EndpointSlice (pkg/apis/discovery/validation/validation.go) ------------------- */

/* validateHints */
static void validate_hints(const json_t *hints, const char *path, json_t *causes)
{
    const json_t *zones = json_object_get(hints, "forZones");
    size_t n = json_array_size(zones);
    char *f = ks_printf("%s.forZones", path);
    if (n > MAX_ZONE_HINTS) {
        too_many(causes, f, n, MAX_ZONE_HINTS);
        free(f);
        return;
    }
    json_t *seen = json_object();
    for (size_t i = 0; i < n; i++) {
        const char *name = ks_nz(str_member(json_array_get(zones, i), "name"));
        char *zf = ks_printf("%s[%zu].name", f, i);
        if (json_object_get(seen, name))
            ks_duplicate(causes, zf, name);
        else
            json_object_set_new(seen, name, json_true());
        ks_invalid_str(causes, zf, name, ks_msgs_label_value(name));
        free(zf);
    }
    json_decref(seen);
    free(f);
}

/* validateEndpoints: addresses of the slice's type, nodeName, hostname,
 * hints (deprecatedTopology: see the top) */
static void validate_slice_endpoints(const json_t *eps, const char *type, json_t *causes)
{
    size_t n = json_array_size(eps);
    if (n > MAX_ENDPOINTS) {
        too_many(causes, "endpoints", n, MAX_ENDPOINTS);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *ep = json_array_get(eps, i);
        const json_t *addrs = json_object_get(ep, "addresses");
        size_t na = json_array_size(addrs);
        char *f = ks_printf("endpoints[%zu].addresses", i);
        if (na == 0)
            ks_required(causes, f, "must contain at least 1 address");
        else if (na > MAX_ADDRESSES)
            too_many(causes, f, na, MAX_ADDRESSES);
        for (size_t j = 0; j < na; j++) {
            /* known types only; an unknown one is addressType's error */
            const char *a = ks_nz(json_string_value(json_array_get(addrs, j)));
            char *af = ks_printf("%s[%zu]", f, j);
            if (strcmp(type, "IPv4") == 0 || strcmp(type, "IPv6") == 0) {
                ip_family(causes, af, a, type[3] == '4');
                non_special_ip(causes, af, a);
            } else if (strcmp(type, "FQDN") == 0) {
                fqdn(causes, af, a);
            }
            free(af);
        }
        free(f);
        if (has(ep, "nodeName")) { /* apivalidation.ValidateNodeName */
            const char *nn = ks_nz(str_member(ep, "nodeName"));
            f = ks_printf("endpoints[%zu].nodeName", i);
            ks_invalid_str(causes, f, nn, ks_msgs_dns1123_subdomain(nn));
            free(f);
        }
        if (has(ep, "hostname")) { /* apivalidation.ValidateDNS1123Label */
            const char *h = ks_nz(str_member(ep, "hostname"));
            f = ks_printf("endpoints[%zu].hostname", i);
            ks_invalid_str(causes, f, h, ks_msgs_dns1123_label(h));
            free(f);
        }
        if (has(ep, "hints")) {
            f = ks_printf("endpoints[%zu].hints", i);
            validate_hints(json_object_get(ep, "hints"), f, causes);
            free(f);
        }
    }
}

/* validatePorts: name (a DNS label, unique, "" included), protocol,
 * appProtocol; the port number has no rule. */
static void validate_slice_ports(const json_t *ports, json_t *causes)
{
    size_t n = json_array_size(ports);
    if (n > MAX_PORTS) {
        too_many(causes, "ports", n, MAX_PORTS);
        return;
    }
    json_t *names = json_object();
    for (size_t i = 0; i < n; i++) {
        const json_t *p = json_array_get(ports, i);
        const char *name = ks_nz(str_member(p, "name"));
        char *f = ks_printf("ports[%zu].name", i);
        if (*name)
            ks_invalid_str(causes, f, name, ks_msgs_dns1123_label(name));
        if (json_object_get(names, name))
            ks_duplicate(causes, f, name);
        else
            json_object_set_new(names, name, json_true());
        free(f);
        f = ks_printf("ports[%zu].protocol", i);
        const char *proto = str_member(p, "protocol");
        if (!proto)
            ks_required(causes, f, NULL);
        else if (strcmp(proto, "TCP") != 0 && strcmp(proto, "UDP") != 0 &&
                 strcmp(proto, "SCTP") != 0)
            ks_not_supported(causes, f, proto, protocols);
        free(f);
        if (has(p, "appProtocol")) { /* apivalidation.ValidateQualifiedName */
            const char *ap = ks_nz(str_member(p, "appProtocol"));
            f = ks_printf("ports[%zu].appProtocol", i);
            ks_invalid_str(causes, f, ap, ks_msgs_qualified_name(ap));
            free(f);
        }
    }
    json_decref(names);
}

void ks_validate_endpointslice(const json_t *obj, const json_t *old, json_t *causes)
{
    /* ValidateEndpointSlice: validateAddressType */
    const char *type = ks_nz(str_member(obj, "addressType"));
    if (!*type)
        ks_required(causes, "addressType", NULL);
    else if (strcmp(type, "IPv4") != 0 && strcmp(type, "IPv6") != 0 && strcmp(type, "FQDN") != 0)
        ks_not_supported(causes, "addressType", type, "\"FQDN\", \"IPv4\", \"IPv6\"");
    validate_slice_endpoints(json_object_get(obj, "endpoints"), type, causes);
    validate_slice_ports(json_object_get(obj, "ports"), causes);
    /* ValidateEndpointSliceUpdate: apivalidation.ValidateImmutableField */
    if (old && strcmp(type, ks_nz(str_member(old, "addressType"))) != 0)
        invalid_one(causes, "addressType", type, "field is immutable");
}

/* ---- Endpoints (pkg/apis/core/validation/validation.go) ---------------------------- */

/* validateEndpointAddress */
static void validate_address(const json_t *addr, const char *path, json_t *causes)
{
    const char *ip = ks_nz(str_member(addr, "ip"));
    char *ipf = ks_printf("%s.ip", path);
    unsigned char buf[16];
    if (!ks_ip_parse(ip, buf)) /* validation.IsValidIP */
        invalid_one(causes, ipf, ip,
                    "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
    const char *host = ks_nz(str_member(addr, "hostname"));
    if (*host) {
        char *f = ks_printf("%s.hostname", path);
        ks_invalid_str(causes, f, host, ks_msgs_dns1123_label(host));
        free(f);
    }
    if (has(addr, "nodeName")) { /* ValidateNodeName */
        const char *nn = ks_nz(str_member(addr, "nodeName"));
        char *f = ks_printf("%s.nodeName", path);
        ks_invalid_str(causes, f, nn, ks_msgs_dns1123_subdomain(nn));
        free(f);
    }
    non_special_ip(causes, ipf, ip);
    free(ipf);
}

/* validateEndpointPort: a name when the subset has more than one port */
static void validate_port(const json_t *p, bool require_name, const char *path, json_t *causes)
{
    const char *name = ks_nz(str_member(p, "name"));
    char *f = ks_printf("%s.name", path);
    if (require_name && !*name)
        ks_required(causes, f, NULL);
    else if (*name)
        ks_invalid_str(causes, f, name, ks_msgs_dns1123_label(name));
    free(f);
    json_int_t port = json_integer_value(json_object_get(p, "port"));
    if (port < 1 || port > 65535) { /* validation.IsValidPortNum */
        f = ks_printf("%s.port", path);
        ks_invalid_int(causes, f, port, "must be between 1 and 65535, inclusive");
        free(f);
    }
    const char *proto = ks_nz(str_member(p, "protocol"));
    f = ks_printf("%s.protocol", path);
    if (!*proto)
        ks_required(causes, f, NULL);
    else if (strcmp(proto, "TCP") != 0 && strcmp(proto, "UDP") != 0 && strcmp(proto, "SCTP") != 0)
        ks_not_supported(causes, f, proto, protocols);
    free(f);
    if (has(p, "appProtocol")) { /* ValidateQualifiedName */
        const char *ap = ks_nz(str_member(p, "appProtocol"));
        f = ks_printf("%s.appProtocol", path);
        ks_invalid_str(causes, f, ap, ks_msgs_qualified_name(ap));
        free(f);
    }
}

/* ValidateEndpoints (ValidateEndpointsUpdate adds only ObjectMeta's update
 * rules): validateEndpointSubsets */
void ks_validate_endpoints(const json_t *obj, json_t *causes)
{
    const json_t *subsets = json_object_get(obj, "subsets");
    for (size_t i = 0; i < json_array_size(subsets); i++) {
        const json_t *ss = json_array_get(subsets, i);
        const json_t *ready = json_object_get(ss, "addresses");
        const json_t *not_ready = json_object_get(ss, "notReadyAddresses");
        const json_t *ports = json_object_get(ss, "ports");
        char *path = ks_printf("subsets[%zu]", i);
        if (json_array_size(ready) == 0 && json_array_size(not_ready) == 0)
            ks_required(causes, path, "must specify `addresses` or `notReadyAddresses`");
        for (size_t k = 0; k < json_array_size(ready); k++) {
            char *f = ks_printf("%s.addresses[%zu]", path, k);
            validate_address(json_array_get(ready, k), f, causes);
            free(f);
        }
        for (size_t k = 0; k < json_array_size(not_ready); k++) {
            char *f = ks_printf("%s.notReadyAddresses[%zu]", path, k);
            validate_address(json_array_get(not_ready, k), f, causes);
            free(f);
        }
        for (size_t k = 0; k < json_array_size(ports); k++) {
            char *f = ks_printf("%s.ports[%zu]", path, k);
            validate_port(json_array_get(ports, k), json_array_size(ports) > 1, f, causes);
            free(f);
        }
        free(path);
    }
}
