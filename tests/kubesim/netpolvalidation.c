/* SPDX-License-Identifier: Apache-2.0 */
/*
 * NetworkPolicy (networking.k8s.io/v1) as the apiserver's registry takes
 * it: the v1 defaults (pkg/apis/networking/v1/defaults.go) and the
 * validation of pkg/apis/networking/validation/validation.go in
 * Kubernetes 1.32, with its field paths and messages.
 *
 * DESIGN
 * A create runs ValidateNetworkPolicy. An update runs ValidateNetworkPolicy
 * and then ValidateNetworkPolicyUpdate (pkg/registry/networking/
 * networkpolicy/strategy.go, ValidateUpdate), and both validate the spec:
 * each error of an update's spec is among its 422's causes twice (the
 * message, field.ErrorList.ToAggregate, lists it once). Both take the
 * options of ValidationOptionsForNetworking: label values that are not
 * valid are allowed in every selector of an update whose OLD
 * spec.podSelector already fails the strict selector validation.
 * ObjectMeta (the name a DNS-1123 subdomain) is validation.c's.
 *
 * The enums (a port's protocol, policyTypes) are this file's: NotSupported
 * among the other errors, in the validation's order and with its supported
 * values in its order (kschema.c leaves them alone, validates_enums).
 *
 * CIDRs are parsed as k8s.io/utils/net ParseCIDRSloppy parses them (the
 * fork of Go 1.16's net.ParseCIDR), not with inet_pton, which refuses what
 * it accepts: IPv4 octets with leading zeros (read as decimal) and IPv6
 * groups with more than four digits when the extra ones are leading
 * zeros. The subset test is Go's IPNet.Contains and IPMask.Size, IPv4
 * addresses in IPv6 form included. 1.32's ValidateIPBlock checks each CIDR
 * with validation.IsValidCIDR; the stricter IsValidCIDRForLegacyField of
 * 1.33 (StrictIPCIDRValidation, the old object's CIDRs allowed as they
 * are) is not emulated.
 */
#include "kubesim.h"

#include <stdlib.h>
#include <string.h>

/* ---- defaults (pkg/apis/networking/v1/defaults.go) -------------------------------- */

static bool absent(const json_t *obj, const char *k)
{
    const json_t *v = json_object_get(obj, k);
    return !v || json_is_null(v);
}

/* SetDefaults_NetworkPolicyPort of each port of each rule in list (a null
 * rule or port decodes as the zero value). The protocol goes first, the
 * field order of NetworkPolicyPort. */
static void default_ports(json_t *rules)
{
    size_t i, j;
    json_t *rule, *port;
    json_array_foreach(rules, i, rule)
    {
        if (json_is_null(rule)) {
            rule = json_object();
            json_array_set_new(rules, i, rule);
        }
        json_t *ports = json_object_get(rule, "ports");
        json_array_foreach(ports, j, port)
        {
            if (json_is_null(port)) {
                port = json_object();
                json_array_set_new(ports, j, port);
            }
            if (!json_is_object(port) || !absent(port, "protocol"))
                continue;
            json_t *p = json_pack("{s:s}", "protocol", "TCP");
            const char *k;
            json_t *v;
            json_object_foreach(port, k, v)
            {
                if (strcmp(k, "protocol") != 0)
                    json_object_set(p, k, v);
            }
            json_array_set_new(ports, j, p);
        }
    }
}

void ks_netpol_defaults(json_t *obj)
{
    json_t *spec = ks_ensure_obj(obj, "spec");
    default_ports(json_object_get(spec, "ingress"));
    default_ports(json_object_get(spec, "egress"));
    /* SetDefaults_NetworkPolicy: no policyTypes means Ingress, and Egress
     * too when there are egress rules */
    if (json_array_size(json_object_get(spec, "policyTypes")) == 0) {
        json_t *types = json_pack("[s]", "Ingress");
        if (json_array_size(json_object_get(spec, "egress")) != 0)
            json_array_append_new(types, json_string("Egress"));
        json_object_set_new(spec, "policyTypes", types);
    }
}

