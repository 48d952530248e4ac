/* SPDX-License-Identifier: Apache-2.0 */
/*
 * ValidatePodSpec (pkg/apis/core/validation/validation.go, Kubernetes
 * v1.32) for a Pod's spec and the pod template of a Deployment or
 * ReplicaSet: the volumes, the containers and init containers
 * (validateContainerCommon: name, image, terminationMessagePolicy, ports,
 * env, envFrom, volumeMounts, imagePullPolicy, resources, securityContext;
 * then lifecycle, probes and restartPolicy), and the pod-level fields, in
 * upstream order, each error with upstream's field path and text. The
 * securityContext rules (the pod's and the containers', Windows host
 * process pods, os) are secctxvalidation.c's; affinity and
 * topologySpreadConstraints affinityvalidation.c's.
 *
 * The spec is the defaulted v1 object (handlers.c: SetDefaults_PodSpec,
 * _Container, _Probe, _Volume ...), as upstream validates the defaulted
 * internal object. The string enums are checked here, at upstream's
 * positions with its lists, but those of the parts not modelled, which
 * stay the schema's (kschema.c own_enums). Not checked here (an object they refuse is
 * accepted, as before): imagePullSecrets,
 * volumeDevices, resourceClaims, ephemeralContainers, overhead, the
 * sources of the cloud and network volumes beyond counting them, and the
 * feature-gated fields that 1.32 drops by default.
 *
 * DESIGN: each validateX of upstream is one function here, appending its
 * causes in upstream's order; a Go map (limits, requests, nodeSelector) is
 * walked in the object's order, as Go's order is random.
 */
#include "podfields.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define cause ks_cause

static const char *const file_mode_msg =
    "must be a number between 0 and 0777 (octal), both inclusive"; /* fileModeErrorMsg */
static const char *const negative_msg = "must be greater than or equal to 0";

/* ---- helpers -------------------------------------------------------------------- */

/* upstream's lists of supported values, in the order its NotSupported
 * prints them (a sets.List is sorted, a literal slice is not) */
static const char *const pull_policies[] = {"Always", "IfNotPresent", "Never", NULL};
static const char *const message_policies[] = {"File", "FallbackToLogsOnError", NULL};
static const char *const protocols[] = {"SCTP", "TCP", "UDP", NULL};
static const char *const schemes[] = {"HTTP", "HTTPS", NULL};
static const char *const propagations[] = {"Bidirectional", "HostToContainer", "None", NULL};
static const char *const restart_policies[] = {"Always", "OnFailure", "Never", NULL};
static const char *const dns_policies[] = {"ClusterFirstWithHostNet", "ClusterFirst", "Default",
                                           "None", NULL};
static const char *const preemption_policies[] = {"PreemptLowerPriority", "Never", NULL};
static const char *const toleration_ops[] = {"Equal", "Exists", NULL};
static const char *const taint_effects[] = {"NoSchedule", "PreferNoSchedule", "NoExecute", NULL};
static const char *const host_path_types[] = {
    "",     "BlockDevice",  "CharDevice", "Directory", "DirectoryOrCreate",
    "File", "FileOrCreate", "Socket",     NULL};

static void required(json_t *causes, const char *field, const char *detail)
{
    ks_required(causes, field, detail);
}

static void not_found(json_t *causes, const char *field, const char *value)
{
    char *q = ks_go_quote(value);
    cause(causes, "FieldValueNotFound", field, "Not found: %s", q);
    free(q);
}

/* upstream's switch over a string enum: "" is Required (a member the
 * defaults fill, so "" only when sent so), another value not in the list
 * NotSupported with it */
static void enum_member(const char *v, const char *const *list, const char *field, json_t *causes)
{
    if (!*v)
        required(causes, field, NULL);
    else if (!in_list(v, list))
        ks_not_supported_list(causes, field, v, list);
}

/* path.IsAbs */
static bool is_abs(const char *p)
{
    return p[0] == '/';
}

/* validatePathNoBacksteps */
static void path_no_backsteps(const char *p, const char *field, json_t *causes)
{
    size_t n = strlen(p);
    for (size_t start = 0; start <= n;) {
        size_t len = strcspn(p + start, "/");
        if (len == 2 && strncmp(p + start, "..", 2) == 0) {
            invalid(causes, field, p, "must not contain '..'");
            return;
        }
        start += len + 1;
    }
}

/* validateLocalDescendingPath */
void ks_validate_local_descending_path(const char *p, const char *field, json_t *causes)
{
    if (is_abs(p))
        invalid(causes, field, p, "must be a relative path");
    path_no_backsteps(p, field, causes);
}

/* ValidateLocalNonReservedPath */
static void local_non_reserved_path(const char *p, const char *field, json_t *causes)
{
    ks_validate_local_descending_path(p, field, causes);
    if (strncmp(p, "..", 2) == 0 && strncmp(p, "../", 3) != 0)
        invalid(causes, field, p, "must not start with '..'");
}

/* A file mode (*int32) outside 0..0777. */
static void file_mode(const json_t *obj, const char *k, const char *field, json_t *causes)
{
    const json_t *m = json_object_get(obj, k);
    if (json_is_integer(m) && (json_integer_value(m) < 0 || json_integer_value(m) > 0777))
        ks_invalid_int(causes, field, json_integer_value(m), file_mode_msg);
}

/* ValidateNonnegativeField of an integer member, when set. */
static void nonnegative(const json_t *obj, const char *k, const char *field, json_t *causes)
{
    const json_t *v = json_object_get(obj, k);
    if (json_is_integer(v) && json_integer_value(v) < 0)
        ks_invalid_int(causes, field, json_integer_value(v), negative_msg);
}

/* A quantity member already checked by the decoder (kschema.c); false when
 * absent. */
static bool quantity_at(const json_t *v, struct ks_quantity *q)
{
    const char *err;
    return v && !json_is_null(v) && ks_quantity_from_json(v, q, &err) == 0;
}

/* ---- volumes (ValidateVolumes, validateVolumeSource) ------------------------------- */

/* validateKeyToPath */
static void key_to_path(const json_t *kp, const char *path, json_t *causes)
{
    char f[FLD];
    const char *key = str_or_empty(kp, "key"), *p = str_or_empty(kp, "path");
    if (!*key)
        required(causes, fld(f, "%s.key", path), NULL);
    if (!*p)
        required(causes, fld(f, "%s.path", path), NULL);
    local_non_reserved_path(p, fld(f, "%s.path", path), causes);
    file_mode(kp, "mode", fld(f, "%s.mode", path), causes);
}

static void items(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    json_t *kp;
    json_array_foreach(json_object_get(src, "items"), i, kp)
    {
        key_to_path(kp, fld(f, "%s.items[%zu]", path, i), causes);
    }
}

static void volume_empty_dir(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    struct ks_quantity q;
    if (quantity_at(json_object_get(src, "sizeLimit"), &q) && ks_quantity_sign(&q) < 0)
        forbidden(causes, fld(f, "%s.sizeLimit", path),
                  "SizeLimit field must be a valid resource quantity");
}

/* validateHostPathVolumeSource (the type's enum is the schema's) */
static void volume_host_path(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    const char *p = str_or_empty(src, "path");
    if (!*p) {
        required(causes, fld(f, "%s.path", path), NULL);
        return;
    }
    path_no_backsteps(p, fld(f, "%s.path", path), causes);
    const char *t = str_at(src, "type");
    if (t && !in_list(t, host_path_types))
        ks_not_supported_list(causes, fld(f, "%s.type", path), t, host_path_types);
}

static void volume_git_repo(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    if (!*str_or_empty(src, "repository"))
        required(causes, fld(f, "%s.repository", path), NULL);
    ks_validate_local_descending_path(str_or_empty(src, "directory"), fld(f, "%s.directory", path),
                                      causes);
}

static void volume_secret(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    if (!*str_or_empty(src, "secretName"))
        required(causes, fld(f, "%s.secretName", path), NULL);
    file_mode(src, "defaultMode", fld(f, "%s.defaultMode", path), causes);
    items(src, path, causes);
}

