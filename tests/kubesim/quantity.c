/* SPDX-License-Identifier: Apache-2.0 */
/*
 * resource.Quantity as apimachinery/pkg/api/resource/quantity.go reads
 * and prints it: ParseQuantity (parseQuantityString and the suffixer's
 * interpret: the 400 a decoder answers for a string it refuses), Cmp, Sign
 * and String (CanonicalizeBytes: a BinarySI amount below 1024 or with a
 * fraction prints as DecimalSI; decimals with an exponent that is a
 * multiple of 3).
 *
 * The value is kept exact as a decimal: a digit string without leading or
 * trailing zeros and a power of ten, rounded up to the nano as
 * ParseQuantity rounds. What Go caps (a BinarySI amount above 2^63-1) is
 * not capped here.
 */
#include "kubesim.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const err_format = "quantities must match the regular expression "
                                      "'^([+-]?[0-9.]+)([eEinumkKMGTP]*[-+]?[0-9]*)$'";
static const char *const err_numeric = "unable to parse numeric part of quantity";
static const char *const err_suffix = "unable to parse quantity's suffix";

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

/* Trailing zeros of q->digits into q->exp; leading zeros dropped. */
static void normalize(struct ks_quantity *q)
{
    size_t lead = strspn(q->digits, "0");
    memmove(q->digits, q->digits + lead, strlen(q->digits + lead) + 1);
    size_t n = strlen(q->digits);
    while (n > 0 && q->digits[n - 1] == '0') {
        q->digits[--n] = '\0';
        q->exp++;
    }
    if (n == 0) {
        q->exp = 0;
        q->neg = false;
    }
}

/* digits *= 2, in place (room for one more digit is the caller's). */
static void double_digits(char *d)
{
    size_t n = strlen(d);
    int carry = 0;
    for (size_t i = n; i-- > 0;) {
        int v = (d[i] - '0') * 2 + carry;
        d[i] = (char)('0' + v % 10);
        carry = v / 10;
    }
    if (carry) {
        memmove(d + 1, d, n + 1);
        d[0] = (char)('0' + carry);
    }
}

/* The suffixer's interpret: base 10 or 2 and its exponent, or false. */
static bool interpret(const char *s, size_t n, int *ret_base, int *ret_exp,
                      enum ks_quantity_format *ret_fmt)
{
    static const struct {
        const char *s;
        int base, exp;
        enum ks_quantity_format fmt;
    } table[] = {
        {"n", 10, -9, KS_QTY_DECIMAL_SI}, {"u", 10, -6, KS_QTY_DECIMAL_SI},
        {"m", 10, -3, KS_QTY_DECIMAL_SI}, {"", 10, 0, KS_QTY_DECIMAL_SI},
        {"k", 10, 3, KS_QTY_DECIMAL_SI},  {"M", 10, 6, KS_QTY_DECIMAL_SI},
        {"G", 10, 9, KS_QTY_DECIMAL_SI},  {"T", 10, 12, KS_QTY_DECIMAL_SI},
        {"P", 10, 15, KS_QTY_DECIMAL_SI}, {"E", 10, 18, KS_QTY_DECIMAL_SI},
        {"Ki", 2, 10, KS_QTY_BINARY_SI},  {"Mi", 2, 20, KS_QTY_BINARY_SI},
        {"Gi", 2, 30, KS_QTY_BINARY_SI},  {"Ti", 2, 40, KS_QTY_BINARY_SI},
        {"Pi", 2, 50, KS_QTY_BINARY_SI},  {"Ei", 2, 60, KS_QTY_BINARY_SI},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        if (strlen(table[i].s) == n && strncmp(table[i].s, s, n) == 0) {
            *ret_base = table[i].base;
            *ret_exp = table[i].exp;
            *ret_fmt = table[i].fmt;
            return true;
        }
    }
    if (n < 2 || (s[0] != 'e' && s[0] != 'E'))
        return false;
    /* strconv.ParseInt(s[1:], 10, 64) */
    size_t i = 1;
    if (s[i] == '+' || s[i] == '-')
        i++;
    if (i == n || i + 18 < n)
        return false;
    for (size_t j = i; j < n; j++)
        if (!is_digit(s[j]))
            return false;
    char buf[32];
    snprintf(buf, sizeof(buf), "%.*s", (int)(n - 1), s + 1);
    *ret_base = 10;
    *ret_exp = (int)strtol(buf, NULL, 10);
    *ret_fmt = KS_QTY_DECIMAL_EXPONENT;
    return true;
}