/* ---- CIDRs (k8s.io/utils/net ParseCIDRSloppy; Go's net.IPNet) ---------------------- */

/* A net.IP (4 or 16 bytes) */
struct go_ip {
    unsigned char b[16];
    size_t len;
};

/* A net.IPNet and its prefix length (CIDRMask's ones, IPMask.Size) */
struct go_ipnet {
    struct go_ip ip;
    unsigned char mask[16];
    size_t mask_len;
    int ones;
};

/* ParseCIDR of the fork: the network (IP.Mask(CIDRMask(n, bits))). */
static bool parse_cidr_sloppy(const char *s, struct go_ipnet *ret)
{
    const char *slash = strchr(s, '/');
    if (!slash)
        return false;
    size_t alen = (size_t)(slash - s), mlen = strlen(slash + 1);
    struct go_ip ip = {.len = 16};
    int bits = 32;
    if (!ks_ip_parse_v4(s, alen, ip.b)) {
        bits = 128;
        if (!ks_ip_parse_v6(s, alen, ip.b))
            return false;
    }
    int n;
    size_t used;
    if (!ks_dtoi(slash + 1, mlen, &n, &used) || used != mlen || n > bits)
        return false;
    memset(ret, 0, sizeof(*ret));
    ret->mask_len = (size_t)bits / 8;
    ret->ones = n;
    for (int k = 0; k < n; k++)
        ret->mask[k / 8] |= (unsigned char)(0x80 >> (k % 8));
    /* IP.Mask: a 4-byte mask takes the IPv4 bytes of a 16-byte IPv4 address */
    const unsigned char *src = ip.b;
    if (ret->mask_len == 4)
        src += 12;
    ret->ip.len = ret->mask_len;
    for (size_t k = 0; k < ret->mask_len; k++)
        ret->ip.b[k] = src[k] & ret->mask[k];
    return true;
}

/* IP.To4: the 4-byte form of an IPv4 address (4 bytes, or 16 in IPv6 form). */
static bool to4(const struct go_ip *ip, struct go_ip *ret)
{
    if (ip->len == 4) {
        *ret = *ip;
        return true;
    }
    if (ip->len == 16 && ks_ip_is_v4(ip->b)) {
        memcpy(ret->b, ip->b + 12, 4);
        ret->len = 4;
        return true;
    }
    return false;
}

/* IPNet.Contains (with networkNumberAndMask) */
static bool ipnet_contains(const struct go_ipnet *n, const struct go_ip *addr)
{
    struct go_ip nn;
    unsigned char m[16];
    size_t mlen = n->mask_len;
    if (!to4(&n->ip, &nn)) {
        nn = n->ip;
        if (nn.len != 16)
            return false;
    }
    memcpy(m, n->mask, mlen);
    if (mlen == 4 && nn.len != 4)
        return false;
    if (mlen == 16 && nn.len == 4)
        memmove(m, m + 12, 4);
    struct go_ip ip = *addr, x;
    if (to4(addr, &x))
        ip = x;
    if (ip.len != nn.len)
        return false;
    for (size_t i = 0; i < ip.len; i++)
        if ((nn.b[i] & m[i]) != (ip.b[i] & m[i]))
            return false;
    return true;
}

/* ---- validation (pkg/apis/networking/validation/validation.go) ------------------- */

struct opts {
    bool allow_invalid_label_value; /* NetworkPolicyValidationOptions */
};

static const char *const cidr_msg = "must be a valid CIDR value, (e.g. 10.9.8.0/24 or "
                                    "2001:db8::/64)";
static const char *const port_range = "must be between 1 and 65535, inclusive";