static void volume_nfs(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    const char *p = str_or_empty(src, "path");
    if (!*str_or_empty(src, "server"))
        required(causes, fld(f, "%s.server", path), NULL);
    if (!*p)
        required(causes, fld(f, "%s.path", path), NULL);
    if (!is_abs(p))
        invalid(causes, fld(f, "%s.path", path), p, "must be an absolute path");
}

static void volume_pvc(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    if (!*str_or_empty(src, "claimName"))
        required(causes, fld(f, "%s.claimName", path), NULL);
}

static void volume_config_map(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    if (!*str_or_empty(src, "name"))
        required(causes, fld(f, "%s.name", path), NULL);
    file_mode(src, "defaultMode", fld(f, "%s.defaultMode", path), causes);
    items(src, path, causes);
}

static void object_field_selector(const json_t *fs, const char *const *exprs, const char *path,
                                  json_t *causes);
static void resource_field_selector(const json_t *fs, bool volume, const char *path,
                                    json_t *causes);

/* validVolumeDownwardAPIFieldPathExpressions (sorted, as sets.List prints them) */
static const char *const volume_field_paths[] = {"metadata.annotations", "metadata.labels",
                                                 "metadata.name",        "metadata.namespace",
                                                 "metadata.uid",         NULL};

/* validateDownwardAPIVolumeFile: path is the downwardAPI source's, not the
 * item's, as upstream passes it */
static void downward_api_file(const json_t *file, const char *path, json_t *causes)
{
    char f[FLD];
    const char *p = str_or_empty(file, "path");
    if (!*p)
        required(causes, fld(f, "%s.path", path), NULL);
    local_non_reserved_path(p, fld(f, "%s.path", path), causes);
    const json_t *fr = json_object_get(file, "fieldRef");
    const json_t *rr = json_object_get(file, "resourceFieldRef");
    if (json_is_object(fr)) {
        object_field_selector(fr, volume_field_paths, fld(f, "%s.fieldRef", path), causes);
        if (json_is_object(rr))
            invalid(causes, path, "resource",
                    "fieldRef and resourceFieldRef can not be specified simultaneously");
    } else if (json_is_object(rr)) {
        resource_field_selector(rr, true, fld(f, "%s.resourceFieldRef", path), causes);
    } else {
        required(causes, path, "one of fieldRef and resourceFieldRef is required");
    }
    file_mode(file, "mode", fld(f, "%s.mode", path), causes);
}

static void volume_downward_api(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    file_mode(src, "defaultMode", fld(f, "%s.defaultMode", path), causes);
    size_t i;
    json_t *file;
    json_array_foreach(json_object_get(src, "items"), i, file)
    {
        downward_api_file(file, path, causes);
    }
}

/* A path a projected source writes, once per volume ("conflicting
 * duplicate paths" at the projected volume, value as upstream gives it). */
static void projected_path(json_t *paths, const char *p, const char *value, const char *path,
                           json_t *causes)
{
    if (!*p)
        return;
    if (json_object_get(paths, p))
        invalid(causes, path, value, "conflicting duplicate paths");
    else
        json_object_set_new(paths, p, json_true());
}

/* validateProjectionSources (clusterTrustBundle is gated off in 1.32) */
static void volume_projected(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD], sp[FLD];
    file_mode(src, "defaultMode", fld(f, "%s.defaultMode", path), causes);
    json_t *paths = json_object();
    size_t i, j;
    json_t *s, *kp;
    json_array_foreach(json_object_get(src, "sources"), i, s)
    {
        int n = 0;
        static const char *const refs[] = {"secret", "configMap"};
        for (size_t r = 0; r < 2; r++) {
            const json_t *ref = json_object_get(s, refs[r]);
            if (!json_is_object(ref))
                continue;
            n++;
            fld(sp, "%s.sources[%zu].%s", path, i, refs[r]);
            if (!*str_or_empty(ref, "name"))
                required(causes, fld(f, "%s.name", sp), NULL);
            json_array_foreach(json_object_get(ref, "items"), j, kp)
            {
                key_to_path(kp, fld(f, "%s.items[%zu]", sp, j), causes);
                projected_path(paths, str_or_empty(kp, "path"), str_or_empty(ref, "name"), path,
                               causes);
            }
        }
        const json_t *dapi = json_object_get(s, "downwardAPI");
        if (json_is_object(dapi)) {
            n++;
            fld(sp, "%s.sources[%zu].downwardAPI", path, i);
            json_array_foreach(json_object_get(dapi, "items"), j, kp)
            {
                downward_api_file(kp, sp, causes);
                const char *p = str_or_empty(kp, "path");
                projected_path(paths, p, p, path, causes);
            }
        }
        const json_t *tok = json_object_get(s, "serviceAccountToken");
        if (json_is_object(tok)) {
            n++;
            fld(sp, "%s.sources[%zu].serviceAccountToken", path, i);
            json_int_t exp = json_integer_value(json_object_get(tok, "expirationSeconds"));
            if (exp < 10 * 60)
                ks_invalid_int(causes, fld(f, "%s.expirationSeconds", sp), exp,
                               "may not specify a duration less than 10 minutes");
            if (exp > ((json_int_t)1 << 32))
                ks_invalid_int(causes, fld(f, "%s.expirationSeconds", sp), exp,
                               "may not specify a duration larger than 2^32 seconds");
            /* upstream's path here is the volume's, not the source's */
            const char *p = str_or_empty(tok, "path");
            if (!*p)
                required(causes, fld(f, "%s.path", path), NULL);
            else
                local_non_reserved_path(p, fld(f, "%s.path", path), causes);
        }
        if (n > 1)
            forbidden(causes, fld(f, "%s.sources[%zu]", path, i),
                      "may not specify more than 1 volume type per source");
    }
    json_decref(paths);
}

/* ValidateCSIDriverName (its TooLong past 63 characters is not here) */
static void volume_csi(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    const char *d = str_or_empty(src, "driver");
    fld(f, "%s.driver", path);
    if (!*d)
        required(causes, f, NULL);
    char *lower = ks_strdup(d);
    for (char *c = lower; *c; c++)
        if (*c >= 'A' && *c <= 'Z')
            *c = (char)(*c - 'A' + 'a');
    json_t *msgs = ks_msgs_dns1123_subdomain(lower);
    free(lower);
    ks_invalid_str(causes, f, d, msgs);
}

/* validateEphemeralVolumeSource: the claim template's own rules are not here */
static void volume_ephemeral(const json_t *src, const char *path, json_t *causes)
{
    char f[FLD];
    if (!json_is_object(json_object_get(src, "volumeClaimTemplate")))
        required(causes, fld(f, "%s.volumeClaimTemplate", path), NULL);
}

typedef void volume_fn(const json_t *src, const char *path, json_t *causes);

/* validateVolumeSource's order; name: the member, child: the path its
 * "more than 1" error names (upstream's spelling, typos included). The
 * image source is gated off in 1.32 (dropped before validation). */
static const struct {
    const char *name, *child;
    volume_fn *fn;
} volume_types[] = {
    {"emptyDir", "emptyDir", volume_empty_dir},
    {"hostPath", "hostPath", volume_host_path},
    {"gitRepo", "gitRepo", volume_git_repo},
    {"gcePersistentDisk", "gcePersistentDisk", NULL},
    {"awsElasticBlockStore", "awsElasticBlockStore", NULL},
    {"secret", "secret", volume_secret},
    {"nfs", "nfs", volume_nfs},
    {"iscsi", "iscsi", NULL},
    {"glusterfs", "glusterfs", NULL},
    {"flocker", "flocker", NULL},
    {"persistentVolumeClaim", "persistentVolumeClaim", volume_pvc},
    {"rbd", "rbd", NULL},
    {"cinder", "cinder", NULL},
    {"cephfs", "cephFS", NULL},
    {"quobyte", "quobyte", NULL},
    {"downwardAPI", "downwarAPI", volume_downward_api},
    {"fc", "fc", NULL},
    {"flexVolume", "flexVolume", NULL},
    {"configMap", "configMap", volume_config_map},
    {"azureFile", "azureFile", NULL},
    {"vsphereVolume", "vsphereVolume", NULL},
    {"photonPersistentDisk", "photonPersistentDisk", NULL},
    {"portworxVolume", "portworxVolume", NULL},
    {"azureDisk", "azureDisk", NULL},
    {"storageos", "storageos", NULL},
    {"projected", "projected", volume_projected},
    {"scaleIO", "scaleIO", NULL},
    {"csi", "csi", volume_csi},
    {"ephemeral", "ephemeral", volume_ephemeral},
};

