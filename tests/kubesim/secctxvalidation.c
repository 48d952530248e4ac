/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The securityContext rules of ValidatePodSpec (pkg/apis/core/validation,
 * Kubernetes v1.32), with upstream's field paths, texts and order:
 * validatePodSpecSecurityContext (the pod's user and group IDs, sysctls,
 * fsGroupChangePolicy, seccomp, Windows and AppArmor options),
 * ValidateSecurityContext (each container's, last in
 * validateContainerCommon), validateWindowsHostProcessPod and, for a spec
 * with os, validateOS and validateLinux or validateWindows. podvalidation.c
 * calls them at upstream's positions.
 *
 * DESIGN
 * The spec is the defaulted v1 object; the internal type keeps hostNetwork,
 * hostPID, hostIPC, shareProcessNamespace and hostUsers in its
 * PodSecurityContext, which is why upstream names the shareProcessNamespace
 * error spec.securityContext.shareProcessNamespace while v1 has the field
 * at spec. Paths here are upstream's, not the v1 member's.
 *
 * Feature gates are 1.32's defaults. The Pod and the template strategies
 * (podutil.dropDisabledFields) run before validation and drop what a gate
 * that is off guards, so none of it is an error:
 *  - UserNamespacesSupport (beta, off): spec.hostUsers is dropped, so
 *    validateHostUsers never fires and hostUsers is true for procMount;
 *  - SupplementalGroupsPolicy (alpha): securityContext.supplementalGroupsPolicy
 *    is dropped;
 *  - SELinuxChangePolicy (alpha): securityContext.seLinuxChangePolicy is
 *    dropped;
 *  - ProcMountType (beta, off): a container's procMount, when set, becomes
 *    "Default" (dropDisabledProcMountField), whatever was sent.
 * The "in use by the old object" exceptions never apply: what kubesim
 * stores has been through the same drop. AppArmor fields are GA.
 *
 * The apiserver is taken to run with --allow-privileged=true (kubeadm and
 * kind set it), so capabilities.Get().AllowPrivileged never refuses a
 * privileged container or a hostProcess pod.
 *
 * Go's %#v of a pointer prints its address; the messages that print a
 * core.SecurityContext or core.SeccompProfile value show the address of
 * the JSON member instead, as arbitrary as the apiserver's.
 *
 * Not modelled: a Pod's seccomp and AppArmor annotations (their checks in
 * ValidatePodSpecificAnnotations and ValidatePodCreate, and the Pod
 * strategy's applyAppArmorVersionSkew, which copies the AppArmor fields to
 * annotations), and ephemeral containers.
 */
#include "podfields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define cause ks_cause

/* upstream's lists of supported values, in the order its NotSupported
 * prints them (a sets.List is sorted, a literal slice is not) */
static const char *const seccomp_types[] = {"Localhost", "RuntimeDefault", "Unconfined", NULL};
static const char *const apparmor_types[] = {"Localhost", "RuntimeDefault", "Unconfined", NULL};
static const char *const proc_mount_types[] = {"Default", "Unmasked", NULL};
static const char *const fs_group_change_policies[] = {"Always", "OnRootMismatch", NULL};
static const char *const os_names[] = {"linux", "windows", NULL};

/* validation.InclusiveRangeError(0, math.MaxInt32) of IsValidUserID and IsValidGroupID */
static const char *const id_range = "must be between 0 and 2147483647, inclusive";
static const char *const windows_msg = "cannot be set for a windows pod";
static const char *const linux_msg = "windows options cannot be set for a linux pod";

/* ---- helpers -------------------------------------------------------------------- */

/* IsValidUserID / IsValidGroupID (both 0..MaxInt32) of an int64 member, when set. */
static void id_member(const json_t *obj, const char *k, const char *field, json_t *causes)
{
    const json_t *v = json_object_get(obj, k);
    if (json_is_integer(v) && (json_integer_value(v) < 0 || json_integer_value(v) > 2147483647))
        ks_invalid_int(causes, field, json_integer_value(v), id_range);
}