int ks_quantity_parse(const char *str, struct ks_quantity *ret, const char **ret_err)
{
    struct ks_quantity q = {.fmt = KS_QTY_DECIMAL_SI};
    size_t end = strlen(str), pos = 0;
    *ret_err = NULL;
    if (end == 0) {
        *ret_err = err_format;
        return -EINVAL;
    }
    if (str[0] == '-' || str[0] == '+') {
        q.neg = str[0] == '-';
        pos++;
    }
    pos += strspn(str + pos, "0");
    size_t num = pos, num_len = strspn(str + pos, "0123456789");
    pos += num_len;
    size_t denom = pos, denom_len = 0;
    bool has_denom = pos < end && str[pos] == '.';
    if (has_denom) {
        denom = ++pos;
        denom_len = strspn(str + pos, "0123456789");
        pos += denom_len;
    }
    size_t suffix = pos;
    pos += strspn(str + pos, "eEinumkKMGTP");
    if (pos < end && (str[pos] == '-' || str[pos] == '+'))
        pos++;
    pos += strspn(str + pos, "0123456789");
    if (pos < end) {
        *ret_err = err_format;
        return -EINVAL;
    }
    int base, exp;
    if (!interpret(str + suffix, end - suffix, &base, &exp, &q.fmt)) {
        *ret_err = err_suffix;
        return -EINVAL;
    }
    /* the fast path's strconv.ParseInt(num + denom) of an empty string */
    if (num_len + denom_len == 0 && has_denom) {
        *ret_err = err_numeric;
        return -EINVAL;
    }
    if (num_len + denom_len + 24 > sizeof(q.digits)) {
        *ret_err = err_numeric; /* longer than kubesim holds; Go takes it */
        return -EINVAL;
    }
    snprintf(q.digits, sizeof(q.digits), "%.*s%.*s", (int)num_len, str + num, (int)denom_len,
             str + denom);
    q.exp = -(int)denom_len;
    if (base == 10) {
        q.exp += exp;
    } else {
        for (int i = 0; i < exp; i++)
            double_digits(q.digits);
    }
    normalize(&q);
    /* rounded up (away from zero) to the nano */
    if (q.digits[0] && q.exp < -9) {
        size_t drop = (size_t)(-9 - q.exp), n = strlen(q.digits);
        if (drop >= n) {
            snprintf(q.digits, sizeof(q.digits), "1");
        } else {
            q.digits[n - drop] = '\0';
            size_t i = n - drop;
            while (i > 0 && q.digits[i - 1] == '9')
                q.digits[--i] = '0';
            if (i == 0) {
                memmove(q.digits + 1, q.digits, strlen(q.digits) + 1);
                q.digits[0] = '1';
            } else {
                q.digits[i - 1]++;
            }
        }
        q.exp = -9;
        normalize(&q);
    }
    *ret = q;
    return 0;
}

int ks_quantity_from_json(const json_t *v, struct ks_quantity *ret, const char **ret_err)
{
    char buf[64];
    if (json_is_string(v)) {
        /* strings.TrimSpace of what is between the quotes */
        const char *s = json_string_value(v);
        size_t n = strlen(s);
        while (n > 0 && strchr(" \t\n\r\v\f", s[n - 1]))
            n--;
        while (n > 0 && strchr(" \t\n\r\v\f", *s)) {
            s++;
            n--;
        }
        char *t = ks_printf("%.*s", (int)n, s);
        int rc = ks_quantity_parse(t, ret, ret_err);
        free(t);
        return rc;
    }
    if (json_is_integer(v)) {
        snprintf(buf, sizeof(buf), "%" JSON_INTEGER_FORMAT, json_integer_value(v));
    } else if (json_is_real(v)) {
        /* the shortest text that reads back as the number */
        for (int prec = 1; prec <= 17; prec++) {
            snprintf(buf, sizeof(buf), "%.*g", prec, json_real_value(v));
            if (strtod(buf, NULL) == json_real_value(v))
                break;
        }
    } else {
        *ret_err = err_format;
        return -EINVAL;
    }
    return ks_quantity_parse(buf, ret, ret_err);
}