/* validateVolumeSource */
static void volume_source(const json_t *vol, const char *path, json_t *causes)
{
    char f[FLD];
    int n = 0;
    for (size_t i = 0; i < sizeof(volume_types) / sizeof(volume_types[0]); i++) {
        const json_t *src = json_object_get(vol, volume_types[i].name);
        if (!src || json_is_null(src))
            continue;
        if (n > 0) {
            forbidden(causes, fld(f, "%s.%s", path, volume_types[i].child),
                      "may not specify more than 1 volume type");
            continue;
        }
        n++;
        if (volume_types[i].fn)
            volume_types[i].fn(src, fld(f, "%s.%s", path, volume_types[i].name), causes);
    }
    if (n == 0)
        required(causes, path, "must specify a volume type");
}

/* ValidateVolumes: the names of the valid volumes into ret_vols { name -> volume } */
static void validate_volumes(const json_t *vols, const char *path, json_t *ret_vols, json_t *causes)
{
    char f[FLD], vp[FLD];
    size_t i;
    json_t *v;
    json_array_foreach(vols, i, v)
    {
        fld(vp, "%s[%zu]", path, i);
        json_t *el = json_array();
        volume_source(v, vp, el);
        const char *name = str_or_empty(v, "name");
        fld(f, "%s.name", vp);
        if (!*name)
            required(el, f, NULL);
        else
            ks_invalid_str(el, f, name, ks_msgs_dns1123_label(name));
        if (json_object_get(ret_vols, name))
            ks_duplicate(el, f, name);
        if (json_array_size(el) == 0)
            json_object_set(ret_vols, name, v);
        json_array_extend(causes, el);
        json_decref(el);
    }
}

/* ---- env (ValidateEnv, ValidateEnvFrom) ---------------------------------------- */

/* IsRelaxedEnvVarName (RelaxedEnvironmentVariableValidation: beta, on by
 * default since 1.32) of a non-empty name */
static void relaxed_env_name(const char *name, const char *field, json_t *causes)
{
    for (const unsigned char *p = (const unsigned char *)name; *p; p++) {
        if (*p > 0x7e || *p < 0x20 || *p == '=') {
            invalid(causes, field, name,
                    "a valid environment variable name must consist only of printable ASCII "
                    "characters other than '='");
            return;
        }
    }
}

/* validEnvDownwardAPIFieldPathExpressions (sorted) */
static const char *const env_field_paths[] = {"metadata.name",
                                              "metadata.namespace",
                                              "metadata.uid",
                                              "spec.nodeName",
                                              "spec.serviceAccountName",
                                              "status.hostIP",
                                              "status.hostIPs",
                                              "status.podIP",
                                              "status.podIPs",
                                              NULL};

/* fieldpath.SplitMaybeSubscriptedPath: "path['subscript']" */
static bool split_subscript(const char *fp, char *path, size_t plen, char *sub, size_t slen)
{
    size_t n = strlen(fp);
    if (n < 2 || strcmp(fp + n - 2, "']") != 0)
        return false;
    const char *open = strstr(fp, "['");
    if (!open || open == fp || open + 2 > fp + n - 2)
        return false;
    snprintf(path, plen, "%.*s", (int)(open - fp), fp);
    snprintf(sub, slen, "%.*s", (int)(fp + n - 2 - (open + 2)), open + 2);
    return true;
}

/* validateObjectFieldSelector, with podshelper.ConvertDownwardAPIFieldLabel */
static void object_field_selector(const json_t *fs, const char *const *exprs, const char *path,
                                  json_t *causes)
{
    static const char *const labels[] = {"metadata.annotations",
                                         "metadata.labels",
                                         "metadata.name",
                                         "metadata.namespace",
                                         "metadata.uid",
                                         "spec.nodeName",
                                         "spec.restartPolicy",
                                         "spec.serviceAccountName",
                                         "spec.schedulerName",
                                         "status.phase",
                                         "status.hostIP",
                                         "status.hostIPs",
                                         "status.podIP",
                                         "status.podIPs",
                                         NULL};
    char f[FLD], p[FLD], sub[FLD];
    const char *av = str_or_empty(fs, "apiVersion"), *fp = str_or_empty(fs, "fieldPath");
    if (!*av) {
        required(causes, fld(f, "%s.apiVersion", path), NULL);
        return;
    }
    if (!*fp) {
        required(causes, fld(f, "%s.fieldPath", path), NULL);
        return;
    }
    char *err = NULL;
    bool subscripted = split_subscript(fp, p, sizeof(p), sub, sizeof(sub));
    if (strcmp(av, "v1") != 0) {
        err = ks_printf("unsupported pod version: %s", av);
    } else if (subscripted) {
        if (strcmp(p, "metadata.annotations") != 0 && strcmp(p, "metadata.labels") != 0)
            err = ks_printf("field label does not support subscript: %s", fp);
    } else {
        bool known = strcmp(fp, "spec.host") == 0;
        for (size_t i = 0; labels[i] && !known; i++)
            known = strcmp(fp, labels[i]) == 0;
        if (!known)
            err = ks_printf("field label not supported: %s", fp);
        snprintf(p, sizeof(p), "%s", strcmp(fp, "spec.host") == 0 ? "spec.nodeName" : fp);
    }
    if (err) {
        char *m = ks_printf("error converting fieldPath: %s", err);
        invalid(causes, fld(f, "%s.fieldPath", path), fp, m);
        free(m);
        free(err);
        return;
    }
    if (subscripted) {
        /* annotations are matched lower-cased; the path is the selector's */
        if (strcmp(p, "metadata.annotations") == 0)
            for (char *c = sub; *c; c++)
                if (*c >= 'A' && *c <= 'Z')
                    *c = (char)(*c - 'A' + 'a');
        ks_invalid_str(causes, path, sub, ks_msgs_qualified_name(sub));
        return;
    }
    for (size_t i = 0; exprs[i]; i++)
        if (strcmp(p, exprs[i]) == 0)
            return;
    ks_not_supported_list(causes, fld(f, "%s.fieldPath", path), p, exprs);
}

/* validateContainerResourceDivisor: the divisor's canonical form against
 * what the resource takes */
static void resource_divisor(const char *res, const json_t *divisor, const char *path,
                             json_t *causes)
{
    static const char *const cpu[] = {"1m", "1", NULL};
    static const char *const bytes[] = {"1",   "1k",  "1M",  "1G",  "1T",  "1P",  "1E",
                                        "1Ki", "1Mi", "1Gi", "1Ti", "1Pi", "1Ei", NULL};
    struct ks_quantity q;
    if (!quantity_at(divisor, &q) || ks_quantity_sign(&q) == 0)
        return;
    const char *const *ok = NULL;
    const char *msg = NULL;
    if (strcmp(res, "limits.cpu") == 0 || strcmp(res, "requests.cpu") == 0) {
        ok = cpu;
        msg = "only divisor's values 1m and 1 are supported with the cpu resource";
    } else if (strcmp(res, "limits.memory") == 0 || strcmp(res, "requests.memory") == 0) {
        ok = bytes;
        msg = "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are "
              "supported with the memory resource";
    } else if (strcmp(res, "limits.ephemeral-storage") == 0 ||
               strcmp(res, "requests.ephemeral-storage") == 0) {
        ok = bytes;
        msg = "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei are "
              "supported with the local ephemeral storage resource";
    }
    char *s = ks_quantity_string(&q);
    char f[FLD];
    fld(f, "%s.divisor", path);
    bool found = false;
    for (size_t i = 0; ok && ok[i]; i++)
        found = found || strcmp(s, ok[i]) == 0;
    if (ok && !found)
        invalid(causes, f, res, msg);
    if (strncmp(res, "requests.hugepages-", 19) == 0 ||
        strncmp(res, "limits.hugepages-", 17) == 0) {
        found = false;
        for (size_t i = 0; bytes[i]; i++)
            found = found || strcmp(s, bytes[i]) == 0;
        if (!found)
            invalid(causes, f, res,
                    "only divisor's values 1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei "
                    "are supported with the hugepages resource");
    }
    free(s);
}