/* Go's %#v of a pointer member: (*T)(nil) or (*T)(0x...). malloc'd */
static char *go_ptr(const json_t *obj, const char *k, const char *type)
{
    const json_t *v = json_object_get(obj, k);
    if (!v || json_is_null(v))
        return ks_printf("(%s)(nil)", type);
    return ks_printf("(%s)(%p)", type, (const void *)v);
}

/* Go's %#v of a core.SecurityContext (the internal type's field order). malloc'd */
static char *go_security_context(const json_t *sc)
{
    static const struct {
        const char *go, *type, *json;
    } fields[] = {
        {"Capabilities", "*core.Capabilities", "capabilities"},
        {"Privileged", "*bool", "privileged"},
        {"SELinuxOptions", "*core.SELinuxOptions", "seLinuxOptions"},
        {"WindowsOptions", "*core.WindowsSecurityContextOptions", "windowsOptions"},
        {"RunAsUser", "*int64", "runAsUser"},
        {"RunAsGroup", "*int64", "runAsGroup"},
        {"RunAsNonRoot", "*bool", "runAsNonRoot"},
        {"ReadOnlyRootFilesystem", "*bool", "readOnlyRootFilesystem"},
        {"AllowPrivilegeEscalation", "*bool", "allowPrivilegeEscalation"},
        {"ProcMount", "*core.ProcMountType", "procMount"},
        {"SeccompProfile", "*core.SeccompProfile", "seccompProfile"},
        {"AppArmorProfile", "*core.AppArmorProfile", "appArmorProfile"},
    };
    char *s = ks_strdup("core.SecurityContext{");
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        char *p = go_ptr(sc, fields[i].json, fields[i].type);
        char *n = ks_printf("%s%s%s:%s", s, i ? ", " : "", fields[i].go, p);
        free(p);
        free(s);
        s = n;
    }
    char *n = ks_printf("%s}", s);
    free(s);
    return n;
}

/* Go's %#v of a core.SeccompProfile. malloc'd */
static char *go_seccomp_profile(const json_t *sp)
{
    const char *t = str_at(sp, "type");
    char *q = ks_go_quote(t ? t : "");
    char *p = go_ptr(sp, "localhostProfile", "*string");
    char *s = ks_printf("core.SeccompProfile{Type:%s, LocalhostProfile:%s}", q, p);
    free(q);
    free(p);
    return s;
}

/* The rune at s (UTF-8; an invalid byte is one rune of its own, as Go
 * reads it), its length in *ret_len. */
static unsigned long rune_at(const unsigned char *s, size_t *ret_len)
{
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 0;
    if (n == 0) {
        *ret_len = 1;
        return 0xfffd;
    }
    unsigned long r = n == 1 ? s[0] : (unsigned long)(s[0] & (0x7f >> n));
    for (size_t i = 1; i < n; i++) {
        if ((s[i] & 0xc0) != 0x80) {
            *ret_len = 1;
            return 0xfffd;
        }
        r = (r << 6) | (s[i] & 0x3f);
    }
    *ret_len = n;
    return r;
}

/* unicode.IsSpace */
static bool go_space(unsigned long r)
{
    return (r >= '\t' && r <= '\r') || r == ' ' || r == 0x85 || r == 0xa0 || r == 0x1680 ||
           (r >= 0x2000 && r <= 0x200a) || r == 0x2028 || r == 0x2029 || r == 0x202f ||
           r == 0x205f || r == 0x3000;
}

/* strings.TrimSpace(s) != s */
static bool padded(const char *s)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t n = strlen(s), len, last = 0;
    if (n == 0)
        return false;
    if (go_space(rune_at(u, &len)))
        return true;
    for (size_t i = 0; i < n; i += len) {
        last = i;
        rune_at(u + i, &len);
    }
    return go_space(rune_at(u + last, &len));
}

/* ---- seccomp, AppArmor, Windows options ----------------------------------------- */