int ks_quantity_sign(const struct ks_quantity *q)
{
    return !q->digits[0] ? 0 : q->neg ? -1 : 1;
}

int ks_quantity_cmp(const struct ks_quantity *a, const struct ks_quantity *b)
{
    int sa = ks_quantity_sign(a), sb = ks_quantity_sign(b);
    if (sa != sb || sa == 0)
        return sa < sb ? -1 : sa > sb ? 1 : 0;
    /* same sign: compare the magnitudes, then flip for negatives */
    long ta = (long)strlen(a->digits) + a->exp, tb = (long)strlen(b->digits) + b->exp;
    int mag = 0;
    if (ta != tb) {
        mag = ta < tb ? -1 : 1;
    } else {
        size_t na = strlen(a->digits), nb = strlen(b->digits);
        for (size_t i = 0; i < na || i < nb; i++) {
            char ca = i < na ? a->digits[i] : '0', cb = i < nb ? b->digits[i] : '0';
            if (ca != cb) {
                mag = ca < cb ? -1 : 1;
                break;
            }
        }
    }
    return sa < 0 ? -mag : mag;
}

/* d (decimal digits) /= div when it divides d; false (d unchanged) when not. */
static bool divide_exact(char *d, unsigned div)
{
    char out[sizeof(((struct ks_quantity *)0)->digits) + 64];
    unsigned long rem = 0;
    size_t o = 0;
    for (const char *p = d; *p; p++) {
        rem = rem * 10 + (unsigned long)(*p - '0');
        if (o > 0 || rem / div > 0)
            out[o++] = (char)('0' + (int)(rem / div));
        rem %= div;
    }
    if (rem != 0 || o == 0)
        return false;
    out[o] = '\0';
    memcpy(d, out, o + 1);
    return true;
}

char *ks_quantity_string(const struct ks_quantity *q)
{
    if (!q->digits[0])
        return ks_strdup("0");
    const char *sign = q->neg ? "-" : "";
    static const char *const bin[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei"};
    static const struct ks_quantity k1024 = {.digits = "1024"};
    struct ks_quantity mag = *q;
    mag.neg = false;
    if (q->fmt == KS_QTY_BINARY_SI && ks_quantity_cmp(&mag, &k1024) >= 0 && q->exp >= 0 &&
        strlen(q->digits) + (size_t)q->exp < sizeof(q->digits)) {
        /* an integer: removeFactors(value, 1024) */
        char n[sizeof(q->digits) + 64];
        snprintf(n, sizeof(n), "%s%0*d", q->digits, q->exp, 0);
        n[strlen(q->digits) + (size_t)q->exp] = '\0';
        size_t k = 0;
        while (k < 6 && divide_exact(n, 1024))
            k++;
        return ks_printf("%s%s%s", sign, n, bin[k]);
    }
    /* AsCanonicalBytes: the exponent down to a multiple of 3 */
    int exp = q->exp, pad = ((exp % 3) + 3) % 3;
    exp -= pad;
    const char *suffix = "";
    char ebuf[16];
    if (q->fmt == KS_QTY_DECIMAL_EXPONENT) {
        if (exp != 0) {
            snprintf(ebuf, sizeof(ebuf), "e%d", exp);
            suffix = ebuf;
        }
    } else {
        static const char *const dec[] = {"n", "u", "m", "", "k", "M", "G", "T", "P", "E"};
        /* an exponent outside the table prints no suffix, as Go's does */
        if (exp >= -9 && exp <= 18)
            suffix = dec[(exp + 9) / 3];
    }
    return ks_printf("%s%s%.*s%s", sign, q->digits, pad, "00", suffix);
}