/* validation.IsValidCIDR of s at field, and the network when it parses */
static bool valid_cidr(json_t *causes, const char *field, const char *s, struct go_ipnet *ret)
{
    if (parse_cidr_sloppy(s, ret))
        return true;
    ks_invalid_str(causes, field, s, json_pack("[s]", cidr_msg));
    return false;
}

/* ValidateIPBlock: cidr required and a CIDR; each except a CIDR strictly
 * inside it (an except that does not parse is reported, and the next one
 * checked). */
static void validate_ip_block(const json_t *ipb, const char *path, json_t *causes)
{
    const char *cidr = json_string_value(json_object_get(ipb, "cidr"));
    char *f = ks_printf("%s.cidr", path);
    struct go_ipnet net;
    bool ok = cidr && *cidr;
    if (!ok)
        ks_required(causes, f, "");
    else
        ok = valid_cidr(causes, f, cidr, &net);
    free(f);
    if (!ok)
        return;
    const json_t *except = json_object_get(ipb, "except");
    for (size_t i = 0; i < json_array_size(except); i++) {
        const char *e = json_string_value(json_array_get(except, i));
        e = e ? e : "";
        f = ks_printf("%s.except[%zu]", path, i);
        struct go_ipnet en;
        if (valid_cidr(causes, f, e, &en) && (!ipnet_contains(&net, &en.ip) || net.ones >= en.ones))
            ks_invalid_str(causes, f, e, json_pack("[s]", "must be a strict subset of `cidr`"));
        free(f);
    }
}

/* ValidateNetworkPolicyPeer: the selectors and the ipBlock set, exactly
 * one kind of peer when it is an ipBlock, at least one. */
static void validate_peer(const json_t *peer, const char *path, const struct opts *o,
                          json_t *causes)
{
    int peers = 0;
    static const char *const selectors[] = {"podSelector", "namespaceSelector"};
    for (size_t k = 0; k < 2; k++) {
        const json_t *sel = json_object_get(peer, selectors[k]);
        if (!json_is_object(sel))
            continue;
        peers++;
        char *f = ks_printf("%s.%s", path, selectors[k]);
        ks_validate_label_selector_opts(sel, f, o->allow_invalid_label_value, causes);
        free(f);
    }
    const json_t *ipb = json_object_get(peer, "ipBlock");
    if (json_is_object(ipb)) {
        peers++;
        char *f = ks_printf("%s.ipBlock", path);
        validate_ip_block(ipb, f, causes);
        free(f);
    }
    if (peers == 0)
        ks_required(causes, path, "must specify a peer");
    else if (peers > 1 && json_is_object(ipb))
        ks_cause(causes, "FieldValueForbidden", path,
                 "Forbidden: may not specify both ipBlock and another peer");
}

/* ValidateNetworkPolicyPort: the protocol; a numeric port in range, and an
 * endPort only after a numeric port, not below it and in range; a named
 * port a valid port name. */
static void validate_port(const json_t *port, const char *path, json_t *causes)
{
    const json_t *proto = json_object_get(port, "protocol");
    if (proto && !json_is_null(proto)) {
        const char *p = json_is_string(proto) ? json_string_value(proto) : "";
        if (strcmp(p, "TCP") != 0 && strcmp(p, "UDP") != 0 && strcmp(p, "SCTP") != 0) {
            char *f = ks_printf("%s.protocol", path);
            ks_not_supported(causes, f, p, "\"TCP\", \"UDP\", \"SCTP\"");
            free(f);
        }
    }
    const json_t *pv = json_object_get(port, "port");
    const json_t *ev = json_object_get(port, "endPort");
    bool has_end = json_is_integer(ev);
    json_int_t end = json_integer_value(ev);
    char *pf = ks_printf("%s.port", path), *ef = ks_printf("%s.endPort", path);
    if (json_is_integer(pv)) {
        json_int_t n = json_integer_value(pv);
        if (n < 1 || n > 65535)
            ks_invalid_int(causes, pf, n, port_range);
        if (has_end && end < n)
            ks_invalid_int(causes, ef, end, "must be greater than or equal to `port`");
        if (has_end && (end < 1 || end > 65535))
            ks_invalid_int(causes, ef, end, port_range);
    } else if (json_is_string(pv)) {
        if (has_end)
            ks_invalid_int(causes, ef, end, "may not be specified when `port` is non-numeric");
        ks_invalid_str(causes, pf, json_string_value(pv), ks_msgs_port_name(json_string_value(pv)));
    } else if (has_end) {
        ks_invalid_int(causes, ef, end, "may not be specified when `port` is not specified");
    }
    free(pf);
    free(ef);
}