/* validateSeccompProfileField (validateSeccompProfileType first) */
static void seccomp_profile(const json_t *sp, const char *path, json_t *causes)
{
    if (!json_is_object(sp))
        return;
    char f[FLD];
    const char *t = str_at(sp, "type");
    t = t ? t : "";
    fld(f, "%s.type", path);
    if (!*t)
        ks_required(causes, f, "type is required when seccompProfile is set");
    else if (!in_list(t, seccomp_types))
        ks_not_supported_list(causes, f, t, seccomp_types);
    fld(f, "%s.localhostProfile", path);
    const char *lp = str_at(sp, "localhostProfile");
    if (strcmp(t, "Localhost") == 0) {
        if (!lp)
            ks_required(causes, f, "must be set when seccomp type is Localhost");
        else
            ks_validate_local_descending_path(lp, f, causes);
    } else if (lp) {
        char *g = go_seccomp_profile(sp);
        cause(causes, "FieldValueInvalid", f,
              "Invalid value: %s: can only be set when seccomp type is Localhost", g);
        free(g);
    }
}

/* ValidateAppArmorProfileField */
static void apparmor_profile(const json_t *ap, const char *path, json_t *causes)
{
    if (!json_is_object(ap))
        return;
    static const char *const must = "must be set when AppArmor type is Localhost";
    char f[FLD];
    const char *t = str_at(ap, "type");
    t = t ? t : "";
    const char *lp = str_at(ap, "localhostProfile");
    fld(f, "%s.localhostProfile", path);
    if (strcmp(t, "Localhost") == 0) {
        if (!lp) {
            ks_required(causes, f, must);
            return;
        }
        if (padded(lp))
            invalid(causes, f, lp, "must not be padded with whitespace");
        else if (!*lp)
            ks_required(causes, f, must);
        if (strlen(lp) > 4095) /* PATH_MAX - 1; field.TooLong prints no value */
            cause(causes, "FieldValueTooLong", f, "Too long: may not be more than 4095 bytes");
    } else if (strcmp(t, "RuntimeDefault") == 0 || strcmp(t, "Unconfined") == 0) {
        if (lp)
            invalid(causes, f, lp, "can only be set when AppArmor type is Localhost");
    } else if (!*t) {
        ks_required(causes, fld(f, "%s.type", path),
                    "type is required when appArmorProfile is set");
    } else {
        ks_not_supported_list(causes, fld(f, "%s.type", path), t, apparmor_types);
    }
}

/* validNetBiosRegex: ^[^\\/:*?"<>|.][^\\/:*?"<>|]{0,14}$ (runes) */
static bool netbios_domain(const char *d)
{
    static const char *const bad = "\\/:*?\"<>|";
    const unsigned char *u = (const unsigned char *)d;
    size_t runes = 0, len;
    if (!*d || *d == '.')
        return false;
    for (size_t i = 0; u[i]; i += len) {
        unsigned long r = rune_at(u + i, &len);
        if (r < 0x80 && strchr(bad, (int)r))
            return false;
        runes++;
    }
    return runes <= 15;
}

/* validWindowsUserDomainDNSRegex: labels of 1-63 [a-zA-Z0-9-], no dash at
 * either end, joined by dots */
static bool dns_domain(const char *d)
{
    size_t n = strlen(d);
    for (size_t start = 0; start <= n;) {
        size_t len = strcspn(d + start, ".");
        const char *l = d + start;
        if (len == 0 || len > 63 || l[0] == '-' || l[len - 1] == '-')
            return false;
        for (size_t i = 0; i < len; i++) {
            char c = l[i];
            if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  c == '-'))
                return false;
        }
        start += len + 1;
    }
    return true;
}

/* The runAsUserName checks after its length and control characters. */
static void run_as_user_name(const char *name, const char *field, json_t *causes)
{
    const char *bs = strchr(name, '\\');
    if (bs && strchr(bs + 1, '\\')) {
        invalid(causes, field, name, "runAsUserName cannot contain more than one backslash");
        return;
    }
    char *domain = ks_printf("%.*s", bs ? (int)(bs - name) : 0, name);
    const char *user = bs ? bs + 1 : name;
    if (strlen(domain) >= 256)
        invalid(causes, field, name, "runAsUserName's Domain length must be under 256 characters");
    if (bs && !netbios_domain(domain) && !dns_domain(domain))
        invalid(causes, field, name,
                "runAsUserName's Domain doesn't match the NetBios nor the DNS format");
    free(domain);
    size_t ul = strlen(user);
    if (ul == 0)
        invalid(causes, field, name, "runAsUserName's User cannot be empty");
    else if (ul > 104)
        invalid(causes, field, name,
                "runAsUserName's User length must not be longer than 104 characters");
    if (ul > 0 && strspn(user, ". ") == ul)
        invalid(causes, field, name, "runAsUserName's User cannot contain only periods or spaces");
    if (strpbrk(user, "\"/\\:;|=,+*?<>@[]"))
        invalid(causes, field, name,
                "runAsUserName's User cannot contain the following characters: "
                "\"/\\:;|=,+*?<>@[]");
}