/* validateContainerResourceFieldSelector (volume: a downward API file's,
 * which must name its container) */
static void resource_field_selector(const json_t *fs, bool volume, const char *path, json_t *causes)
{
    static const char *const exprs[] = {"limits.cpu",
                                        "limits.ephemeral-storage",
                                        "limits.memory",
                                        "requests.cpu",
                                        "requests.ephemeral-storage",
                                        "requests.memory",
                                        NULL};
    char f[FLD];
    const char *res = str_or_empty(fs, "resource");
    if (volume && !*str_or_empty(fs, "containerName")) {
        required(causes, fld(f, "%s.containerName", path), NULL);
    } else if (!*res) {
        required(causes, fld(f, "%s.resource", path), NULL);
    } else {
        bool known = strncmp(res, "requests.hugepages-", 19) == 0 ||
                     strncmp(res, "limits.hugepages-", 17) == 0;
        for (size_t i = 0; exprs[i] && !known; i++)
            known = strcmp(res, exprs[i]) == 0;
        if (!known)
            ks_not_supported_list(causes, fld(f, "%s.resource", path), res, exprs);
    }
    resource_divisor(res, json_object_get(fs, "divisor"), path, causes);
}

/* validateConfigMapKeySelector and validateSecretKeySelector */
static void key_selector(const json_t *s, const char *path, json_t *causes)
{
    char f[FLD];
    const char *name = str_or_empty(s, "name"), *key = str_or_empty(s, "key");
    ks_invalid_str(causes, fld(f, "%s.name", path), name, ks_msgs_dns1123_subdomain(name));
    fld(f, "%s.key", path);
    if (!*key)
        required(causes, f, NULL);
    else
        ks_invalid_str(causes, f, key, ks_msgs_config_key(key));
}

/* validateEnvVarValueFrom */
static void env_value_from(const json_t *ev, const char *path, json_t *causes)
{
    const json_t *vf = json_object_get(ev, "valueFrom");
    if (!json_is_object(vf))
        return;
    char f[FLD];
    int n = 0;
    const json_t *s = json_object_get(vf, "fieldRef");
    if (json_is_object(s)) {
        n++;
        object_field_selector(s, env_field_paths, fld(f, "%s.fieldRef", path), causes);
    }
    s = json_object_get(vf, "resourceFieldRef");
    if (json_is_object(s)) {
        n++;
        resource_field_selector(s, false, fld(f, "%s.resourceFieldRef", path), causes);
    }
    s = json_object_get(vf, "configMapKeyRef");
    if (json_is_object(s)) {
        n++;
        key_selector(s, fld(f, "%s.configMapKeyRef", path), causes);
    }
    s = json_object_get(vf, "secretKeyRef");
    if (json_is_object(s)) {
        n++;
        key_selector(s, fld(f, "%s.secretKeyRef", path), causes);
    }
    if (n == 0)
        invalid(causes, path, "",
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
                "`secretKeyRef`");
    else if (*str_or_empty(ev, "value"))
        invalid(causes, path, "", "may not be specified when `value` is not empty");
    else if (n > 1)
        invalid(causes, path, "", "may not have more than one field specified at a time");
}

static void validate_env(const json_t *env, const char *path, json_t *causes)
{
    char f[FLD], ip[FLD];
    size_t i;
    json_t *ev;
    json_array_foreach(env, i, ev)
    {
        fld(ip, "%s[%zu]", path, i);
        const char *name = str_or_empty(ev, "name");
        fld(f, "%s.name", ip);
        if (!*name)
            required(causes, f, NULL);
        else
            relaxed_env_name(name, f, causes);
        env_value_from(ev, fld(f, "%s.valueFrom", ip), causes);
    }
}

/* NameIsDNSSubdomain(name, prefix=true): a trailing dash may be followed
 * by generated characters */
static json_t *prefix_subdomain_msgs(const char *name)
{
    size_t n = strlen(name);
    char *masked =
        n > 1 && name[n - 1] == '-' ? ks_printf("%.*sa", (int)(n - 2), name) : ks_strdup(name);
    json_t *msgs = ks_msgs_dns1123_subdomain(masked);
    free(masked);
    return msgs;
}

/* ValidateEnvFrom (validateConfigMapEnvSource, validateSecretEnvSource) */
static void validate_env_from(const json_t *list, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    json_t *ev;
    json_array_foreach(list, i, ev)
    {
        const char *prefix = str_or_empty(ev, "prefix");
        if (*prefix)
            relaxed_env_name(prefix, fld(f, "%s[%zu].prefix", path, i), causes);
        int n = 0;
        static const char *const refs[] = {"configMapRef", "secretRef"};
        for (size_t r = 0; r < 2; r++) {
            const json_t *ref = json_object_get(ev, refs[r]);
            if (!json_is_object(ref))
                continue;
            n++;
            const char *name = str_or_empty(ref, "name");
            fld(f, "%s[%zu].%s.name", path, i, refs[r]);
            if (!*name)
                required(causes, f, NULL);
            else
                ks_invalid_str(causes, f, name, prefix_subdomain_msgs(name));
        }
        if (n == 0)
            invalid(causes, path, "", "must specify one of: `configMapRef` or `secretRef`");
        else if (n > 1)
            invalid(causes, path, "", "may not have more than one field specified at a time");
    }
}

/* ---- volume mounts (ValidateVolumeMounts) ---------------------------------------- */

static void validate_volume_mounts(const json_t *c, const json_t *vols, const char *path,
                                   json_t *causes)
{
    char f[FLD], ip[FLD];
    json_t *points = json_object();
    const json_t *sc = json_object_get(c, "securityContext");
    bool privileged = json_is_true(json_object_get(sc, "privileged"));
    size_t i;
    json_t *m;
    json_array_foreach(json_object_get(c, "volumeMounts"), i, m)
    {
        fld(ip, "%s[%zu]", path, i);
        const char *name = str_or_empty(m, "name"), *mp = str_or_empty(m, "mountPath");
        if (!*name)
            required(causes, fld(f, "%s.name", ip), NULL);
        if (!json_object_get(vols, name))
            not_found(causes, fld(f, "%s.name", ip), name);
        if (!*mp)
            required(causes, fld(f, "%s.mountPath", ip), NULL);
        if (json_object_get(points, mp))
            invalid(causes, fld(f, "%s.mountPath", ip), mp, "must be unique");
        json_object_set_new(points, mp, json_true());
        /* upstream names subPath, subPathExpr, mountPropagation and
         * recursiveReadOnly under the list, not the item */
        const char *sp = str_or_empty(m, "subPath"), *spe = str_or_empty(m, "subPathExpr");
        if (*sp)
            ks_validate_local_descending_path(sp, fld(f, "%s.subPath", path), causes);
        if (*spe) {
            if (*sp)
                invalid(causes, fld(f, "%s.subPathExpr", ip), spe,
                        "subPathExpr and subPath are mutually exclusive");
            ks_validate_local_descending_path(spe, fld(f, "%s.subPathExpr", path), causes);
        }
        /* validateMountPropagation (a pointer: "" is not supported) */
        const char *prop = str_at(m, "mountPropagation");
        if (prop && !in_list(prop, propagations))
            ks_not_supported_list(causes, fld(f, "%s.mountPropagation", path), prop, propagations);
        if (prop && strcmp(prop, "Bidirectional") == 0 && !privileged)
            forbidden(causes, fld(f, "%s.mountPropagation", path),
                      "Bidirectional mount propagation is available only to privileged "
                      "containers");
        /* validateMountRecursiveReadOnly */
        const char *rro = str_at(m, "recursiveReadOnly");
        fld(f, "%s.recursiveReadOnly", path);
        if (!rro || strcmp(rro, "Disabled") == 0) {
            /* nothing */
        } else if (strcmp(rro, "Enabled") == 0 || strcmp(rro, "IfPossible") == 0) {
            if (!json_is_true(json_object_get(m, "readOnly")))
                forbidden(causes, f, "may only be specified when readOnly is true");
            if (prop && strcmp(prop, "None") != 0)
                forbidden(causes, f,
                          "may only be specified when mountPropagation is None or not specified");
        } else {
            static const char *const rros[] = {"Disabled", "Enabled", "IfPossible", NULL};
            ks_not_supported_list(causes, f, rro, rros);
        }
    }
    json_decref(points);
}

