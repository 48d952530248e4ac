/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Certificate generator on mbedTLS (x509write, pk, ctr_drbg): a fresh
 * ECDSA P-256 certificate authority (basicConstraints CA:TRUE, keyUsage
 * keyCertSign + cRLSign) and a serving certificate signed by it (DNS and
 * IP subjectAltNames, extendedKeyUsage serverAuth, keyUsage
 * digitalSignature, random 127-bit serial, SHA-256 signatures), all as PEM.
 * Also writes a pair into a directory in the cert-manager Secret layout
 * (tls.crt, tls.key, ca.crt; each through a temporary file and rename, the
 * key 0600), and checks whether a directory already holds a usable pair.
 *
 * Generic: nothing here knows about kop's service names. Used by
 * --self-signed-certs (operator/selfsigned) and by kubesim.
 *
 * Thread-safety: every function may be called from any thread; each call
 * seeds its own DRBG and shares no state.
 */
#ifndef KOP_CERTGEN_H
#define KOP_CERTGEN_H

#include <stddef.h>
#include <stdint.h>

struct kop_certgen_options {
    const char *ca_common_name;      /* NULL: "selfsigned-ca" */
    const char *common_name;         /* leaf subject CN; NULL: first DNS name, else "localhost" */
    const char *organization;        /* subject O of both; NULL: none */
    const char *const *dns_names;    /* NULL-terminated; may be NULL */
    const char *const *ip_addresses; /* NULL-terminated, "127.0.0.1" / "::1"; may be NULL */
    int64_t ca_validity_s;           /* 0: 10 years */
    int64_t validity_s;              /* leaf; 0: 1 year (capped at the CA's) */
    int64_t backdate_s;              /* notBefore = now - backdate; 0: 1 hour, <0: none */
    int64_t now_s;                   /* Unix seconds; 0: the current time */
};

/* A generated CA and serving pair, PEM, NUL-terminated, malloc'd. */
struct kop_certgen_pair {
    char *ca_pem;   /* the CA certificate (the caBundle) */
    char *cert_pem; /* the serving certificate (leaf only) */
    char *key_pem;  /* the serving key (SEC1 "EC PRIVATE KEY") */
};

/*
 * Generate a CA and a serving certificate signed by it. The CA key is
 * not returned: it exists only during the call, so nothing else can ever
 * be signed by that CA. At least one DNS name or IP address is required.
 * Returns 0, -EINVAL (no names, a name that is empty or too long, an IP
 * that does not parse, bad validity), -ENOMEM, -EIO (mbedTLS failed).
 * *ret filled on success (release with kop_certgen_pair_cleanup).
 */
int kop_certgen_generate(const struct kop_certgen_options *opts, struct kop_certgen_pair *ret);

/* Free the three strings (the key is wiped first) and zero the struct.
 * NULL-safe. */
void kop_certgen_pair_cleanup(struct kop_certgen_pair *pair);

/*
 * Write dir/tls.crt (0644), dir/tls.key (0600) and dir/ca.crt (0644), each
 * to a temporary file in dir that is fsync'd and renamed over the target,
 * so a reader sees the old file or the new one, never a partial one (a
 * watcher may still see a new tls.crt next to the old tls.key for a moment:
 * write order is ca.crt, tls.key, tls.crt). dir is created (0755, parents
 * too) when missing. ca_pem may be NULL (no ca.crt written).
 * Returns 0, -EINVAL, or the errno of the failing call.
 */
int kop_certgen_write_dir(const char *dir, const struct kop_certgen_pair *pair);

/* Read dir/tls.crt, dir/tls.key and dir/ca.crt into *ret (any of them may
 * be large; at most 1 MiB each). Returns 0, -ENOENT (a file is missing),
 * -EFBIG, -ENOMEM or the errno of the read. */
int kop_certgen_read_dir(const char *dir, struct kop_certgen_pair *ret);

struct kop_certgen_check {
    const char *const *dns_names; /* each must be matched by the leaf (SAN, wildcard ok) */
    int64_t min_remaining_s;      /* leaf and CA must stay valid this long after now */
    int64_t now_s;                /* Unix seconds; 0: the current time */
};

/*
 * Is pair usable: the three parts parse, the key matches the leaf, the CA
 * (ca_pem) verifies the leaf, every DNS name is covered, and both
 * certificates are valid from now until now + min_remaining_s.
 * Returns 0 (usable), -ENOENT (a part is NULL or empty), -EBADMSG (does not
 * parse, key mismatch, chain does not verify), -EADDRNOTAVAIL (a name is
 * not covered), -EKEYEXPIRED (expired, expiring within min_remaining_s, or
 * not yet valid), -ENOMEM.
 */
int kop_certgen_check_pair(const struct kop_certgen_pair *pair,
                           const struct kop_certgen_check *check);

#endif /* KOP_CERTGEN_H */