/* validateWindowsSecurityContextOptions */
static void windows_options(const json_t *wo, const char *path, json_t *causes)
{
    if (!json_is_object(wo))
        return;
    char f[FLD];
    const char *s = str_at(wo, "gmsaCredentialSpecName");
    if (s)
        ks_invalid_str(causes, fld(f, "%s.gmsaCredentialSpecName", path), s,
                       ks_msgs_dns1123_subdomain(s));
    s = str_at(wo, "gmsaCredentialSpec");
    fld(f, "%s.gmsaCredentialSpec", path);
    if (s && !*s)
        invalid(causes, f, s, "gmsaCredentialSpec cannot be an empty string");
    else if (s && strlen(s) > 64 * 1024)
        invalid(causes, f, s, "gmsaCredentialSpec size must be under 64 KiB");
    s = str_at(wo, "runAsUserName");
    if (!s)
        return;
    fld(f, "%s.runAsUserName", path);
    bool ctrl = false;
    for (const unsigned char *c = (const unsigned char *)s; *c && !ctrl; c++)
        ctrl = *c < 0x20 || *c == 0x7f; /* [[:cntrl:]] */
    if (!*s)
        invalid(causes, f, s, "runAsUserName cannot be an empty string");
    else if (ctrl)
        invalid(causes, f, s, "runAsUserName cannot contain control characters");
    else
        run_as_user_name(s, f, causes);
}

/* ---- sysctls ------------------------------------------------------------------------ */

/* IsValidSysctlName: at most 253 characters matching
 * ^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$ */
static bool valid_sysctl_name(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 253)
        return false;
    for (size_t start = 0; start <= n;) {
        size_t len = strcspn(s + start, "./");
        const char *seg = s + start;
        if (len == 0)
            return false;
        for (size_t i = 0; i < len; i++) {
            char c = seg[i];
            bool alnum = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
            bool inner = i > 0 && i < len - 1 && (c == '-' || c == '_');
            if (!alnum && !inner)
                return false;
        }
        start += len + 1;
    }
    return true;
}

enum sysctl_ns { NS_UNKNOWN, NS_NET, NS_IPC };

/* component-helpers/node/util/sysctl GetNamespace: NormalizeName (a name
 * whose first separator is '/' has '.' and '/' swapped), cut at the first
 * '*', then the known IPC names and the "net" and "fs.mqueue" prefixes */
static enum sysctl_ns sysctl_namespace(const char *name)
{
    static const char *const ipc[] = {
        "kernel.sem", "kernel.shmall", "kernel.shmmax", "kernel.shmmni", "kernel.shm_rmid_forced",
        "kernel.shm", "kernel.msgmax", "kernel.msgmnb", "kernel.msgmni", "kernel.msg",
        NULL};
    char *n = ks_strdup(name);
    size_t sep = strcspn(n, "./");
    if (n[sep] == '/')
        for (char *c = n; *c; c++)
            *c = *c == '.' ? '/' : *c == '/' ? '.' : *c;
    char *star = strchr(n, '*');
    if (star)
        *star = '\0';
    enum sysctl_ns ns = NS_UNKNOWN;
    if (in_list(n, ipc))
        ns = NS_IPC;
    else if (strncmp(n, "net.", 4) == 0)
        ns = NS_NET;
    else if (strncmp(n, "fs.mqueue.", 10) == 0)
        ns = NS_IPC;
    free(n);
    return ns;
}

/* validateSysctls, with ValidateHostSysctl (a create's options never allow
 * a namespaced sysctl with the host's network or IPC namespace) */