/* ---- resources (ValidateResourceRequirements) ------------------------------------ */

static bool is_hugepages(const char *name)
{
    return strncmp(name, "hugepages-", 10) == 0;
}

/* helper.IsNativeResource: no domain, or a kubernetes.io one */
static bool is_native(const char *name)
{
    return !strchr(name, '/') || strstr(name, "kubernetes.io/");
}

/* helper.IsOvercommitAllowed */
static bool overcommit_allowed(const char *name)
{
    return is_native(name) && !is_hugepages(name);
}

/* validateContainerResourceName (validateResourceName first) */
static void container_resource_name(const char *name, const char *field, json_t *causes)
{
    static const char *const standard[] = {"cpu",
                                           "memory",
                                           "ephemeral-storage",
                                           "requests.cpu",
                                           "requests.memory",
                                           "requests.ephemeral-storage",
                                           "limits.cpu",
                                           "limits.memory",
                                           "limits.ephemeral-storage",
                                           "pods",
                                           "services",
                                           "replicationcontrollers",
                                           "resourcequotas",
                                           "secrets",
                                           "persistentvolumeclaims",
                                           "configmaps",
                                           "services.nodeports",
                                           "services.loadbalancers",
                                           "requests.storage",
                                           NULL};
    if (!name)
        return; /* callers pass a map key; this tells gcc's -Wformat-overflow so */
    json_t *msgs = ks_msgs_qualified_name(name);
    if (json_array_size(msgs) > 0) {
        ks_invalid_str(causes, field, name, msgs);
        return;
    }
    json_decref(msgs);
    /* a core.ResourceName is a fmt.Stringer: printed without quotes */
    if (!strchr(name, '/')) {
        bool std = is_hugepages(name) || strncmp(name, "requests.hugepages-", 19) == 0;
        for (size_t i = 0; standard[i] && !std; i++)
            std = strcmp(name, standard[i]) == 0;
        if (!std)
            cause(causes, "FieldValueInvalid", field,
                  "Invalid value: %s: must be a standard resource type or fully qualified", name);
        if (strcmp(name, "cpu") != 0 && strcmp(name, "memory") != 0 &&
            strcmp(name, "ephemeral-storage") != 0 && !is_hugepages(name))
            cause(causes, "FieldValueInvalid", field,
                  "Invalid value: %s: must be a standard resource for containers", name);
        return;
    }
    if (!is_native(name)) {
        /* IsExtendedResourceName: "requests." + name a qualified name */
        char *r = ks_printf("requests.%s", name);
        json_t *m = ks_msgs_qualified_name(r);
        bool ext = strncmp(name, "requests.", 9) != 0 && json_array_size(m) == 0;
        json_decref(m);
        free(r);
        if (!ext)
            cause(causes, "FieldValueInvalid", field,
                  "Invalid value: %s: doesn't follow extended resource name standard", name);
    }
}

/* ValidateNonnegativeQuantity */
static void nonnegative_quantity(const struct ks_quantity *q, const char *field, json_t *causes)
{
    if (ks_quantity_sign(q) >= 0)
        return;
    char *s = ks_quantity_string(q);
    invalid(causes, field, s, negative_msg);
    free(s);
}

static void validate_resources(const json_t *res, const char *path, json_t *causes)
{
    char f[FLD], lim_path[FLD], req_path[FLD];
    const json_t *limits = json_object_get(res, "limits");
    const json_t *requests = json_object_get(res, "requests");
    fld(lim_path, "%s.limits", path);
    fld(req_path, "%s.requests", path);
    bool cpu_mem = false, huge = false;
    const char *name;
    json_t *v;
    struct ks_quantity q, lq;
    json_object_foreach((json_t *)limits, name, v)
    {
        fld(f, "%s[%s]", lim_path, name);
        container_resource_name(name, f, causes);
        if (quantity_at(v, &q))
            nonnegative_quantity(&q, f, causes);
        huge = huge || is_hugepages(name);
        cpu_mem = cpu_mem || strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0;
    }
    json_object_foreach((json_t *)requests, name, v)
    {
        fld(f, "%s[%s]", req_path, name);
        container_resource_name(name, f, causes);
        if (!quantity_at(v, &q))
            continue;
        nonnegative_quantity(&q, f, causes);
        if (quantity_at(json_object_get(limits, name), &lq)) {
            int c = ks_quantity_cmp(&q, &lq);
            char *qs = ks_quantity_string(&q), *ls = ks_quantity_string(&lq);
            char *m = NULL;
            if (c != 0 && !overcommit_allowed(name))
                m = ks_printf("must be equal to %s limit of %s", name, ls);
            else if (c > 0)
                m = ks_printf("must be less than or equal to %s limit of %s", name, ls);
            if (m)
                invalid(causes, req_path, qs, m);
            free(m);
            free(qs);
            free(ls);
        } else if (!overcommit_allowed(name)) {
            required(causes, lim_path, "Limit must be set for non overcommitable resources");
        }
        huge = huge || is_hugepages(name);
        cpu_mem = cpu_mem || strcmp(name, "cpu") == 0 || strcmp(name, "memory") == 0;
    }
    if (huge && !cpu_mem)
        forbidden(causes, path, "HugePages require cpu or memory");
}

/* ---- containers ---------------------------------------------------------------- */

/* validateContainerPorts */
static void validate_container_ports(const json_t *ports, const char *path, json_t *causes)
{
    static const char *const port_range = "must be between 1 and 65535, inclusive";
    char f[FLD];
    json_t *names = json_object();
    size_t i;
    json_t *p;
    json_array_foreach(ports, i, p)
    {
        const char *name = str_at(p, "name");
        if (name && *name) {
            fld(f, "%s[%zu].name", path, i);
            json_t *msgs = ks_msgs_port_name(name);
            if (json_array_size(msgs) > 0) {
                ks_invalid_str(causes, f, name, msgs);
            } else {
                json_decref(msgs);
                if (json_object_get(names, name))
                    ks_duplicate(causes, f, name);
                json_object_set_new(names, name, json_true());
            }
        }
        fld(f, "%s[%zu].containerPort", path, i);
        json_int_t cp = json_integer_value(json_object_get(p, "containerPort"));
        if (cp == 0)
            required(causes, f, NULL);
        else if (cp < 1 || cp > 65535)
            ks_invalid_int(causes, f, cp, port_range);
        json_int_t hp = json_integer_value(json_object_get(p, "hostPort"));
        if (hp != 0 && (hp < 1 || hp > 65535))
            ks_invalid_int(causes, fld(f, "%s[%zu].hostPort", path, i), hp, port_range);
        enum_member(str_or_empty(p, "protocol"), protocols, fld(f, "%s[%zu].protocol", path, i),
                    causes);
    }
    json_decref(names);
}