/* The ports and the peers (from or to) of each rule of spec.ingress or
 * spec.egress. */
static void validate_rules(const json_t *spec, const char *which, const char *peers_key,
                           const struct opts *o, json_t *causes)
{
    const json_t *rules = json_object_get(spec, which);
    for (size_t i = 0; i < json_array_size(rules); i++) {
        const json_t *rule = json_array_get(rules, i);
        const json_t *ports = json_object_get(rule, "ports");
        for (size_t j = 0; j < json_array_size(ports); j++) {
            char *f = ks_printf("spec.%s[%zu].ports[%zu]", which, i, j);
            validate_port(json_array_get(ports, j), f, causes);
            free(f);
        }
        const json_t *peers = json_object_get(rule, peers_key);
        for (size_t j = 0; j < json_array_size(peers); j++) {
            char *f = ks_printf("spec.%s[%zu].%s[%zu]", which, i, peers_key, j);
            validate_peer(json_array_get(peers, j), f, o, causes);
            free(f);
        }
    }
}

/* ValidateNetworkPolicySpec */
static void validate_spec(const json_t *spec, const struct opts *o, json_t *causes)
{
    ks_validate_label_selector_opts(json_object_get(spec, "podSelector"), "spec.podSelector",
                                    o->allow_invalid_label_value, causes);
    validate_rules(spec, "ingress", "from", o, causes);
    validate_rules(spec, "egress", "to", o, causes);
    const json_t *types = json_object_get(spec, "policyTypes");
    if (json_array_size(types) > 2) {
        /* &spec.PolicyTypes, dereferenced by ErrorBody and printed with %#v */
        char *v = ks_go_strings(types, "[]networking.PolicyType");
        ks_cause(causes, "FieldValueInvalid", "spec.policyTypes",
                 "Invalid value: %s: may not specify more than two policyTypes", v);
        free(v);
        return;
    }
    for (size_t i = 0; i < json_array_size(types); i++) {
        const char *t = json_string_value(json_array_get(types, i));
        t = t ? t : "";
        if (strcmp(t, "Ingress") == 0 || strcmp(t, "Egress") == 0)
            continue;
        char *f = ks_printf("spec.policyTypes[%zu]", i);
        ks_not_supported(causes, f, t, "\"Ingress\", \"Egress\"");
        free(f);
    }
}

/* ValidationOptionsForNetworking: an old spec.podSelector with any error
 * of the strict validation allows invalid label values. */
static bool old_invalid_pod_selector(const json_t *old)
{
    json_t *errs = json_array();
    ks_validate_label_selector_opts(json_object_get(json_object_get(old, "spec"), "podSelector"),
                                    "", false, errs);
    bool invalid = json_array_size(errs) > 0;
    json_decref(errs);
    return invalid;
}

void ks_validate_netpol(const json_t *obj, const json_t *old, json_t *causes)
{
    struct opts o = {.allow_invalid_label_value = old && old_invalid_pod_selector(old)};
    const json_t *spec = json_object_get(obj, "spec");
    /* ValidateNetworkPolicy (its ObjectMeta is validation.c's) */
    validate_spec(spec, &o, causes);
    /* ValidateNetworkPolicyUpdate: ObjectMetaUpdate and the spec again */
    if (old)
        validate_spec(spec, &o, causes);
}