static void sysctls(const json_t *spec, const json_t *list, const char *path, json_t *causes)
{
    static const char *const name_msg =
        "must have at most 253 characters and match regex "
        "^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[\\./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$";
    char f[FLD];
    bool host_net = json_is_true(json_object_get(spec, "hostNetwork"));
    bool host_ipc = json_is_true(json_object_get(spec, "hostIPC"));
    json_t *names = json_object();
    size_t i;
    json_t *s;
    json_array_foreach(list, i, s)
    {
        const char *name = str_at(s, "name");
        name = name ? name : "";
        fld(f, "%s[%zu].name", path, i);
        if (!*name)
            ks_required(causes, f, NULL);
        else if (!valid_sysctl_name(name))
            invalid(causes, f, name, name_msg);
        else if (json_object_get(names, name))
            ks_duplicate(causes, f, name);
        enum sysctl_ns ns = sysctl_namespace(name);
        if (host_net && ns == NS_NET)
            invalid(causes, f, name, "may not be specified when 'hostNetwork' is true");
        else if (host_ipc && ns == NS_IPC)
            invalid(causes, f, name, "may not be specified when 'hostIPC' is true");
        json_object_set_new(names, name, json_true());
    }
    json_decref(names);
}

/* ---- the pod's and the containers' security contexts -------------------------------- */

void ks_validate_pod_security_context(const json_t *spec, const char *path, json_t *causes)
{
    const json_t *sc = json_object_get(spec, "securityContext");
    if (!json_is_object(sc))
        return;
    char p[FLD], f[FLD];
    fld(p, "%s.securityContext", path);
    id_member(sc, "fsGroup", fld(f, "%s.fsGroup", p), causes);
    id_member(sc, "runAsUser", fld(f, "%s.runAsUser", p), causes);
    id_member(sc, "runAsGroup", fld(f, "%s.runAsGroup", p), causes);
    size_t i;
    json_t *g;
    json_array_foreach(json_object_get(sc, "supplementalGroups"), i, g)
    {
        if (json_is_integer(g) && (json_integer_value(g) < 0 || json_integer_value(g) > 2147483647))
            ks_invalid_int(causes, fld(f, "%s.supplementalGroups[%zu]", p, i),
                           json_integer_value(g), id_range);
    }
    if (json_is_true(json_object_get(spec, "shareProcessNamespace")) &&
        json_is_true(json_object_get(spec, "hostPID")))
        cause(causes, "FieldValueInvalid", fld(f, "%s.shareProcessNamespace", p),
              "Invalid value: true: ShareProcessNamespace and HostPID cannot both be enabled");
    const json_t *list = json_object_get(sc, "sysctls");
    if (json_array_size(list))
        sysctls(spec, list, fld(f, "%s.sysctls", p), causes);
    const char *fcp = str_at(sc, "fsGroupChangePolicy");
    if (fcp && !in_list(fcp, fs_group_change_policies)) /* a sets.Has: "" is not supported */
        ks_not_supported_list(causes, fld(f, "%s.fsGroupChangePolicy", p), fcp,
                              fs_group_change_policies);
    seccomp_profile(json_object_get(sc, "seccompProfile"), fld(f, "%s.seccompProfile", p), causes);
    windows_options(json_object_get(sc, "windowsOptions"), fld(f, "%s.windowsOptions", p), causes);
    apparmor_profile(json_object_get(sc, "appArmorProfile"), fld(f, "%s.appArmorProfile", p),
                     causes);
    /* supplementalGroupsPolicy and seLinuxChangePolicy: dropped (see DESIGN) */
}