/* validateContainerCommon */
static void container_common(const json_t *c, const json_t *vols, const char *path, json_t *causes)
{
    char f[FLD];
    const char *name = str_or_empty(c, "name");
    fld(f, "%s.name", path);
    if (!*name)
        required(causes, f, NULL);
    else
        ks_invalid_str(causes, f, name, ks_msgs_dns1123_label(name));
    if (!*str_or_empty(c, "image"))
        required(causes, fld(f, "%s.image", path), NULL);
    enum_member(str_or_empty(c, "terminationMessagePolicy"), message_policies,
                fld(f, "%s.terminationMessagePolicy", path), causes);
    validate_container_ports(json_object_get(c, "ports"), fld(f, "%s.ports", path), causes);
    validate_env(json_object_get(c, "env"), fld(f, "%s.env", path), causes);
    validate_env_from(json_object_get(c, "envFrom"), fld(f, "%s.envFrom", path), causes);
    validate_volume_mounts(c, vols, fld(f, "%s.volumeMounts", path), causes);
    enum_member(str_or_empty(c, "imagePullPolicy"), pull_policies,
                fld(f, "%s.imagePullPolicy", path), causes);
    validate_resources(json_object_get(c, "resources"), fld(f, "%s.resources", path), causes);
    /* validateResizePolicy: InPlacePodVerticalScaling is off in 1.32. hostUsers:
     * the pod's, dropped before validation (UserNamespacesSupport is off), so true */
    ks_validate_security_context(json_object_get(c, "securityContext"),
                                 fld(f, "%s.securityContext", path), true, causes);
}

/* ValidatePortNumOrName of an intstr port */
static void port_num_or_name(const json_t *port, const char *field, json_t *causes)
{
    if (json_is_string(port)) {
        const char *s = json_string_value(port);
        ks_invalid_str(causes, field, s, ks_msgs_port_name(s));
    } else {
        json_int_t n = json_integer_value(port);
        if (n < 1 || n > 65535)
            ks_invalid_int(causes, field, n, "must be between 1 and 65535, inclusive");
    }
}

/* validateHandler of a probe's (exec, httpGet, tcpSocket, grpc) or a
 * lifecycle hook's (exec, httpGet, tcpSocket, sleep) handler */
static void validate_handler(const json_t *h, bool probe, const json_int_t *grace, const char *path,
                             json_t *causes)
{
    static const char *const kinds[] = {"exec", "httpGet", "tcpSocket", "grpc", "sleep"};
    char f[FLD], hp[FLD];
    int n = 0;
    for (size_t k = 0; k < 5; k++) {
        const json_t *a = json_object_get(h, kinds[k]);
        if (!json_is_object(a) || (probe && k == 4) || (!probe && k == 3))
            continue;
        fld(hp, "%s.%s", path, kinds[k]);
        if (n > 0) {
            forbidden(causes, hp, "may not specify more than 1 handler type");
            continue;
        }
        n++;
        switch (k) {
        case 0: /* validateExecAction */
            if (json_array_size(json_object_get(a, "command")) == 0)
                required(causes, fld(f, "%s.command", hp), NULL);
            break;
        case 1: { /* validateHTTPGetAction */
            if (!*str_or_empty(a, "path"))
                required(causes, fld(f, "%s.path", hp), NULL);
            port_num_or_name(json_object_get(a, "port"), fld(f, "%s.port", hp), causes);
            const char *scheme = str_or_empty(a, "scheme");
            if (!in_list(scheme, schemes)) /* a sets.Has: "" is not supported either */
                ks_not_supported_list(causes, fld(f, "%s.scheme", hp), scheme, schemes);
            size_t i;
            json_t *hd;
            json_array_foreach(json_object_get(a, "httpHeaders"), i, hd)
            {
                const char *hn = str_or_empty(hd, "name");
                bool ok = *hn != '\0';
                for (const char *c = hn; *c && ok; c++)
                    ok = (*c >= 'A' && *c <= 'Z') || (*c >= 'a' && *c <= 'z') ||
                         (*c >= '0' && *c <= '9') || *c == '-';
                if (!ok)
                    invalid(causes, fld(f, "%s.httpHeaders", hp), hn,
                            "a valid HTTP header must consist of alphanumeric characters or '-' "
                            "(e.g. 'X-Header-Name', regex used for validation is "
                            "'[-A-Za-z0-9]+')");
            }
            break;
        }
        case 2:
        case 3:
            port_num_or_name(json_object_get(a, "port"), fld(f, "%s.port", hp), causes);
            break;
        default: { /* validateSleepAction (PodLifecycleSleepActionAllowZero is off in 1.32) */
            json_int_t s = json_integer_value(json_object_get(a, "seconds"));
            if (grace && (s <= 0 || s > *grace)) {
                char *m = ks_printf("must be greater than 0 and less than "
                                    "terminationGracePeriodSeconds (%" JSON_INTEGER_FORMAT ")",
                                    *grace);
                ks_invalid_int(causes, hp, s, m);
                free(m);
            }
            break;
        }
        }
    }
    if (n == 0)
        required(causes, path, "must specify a handler type");
}

static void validate_lifecycle(const json_t *lc, const json_int_t *grace, const char *path,
                               json_t *causes)
{
    char f[FLD];
    static const char *const hooks[] = {"postStart", "preStop"};
    for (size_t i = 0; i < 2; i++) {
        const json_t *h = json_object_get(lc, hooks[i]);
        if (json_is_object(h))
            validate_handler(h, false, grace, fld(f, "%s.%s", path, hooks[i]), causes);
    }
}

enum probe_kind { PROBE_LIVENESS, PROBE_READINESS, PROBE_STARTUP };

/* validateProbe, and what validateLivenessProbe, validateReadinessProbe
 * and validateStartupProbe add */
static void validate_probe(const json_t *p, enum probe_kind kind, const json_int_t *grace,
                           const char *path, json_t *causes)
{
    if (!json_is_object(p))
        return;
    char f[FLD];
    validate_handler(p, true, grace, path, causes);
    static const char *const counts[] = {"initialDelaySeconds", "timeoutSeconds", "periodSeconds",
                                         "successThreshold", "failureThreshold"};
    for (size_t i = 0; i < 5; i++)
        nonnegative(p, counts[i], fld(f, "%s.%s", path, counts[i]), causes);
    const json_t *tg = json_object_get(p, "terminationGracePeriodSeconds");
    fld(f, "%s.terminationGracePeriodSeconds", path);
    if (json_is_integer(tg) && json_integer_value(tg) <= 0)
        ks_invalid_int(causes, f, json_integer_value(tg), "must be greater than 0");
    if (kind == PROBE_READINESS) {
        if (json_is_integer(tg))
            ks_invalid_int(causes, f, json_integer_value(tg),
                           "must not be set for readinessProbes");
    } else {
        json_int_t st = json_integer_value(json_object_get(p, "successThreshold"));
        if (st != 1)
            ks_invalid_int(causes, fld(f, "%s.successThreshold", path), st, "must be 1");
    }
}

static void validate_probes(const json_t *c, const json_int_t *grace, const char *path,
                            json_t *causes)
{
    char f[FLD];
    validate_probe(json_object_get(c, "livenessProbe"), PROBE_LIVENESS, grace,
                   fld(f, "%s.livenessProbe", path), causes);
    validate_probe(json_object_get(c, "readinessProbe"), PROBE_READINESS, grace,
                   fld(f, "%s.readinessProbe", path), causes);
    validate_probe(json_object_get(c, "startupProbe"), PROBE_STARTUP, grace,
                   fld(f, "%s.startupProbe", path), causes);
}

/* AccumulateUniqueHostPorts over containers (one init container at a time
 * when only is set) */
static void host_port_conflicts(const json_t *list, const char *path, long only, json_t *causes)
{
    char f[FLD];
    json_t *seen = json_object();
    size_t ci, pi;
    json_t *c, *p;
    json_array_foreach(list, ci, c)
    {
        if (only >= 0 && ci != (size_t)only)
            continue;
        json_array_foreach(json_object_get(c, "ports"), pi, p)
        {
            json_int_t hp = json_integer_value(json_object_get(p, "hostPort"));
            if (hp == 0)
                continue;
            char *key = ks_printf("%s/%s/%" JSON_INTEGER_FORMAT, str_or_empty(p, "protocol"),
                                  str_or_empty(p, "hostIP"), hp);
            if (json_object_get(seen, key))
                ks_duplicate(causes, fld(f, "%s[%zu].ports[%zu].hostPort", path, ci, pi), key);
            else
                json_object_set_new(seen, key, json_true());
            free(key);
        }
    }
    json_decref(seen);
}

/* validateContainers: names unique among the regular containers (added to
 * names for the init containers' check) */
static void validate_containers(const json_t *list, const json_t *vols, const json_int_t *grace,
                                const char *path, json_t *names, json_t *causes)
{
    char f[FLD], cp[FLD];
    if (json_array_size(list) == 0) {
        required(causes, path, NULL);
        return;
    }
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        fld(cp, "%s[%zu]", path, i);
        container_common(c, vols, cp, causes);
        const char *name = str_or_empty(c, "name");
        if (json_object_get(names, name))
            ks_duplicate(causes, fld(f, "%s.name", cp), name);
        else
            json_object_set_new(names, name, json_true());
        const json_t *lc = json_object_get(c, "lifecycle");
        if (json_is_object(lc))
            validate_lifecycle(lc, grace, fld(f, "%s.lifecycle", cp), causes);
        validate_probes(c, grace, cp, causes);
        if (has(c, "restartPolicy"))
            forbidden(causes, fld(f, "%s.restartPolicy", cp),
                      "may not be set for non-init containers");
    }
    host_port_conflicts(list, path, -1, causes);
}

/* validateInitContainers */
static void validate_init_containers(const json_t *list, const json_t *vols,
                                     const json_int_t *grace, const char *path, json_t *names,
                                     json_t *causes)
{
    static const char *const always[] = {"Always", NULL};
    static const char *const probes[] = {"livenessProbe", "readinessProbe", "startupProbe"};
    char f[FLD], cp[FLD];
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        fld(cp, "%s[%zu]", path, i);
        container_common(c, vols, cp, causes);
        const char *rp = str_at(c, "restartPolicy");
        bool restart_always = rp && strcmp(rp, "Always") == 0;
        if (rp && !restart_always)
            ks_not_supported_list(causes, fld(f, "%s.restartPolicy", cp), rp, always);
        const char *name = str_or_empty(c, "name");
        if (json_object_get(names, name))
            ks_duplicate(causes, fld(f, "%s.name", cp), name);
        else if (*name)
            json_object_set_new(names, name, json_true());
        host_port_conflicts(list, path, (long)i, causes);
        const json_t *lc = json_object_get(c, "lifecycle");
        if (restart_always) {
            if (json_is_object(lc))
                validate_lifecycle(lc, grace, fld(f, "%s.lifecycle", cp), causes);
            validate_probes(c, grace, cp, causes);
            continue;
        }
        const char *no = "may not be set for init containers without restartPolicy=Always";
        if (has(c, "lifecycle"))
            forbidden(causes, fld(f, "%s.lifecycle", cp), no);
        for (size_t k = 0; k < 3; k++)
            if (has(c, probes[k]))
                forbidden(causes, fld(f, "%s.%s", cp, probes[k]), no);
    }
}

/* ---- pod-level fields ---------------------------------------------------------- */

/* validatePodHostNetworkDeps: with hostNetwork a hostPort is the
 * containerPort (a Pod's is defaulted to it; a template may leave 0) */
static void host_network_deps(const json_t *spec, const char *path, bool is_pod, json_t *causes)
{
    if (!json_is_true(json_object_get(spec, "hostNetwork")))
        return;
    char f[FLD];
    size_t i, j;
    json_t *c, *p;
    json_array_foreach(json_object_get(spec, "containers"), i, c)
    {
        json_array_foreach(json_object_get(c, "ports"), j, p)
        {
            json_int_t hp = json_integer_value(json_object_get(p, "hostPort"));
            json_int_t cp = json_integer_value(json_object_get(p, "containerPort"));
            if ((is_pod || hp != 0) && hp != cp)
                ks_invalid_int(causes, fld(f, "%s.containers[%zu].ports[%zu].hostPort", path, i, j),
                               hp, "must match `containerPort` when `hostNetwork` is true");
        }
    }
}

static bool valid_ip(const char *s)
{
    unsigned char buf[16];
    return ks_ip_parse(s, buf);
}

/* validation.IsValidIP */
static void is_valid_ip(const char *ip, const char *field, json_t *causes)
{
    if (!valid_ip(ip))
        invalid(causes, field, ip, "must be a valid IP address, (e.g. 10.9.8.7 or 2001:db8::ffff)");
}

/* validatePodDNSConfig (RelaxedDNSSearchValidation is off in 1.32) */
static void dns_config(const json_t *spec, const char *path, json_t *causes)
{
    char f[FLD];
    const json_t *dc = json_object_get(spec, "dnsConfig");
    const char *policy = str_or_empty(spec, "dnsPolicy");
    if (strcmp(policy, "None") == 0) {
        if (!json_is_object(dc)) {
            required(causes, path, "must provide `dnsConfig` when `dnsPolicy` is None");
            return;
        }
        if (json_array_size(json_object_get(dc, "nameservers")) == 0) {
            required(causes, fld(f, "%s.nameservers", path),
                     "must provide at least one DNS nameserver when `dnsPolicy` is None");
            return;
        }
    }
    if (!json_is_object(dc))
        return;
    const json_t *ns = json_object_get(dc, "nameservers");
    const json_t *searches = json_object_get(dc, "searches");
    if (json_array_size(ns) > 3) {
        char *v = ks_go_strings(ns, "[]string");
        cause(causes, "FieldValueInvalid", fld(f, "%s.nameservers", path),
              "Invalid value: %s: must not have more than 3 nameservers", v);
        free(v);
    }
    size_t i;
    json_t *s;
    json_array_foreach(ns, i, s)
    {
        is_valid_ip(json_is_string(s) ? json_string_value(s) : "",
                    fld(f, "%s.nameservers[%zu]", path, i), causes);
    }
    size_t total = 0;
    json_array_foreach(searches, i, s)
    {
        total += json_string_length(s) + (i ? 1 : 0);
    }
    char *v = ks_go_strings(searches, "[]string");
    fld(f, "%s.searches", path);
    if (json_array_size(searches) > 32)
        cause(causes, "FieldValueInvalid", f,
              "Invalid value: %s: must not have more than 32 search paths", v);
    if (total > 2048)
        cause(causes, "FieldValueInvalid", f,
              "Invalid value: %s: must not have more than 2048 characters (including spaces) in "
              "the search list",
              v);
    free(v);
    json_array_foreach(searches, i, s)
    {
        /* a trailing dot is fine */
        const char *str = json_is_string(s) ? json_string_value(s) : "";
        size_t n = strlen(str);
        char *t = ks_printf("%.*s", (int)(n > 0 && str[n - 1] == '.' ? n - 1 : n), str);
        ks_invalid_str(causes, fld(f, "%s.searches[%zu]", path, i), t,
                       ks_msgs_dns1123_subdomain(t));
        free(t);
    }
    json_array_foreach(json_object_get(dc, "options"), i, s)
    {
        if (!*str_or_empty(s, "name"))
            required(causes, fld(f, "%s.options[%zu]", path, i), "must not be empty");
    }
}

static void readiness_gates(const json_t *gates, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    json_t *g;
    json_array_foreach(gates, i, g)
    {
        const char *t = str_or_empty(g, "conditionType");
        ks_invalid_str(causes, fld(f, "%s[%zu].conditionType", path, i), t,
                       ks_msgs_qualified_name(t));
    }
}

static void scheduling_gates(const json_t *gates, const char *path, json_t *causes)
{
    char f[FLD];
    json_t *seen = json_object();
    size_t i;
    json_t *g;
    json_array_foreach(gates, i, g)
    {
        const char *n = str_or_empty(g, "name");
        fld(f, "%s[%zu]", path, i);
        ks_invalid_str(causes, f, n, ks_msgs_qualified_name(n));
        if (json_object_get(seen, n))
            ks_duplicate(causes, f, n);
        json_object_set_new(seen, n, json_true());
    }
    json_decref(seen);
}