void ks_validate_security_context(const json_t *sc, const char *path, bool host_users,
                                  json_t *causes)
{
    if (!json_is_object(sc))
        return;
    char f[FLD];
    /* privileged: allowed by the cluster's policy (see DESIGN) */
    id_member(sc, "runAsUser", fld(f, "%s.runAsUser", path), causes);
    id_member(sc, "runAsGroup", fld(f, "%s.runAsGroup", path), causes);
    const char *pm = str_at(sc, "procMount");
    if (pm) { /* "Default" once dropped (see DESIGN) */
        fld(f, "%s.procMount", path);
        if (!in_list(pm, proc_mount_types)) /* ValidateProcMountType */
            ks_not_supported_list(causes, f, pm, proc_mount_types);
        if (host_users && strcmp(pm, "Unmasked") == 0)
            invalid(causes, f, pm, "`hostUsers` must be false to use `Unmasked`");
    }
    seccomp_profile(json_object_get(sc, "seccompProfile"), fld(f, "%s.seccompProfile", path),
                    causes);
    if (json_is_false(json_object_get(sc, "allowPrivilegeEscalation"))) {
        char *g = NULL;
        if (json_is_true(json_object_get(sc, "privileged"))) {
            g = go_security_context(sc);
            cause(causes, "FieldValueInvalid", path,
                  "Invalid value: %s: cannot set `allowPrivilegeEscalation` to false and "
                  "`privileged` to true",
                  g);
        }
        size_t i;
        json_t *cap;
        json_array_foreach(json_object_get(json_object_get(sc, "capabilities"), "add"), i, cap)
        {
            const char *c = json_string_value(cap);
            if (!c || strcmp(c, "CAP_SYS_ADMIN") != 0)
                continue;
            if (!g)
                g = go_security_context(sc);
            cause(causes, "FieldValueInvalid", path,
                  "Invalid value: %s: cannot set `allowPrivilegeEscalation` to false and "
                  "`capabilities.Add` CAP_SYS_ADMIN",
                  g);
        }
        free(g);
    }
    windows_options(json_object_get(sc, "windowsOptions"), fld(f, "%s.windowsOptions", path),
                    causes);
    apparmor_profile(json_object_get(sc, "appArmorProfile"), fld(f, "%s.appArmorProfile", path),
                     causes);
}

/* ---- Windows host process pods, the pod's OS ------------------------------------------ */

/* A container's securityContext.windowsOptions.hostProcess: -1 unset, else 0 or 1. */
static int host_process(const json_t *owner)
{
    const json_t *hp = json_object_get(
        json_object_get(json_object_get(owner, "securityContext"), "windowsOptions"),
        "hostProcess");
    return json_is_boolean(hp) ? json_is_true(hp) : -1;
}

/* podshelper.VisitContainersWithPath: the init containers, then the
 * containers (ephemeral containers are not modelled) */
static const char *const container_lists[] = {"initContainers", "containers"};

void ks_validate_windows_host_process(const json_t *spec, const char *path, json_t *causes)
{
    char f[FLD];
    int pod = host_process(spec);
    size_t count = 0, hp_count = 0;
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, container_lists[l]), i, c)
        {
            count++;
            int ctr = host_process(c);
            if (pod >= 0 && ctr >= 0 && pod != ctr)
                cause(causes, "FieldValueInvalid",
                      fld(f, "%s.%s[%zu].securityContext.windowsOptions.hostProcess", path,
                          container_lists[l], i),
                      "Invalid value: %s: pod hostProcess value must be identical if both are "
                      "specified, was %s",
                      ctr ? "true" : "false", pod ? "true" : "false");
            if (ctr == 1 || (ctr < 0 && pod == 1))
                hp_count++;
        }
    }
    if (hp_count == 0)
        return;
    if (hp_count != count)
        invalid(causes, path, "",
                "If pod contains any hostProcess containers then all containers must be "
                "HostProcess containers");
    if (!json_is_true(json_object_get(spec, "hostNetwork")))
        cause(causes, "FieldValueInvalid", fld(f, "%s.hostNetwork", path),
              "Invalid value: false: hostNetwork must be true if pod contains any hostProcess "
              "containers");
    /* hostProcess containers allowed by the cluster's policy (see DESIGN) */
}

/* validateLinux */
static void linux_pod(const json_t *spec, const char *path, json_t *causes)
{
    char f[FLD];
    if (has(json_object_get(spec, "securityContext"), "windowsOptions"))
        forbidden(causes, fld(f, "%s.securityContext.windowsOptions", path), linux_msg);
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, container_lists[l]), i, c)
        {
            if (has(json_object_get(c, "securityContext"), "windowsOptions"))
                forbidden(causes,
                          fld(f, "%s.%s[%zu].securityContext.windowsOptions", path,
                              container_lists[l], i),
                          linux_msg);
        }
    }
}