/* Go's %#v of a core.Toleration (its tolerationSeconds a pointer). malloc'd */
static char *go_toleration(const json_t *t)
{
    char *k = ks_go_quote(str_or_empty(t, "key")), *o = ks_go_quote(str_or_empty(t, "operator"));
    char *v = ks_go_quote(str_or_empty(t, "value")), *e = ks_go_quote(str_or_empty(t, "effect"));
    const json_t *ts = json_object_get(t, "tolerationSeconds");
    char *p = json_is_integer(ts) ? ks_printf("(*int64)(%p)", (const void *)ts)
                                  : ks_strdup("(*int64)(nil)");
    char *s = ks_printf("core.Toleration{Key:%s, Operator:%s, Value:%s, Effect:%s, "
                        "TolerationSeconds:%s}",
                        k, o, v, e, p);
    free(k);
    free(o);
    free(v);
    free(e);
    free(p);
    return s;
}

/* ValidateTolerations */
static void tolerations(const json_t *list, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    json_t *t;
    json_array_foreach(list, i, t)
    {
        const char *key = str_or_empty(t, "key"), *op = str_or_empty(t, "operator");
        const char *value = str_or_empty(t, "value"), *effect = str_or_empty(t, "effect");
        if (*key)
            ks_invalid_str(causes, fld(f, "%s[%zu].key", path, i), key,
                           ks_msgs_qualified_name(key));
        fld(f, "%s[%zu].operator", path, i);
        if (!*key && strcmp(op, "Exists") != 0)
            invalid(causes, f, op,
                    "operator must be Exists when `key` is empty, which means \"match all values "
                    "and all keys\"");
        if (has(t, "tolerationSeconds") && strcmp(effect, "NoExecute") != 0)
            invalid(causes, fld(f, "%s[%zu].effect", path, i), effect,
                    "effect must be 'NoExecute' when `tolerationSeconds` is set");
        fld(f, "%s[%zu].operator", path, i);
        if (!*op || strcmp(op, "Equal") == 0) {
            json_t *msgs = ks_msgs_label_value(value);
            if (json_array_size(msgs) > 0) {
                char *joined = ks_join(msgs, "", ";", "");
                invalid(causes, f, value, joined);
                free(joined);
            }
            json_decref(msgs);
        } else if (strcmp(op, "Exists") == 0) {
            if (*value) {
                char *g = go_toleration(t);
                cause(causes, "FieldValueInvalid", f,
                      "Invalid value: %s: value must be empty when `operator` is 'Exists'", g);
                free(g);
            }
        } else {
            ks_not_supported_list(causes, f, op, toleration_ops);
        }
        /* validateTaintEffect; "" matches every effect */
        if (*effect && !in_list(effect, taint_effects))
            ks_not_supported_list(causes, fld(f, "%s[%zu].effect", path, i), effect, taint_effects);
    }
}

static void host_aliases(const json_t *list, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i, j;
    json_t *a, *h;
    json_array_foreach(list, i, a)
    {
        is_valid_ip(str_or_empty(a, "ip"), fld(f, "%s[%zu].ip", path, i), causes);
        json_array_foreach(json_object_get(a, "hostnames"), j, h)
        {
            const char *s = json_is_string(h) ? json_string_value(h) : "";
            ks_invalid_str(causes, fld(f, "%s[%zu].hostnames[%zu]", path, i, j), s,
                           ks_msgs_dns1123_subdomain(s));
        }
    }
}

/* A name member checked with a ks_msgs_* function when non-empty. */
static void name_member(const json_t *spec, const char *k, json_t *(*msgs)(const char *),
                        const char *path, json_t *causes)
{
    char f[FLD];
    const char *v = str_at(spec, k);
    if (v && *v)
        ks_invalid_str(causes, fld(f, "%s.%s", path, k), v, msgs(v));
}

/* validateContainerOnlyForPod: a Pod's images (not a template's) */
static void images_only_for_pod(const json_t *list, const char *path, json_t *causes)
{
    char f[FLD];
    size_t i;
    json_t *c;
    json_array_foreach(list, i, c)
    {
        const char *img = str_or_empty(c, "image");
        size_t n = strlen(img);
        if (n > 0 && (strchr(" \t\n\r\v\f", img[0]) || strchr(" \t\n\r\v\f", img[n - 1])))
            invalid(causes, fld(f, "%s[%zu].image", path, i), img,
                    "must not have leading or trailing whitespace");
    }
}

void ks_validate_pod_spec(const json_t *spec, const char *path, bool is_pod, json_t *causes)
{
    char f[FLD];
    const json_t *tgp = json_object_get(spec, "terminationGracePeriodSeconds");
    json_int_t grace_v = json_integer_value(tgp);
    const json_int_t *grace = json_is_integer(tgp) ? &grace_v : NULL;
    if (!grace)
        required(causes, fld(f, "%s.terminationGracePeriodSeconds", path), NULL);
    json_t *vols = json_object();
    validate_volumes(json_object_get(spec, "volumes"), fld(f, "%s.volumes", path), vols, causes);
    json_t *names = json_object();
    validate_containers(json_object_get(spec, "containers"), vols, grace,
                        fld(f, "%s.containers", path), names, causes);
    validate_init_containers(json_object_get(spec, "initContainers"), vols, grace,
                             fld(f, "%s.initContainers", path), names, causes);
    json_decref(names);
    json_decref(vols);
    host_network_deps(spec, path, is_pod, causes);
    enum_member(str_or_empty(spec, "restartPolicy"), restart_policies,
                fld(f, "%s.restartPolicy", path), causes);
    enum_member(str_or_empty(spec, "dnsPolicy"), dns_policies, fld(f, "%s.dnsPolicy", path),
                causes);
    ks_validate_labels(json_object_get(spec, "nodeSelector"), fld(f, "%s.nodeSelector", path),
                       causes);
    ks_validate_pod_security_context(spec, path, causes);
    ks_validate_affinity(json_object_get(spec, "affinity"), fld(f, "%s.affinity", path), causes);
    dns_config(spec, fld(f, "%s.dnsConfig", path), causes);
    readiness_gates(json_object_get(spec, "readinessGates"), fld(f, "%s.readinessGates", path),
                    causes);
    scheduling_gates(json_object_get(spec, "schedulingGates"), fld(f, "%s.schedulingGates", path),
                     causes);
    ks_validate_topology_spread(json_object_get(spec, "topologySpreadConstraints"),
                                fld(f, "%s.topologySpreadConstraints", path), causes);
    ks_validate_windows_host_process(spec, path, causes);
    name_member(spec, "serviceAccountName", ks_msgs_dns1123_subdomain, path, causes);
    name_member(spec, "nodeName", ks_msgs_dns1123_subdomain, path, causes);
    const json_t *ads = json_object_get(spec, "activeDeadlineSeconds");
    if (json_is_integer(ads) &&
        (json_integer_value(ads) < 1 || json_integer_value(ads) > 2147483647))
        ks_invalid_int(causes, fld(f, "%s.activeDeadlineSeconds", path), json_integer_value(ads),
                       "must be between 1 and 2147483647, inclusive");
    name_member(spec, "hostname", ks_msgs_dns1123_label, path, causes);
    name_member(spec, "subdomain", ks_msgs_dns1123_label, path, causes);
    tolerations(json_object_get(spec, "tolerations"), fld(f, "%s.tolerations", path), causes);
    host_aliases(json_object_get(spec, "hostAliases"), fld(f, "%s.hostAliases", path), causes);
    name_member(spec, "priorityClassName", ks_msgs_dns1123_subdomain, path, causes);
    const char *rc = str_at(spec, "runtimeClassName");
    if (rc)
        ks_invalid_str(causes, fld(f, "%s.runtimeClassName", path), rc,
                       ks_msgs_dns1123_subdomain(rc));
    const char *pp = str_at(spec, "preemptionPolicy");
    if (pp) /* ValidatePreemptionPolicy */
        enum_member(pp, preemption_policies, fld(f, "%s.preemptionPolicy", path), causes);
    ks_validate_pod_os(spec, path, causes);
    if (is_pod) {
        images_only_for_pod(json_object_get(spec, "containers"), fld(f, "%s.containers", path),
                            causes);
        images_only_for_pod(json_object_get(spec, "initContainers"),
                            fld(f, "%s.initContainers", path), causes);
    }
}