/* validateWindows (hostUsers, supplementalGroupsPolicy and
 * seLinuxChangePolicy are dropped before, see DESIGN) */
static void windows_pod(const json_t *spec, const char *path, json_t *causes)
{
    /* the pod's: a securityContext member, or (v1) a spec member */
    static const struct {
        const char *name;
        bool spec_member;
    } pod_fields[] = {
        {"appArmorProfile", false},
        {"seLinuxOptions", false},
        {"hostPID", true},
        {"hostIPC", true},
        {"seccompProfile", false},
        {"fsGroup", false},
        {"fsGroupChangePolicy", false},
        {"sysctls", false},
        {"shareProcessNamespace", true},
        {"runAsUser", false},
        {"runAsGroup", false},
        {"supplementalGroups", false},
    };
    static const char *const ctr_fields[] = {
        "appArmorProfile",
        "seLinuxOptions",
        "seccompProfile",
        "capabilities",
        "readOnlyRootFilesystem",
        "privileged",
        "allowPrivilegeEscalation",
        "procMount",
        "runAsUser",
        "runAsGroup",
    };
    char f[FLD];
    const json_t *sc = json_object_get(spec, "securityContext");
    for (size_t k = 0; k < sizeof(pod_fields) / sizeof(pod_fields[0]); k++) {
        const char *n = pod_fields[k].name;
        bool set;
        if (strcmp(n, "hostPID") == 0 || strcmp(n, "hostIPC") == 0)
            set = json_is_true(json_object_get(spec, n)); /* bools of the internal type */
        else if (strcmp(n, "sysctls") == 0)
            set = json_array_size(json_object_get(sc, n)) > 0;
        else
            set = has(pod_fields[k].spec_member ? spec : sc, n);
        if (set)
            forbidden(causes,
                      pod_fields[k].spec_member ? fld(f, "%s.%s", path, n)
                                                : fld(f, "%s.securityContext.%s", path, n),
                      windows_msg);
    }
    for (size_t l = 0; l < 2; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, container_lists[l]), i, c)
        {
            const json_t *csc = json_object_get(c, "securityContext");
            if (!json_is_object(csc))
                continue;
            for (size_t k = 0; k < sizeof(ctr_fields) / sizeof(ctr_fields[0]); k++)
                if (has(csc, ctr_fields[k]))
                    forbidden(causes,
                              fld(f, "%s.%s[%zu].securityContext.%s", path, container_lists[l], i,
                                  ctr_fields[k]),
                              windows_msg);
        }
    }
}

void ks_validate_pod_os(const json_t *spec, const char *path, json_t *causes)
{
    const json_t *os = json_object_get(spec, "os");
    if (!json_is_object(os))
        return;
    char f[FLD];
    const char *name = str_at(os, "name");
    if (!name || !*name) {
        ks_required(causes, fld(f, "%s.os.name", path), "cannot be empty");
        return;
    }
    if (!in_list(name, os_names)) {
        ks_not_supported_list(causes, fld(f, "%s.os", path), name, os_names);
        return;
    }
    if (strcmp(name, "linux") == 0)
        linux_pod(spec, path, causes);
    else
        windows_pod(spec, path, causes);
}

/* ---- the strategies' drop of disabled fields ------------------------------------------ */

void ks_drop_disabled_pod_fields(json_t *spec)
{
    if (!json_is_object(spec))
        return;
    json_object_del(spec, "hostUsers");
    json_t *sc = json_object_get(spec, "securityContext");
    if (json_is_object(sc)) {
        json_object_del(sc, "supplementalGroupsPolicy");
        json_object_del(sc, "seLinuxChangePolicy");
    }
    static const char *const lists[] = {"initContainers", "containers", "ephemeralContainers"};
    for (size_t l = 0; l < 3; l++) {
        size_t i;
        json_t *c;
        json_array_foreach(json_object_get(spec, lists[l]), i, c)
        {
            json_t *csc = json_object_get(c, "securityContext");
            if (has(csc, "procMount"))
                json_object_set_new(csc, "procMount", json_string("Default"));
        }
    }
}
