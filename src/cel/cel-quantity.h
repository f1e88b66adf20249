/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Kubernetes resource quantities (k8s.io/apimachinery resource.Quantity) as plain C values, with no
 * dependency on the CEL value layer: the CEL Quantity library (cel-lib-quantity.c), the DRA device
 * variable (cel-dra.c) and the allocator's capacity arithmetic all use this.
 *
 * What Kubernetes does, and therefore what this does:
 *  - Grammar: [+-] digits [. digits] suffix, where the suffix is a binary one (Ki Mi Gi Ti Pi Ei),
 *    a decimal one (n u m "" k M G T P E) or a decimal exponent (e or E followed by a signed
 *    integer). Kubernetes' scanner also accepts a bare sign, a bare "." and "1." (all zero or
 *    one); so does this.
 *  - The value is exact. Kubernetes keeps it either as an int64 mantissa with a base-10 scale (the
 *    "fast path": few digits, scale >= -9, no overflow) or as an arbitrary-precision decimal that
 *    is rounded up (away from zero) to a multiple of 10^-9, and, for binary suffixes, capped at
 *    2^63 - 1. Which form a value has is observable: isInteger()/asInteger() are true only for the
 *    int64 form with a non-negative scale (so "1.0" and "1.5Gi" are not integers, "50k" is), and
 *    asApproximateFloat() multiplies the mantissa by a power of ten. The struct keeps the same
 *    distinction (`dec`) so all of that comes out the same.
 *  - The format (decimal SI, binary SI, decimal exponent) comes from the suffix; a binary value
 *    below 1 in magnitude becomes decimal SI. Arithmetic keeps the receiver's format unless the
 *    receiver is zero, in which case it takes the other operand's.
 *  - The canonical string: zero is "0"; binary SI values that are integers of magnitude >= 1024
 *    print as n * 1024^k with the largest k ("1536Mi", "1Gi"); other binary values print as decimal
 *    SI; decimal values print the mantissa without trailing zeros and the exponent lowered to a
 *    multiple of 3, with the SI suffix or "e<exp>" ("500m", "1", "1500M", "12e6"). A parsed string
 *    that is already in canonical shape (fast path, scale a multiple of 3, no "000" at the end, for
 *    binary a value not divisible by 8) is printed exactly as written, sign and leading zeros
 *    included, as Kubernetes does ("+1Ki", "0100", "1.500").
 *
 * Where this differs (all far outside real quantities; each is an error or a different spelling of
 * the same value, never a different value):
 *  - Arbitrary precision is 38 significant decimal digits (a 128-bit mantissa and a 32-bit decimal
 *    exponent limited to +-10^9). Inputs or sums that need more fail with -ERANGE, "quantity out of
 *    range", where Kubernetes would carry on with a bigger number.
 *  - Decimal SI values of 10^21 and above print as "<n>e<exp>" (Kubernetes' table stops at E and
 *    prints the bare mantissa, a different number); binary values beyond 1024^6 stop at Ei.
 *  - The kept input spelling is limited to CEL_QUANTITY_TEXT_MAX characters (longer inputs, which
 *    need dozens of leading zeros, print canonically).
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

enum cel_quantity_format {
    CEL_QUANTITY_DECIMAL_SI = 0, /* 12M, 500m, 1 */
    CEL_QUANTITY_BINARY_SI,      /* 12Mi */
    CEL_QUANTITY_DECIMAL_EXP,    /* 12e6 */
};

/* Longest input spelling a quantity keeps for printing (see above); canonical strings are shorter
 * (sign, 39 digits, 2 padding zeros, "e-1000000000"). */
#define CEL_QUANTITY_TEXT_MAX 255
/* A buffer that holds any quantity's string and its NUL. */
#define CEL_QUANTITY_STR_MAX (CEL_QUANTITY_TEXT_MAX + 1)

/*
 * A quantity: |value| = mag * 10^exp. When dec is false this is Kubernetes' int64 form and (mag,
 * exp) are exactly its mantissa and scale (mag <= 2^63); when dec is true the value is exact but
 * (mag, exp) may be any equal representation, and dec_exp is the exponent Kubernetes' decimal would
 * carry (used only by cel_quantity_approx_double). text, when not NULL, is the input spelling to
 * print (borrowed: see cel_quantity_parse). A zeroed struct is the quantity 0.
 */
struct cel_quantity {
    unsigned __int128 mag;
    int32_t exp;
    int32_t dec_exp;
    uint8_t format; /* enum cel_quantity_format */
    bool neg;       /* never set on zero */
    bool dec;
    uint8_t text_len;
    const char *text;
};

/*
 * Parses s (len bytes, not NUL-terminated necessarily) as Kubernetes' ParseQuantity does. On
 * success *ret may point into s (ret->text): s must outlive the result, or call
 * cel_quantity_drop_text(). Errors (d gets Kubernetes' message): -EINVAL for the grammar
 * ("quantities must match the regular expression ..."), an unknown suffix ("unable to parse
 * quantity's suffix") or an unparseable number; -ERANGE past the precision limits above.
 */
_wur_ int cel_quantity_parse(const char *s, size_t len, struct diag *d, struct cel_quantity *ret);

/* Forgets the kept input spelling, so the quantity no longer borrows its input; it then prints in
 * canonical form. */
void cel_quantity_drop_text(struct cel_quantity *q);

/* The quantity v (Kubernetes' NewQuantity(v, DecimalSI)). */
struct cel_quantity cel_quantity_from_int(int64_t v);

/* -1, 0 or 1 as a < b, a == b, a > b, by exact value. */
int cel_quantity_cmp(const struct cel_quantity *a, const struct cel_quantity *b);

/* -1, 0 or 1. */
int cel_quantity_sign(const struct cel_quantity *q);

/* a + b and a - b with Kubernetes' Add/Sub rules for form and format. -ERANGE (d says "quantity out
 * of range") when the exact result exceeds the precision limits. */
_wur_ int cel_quantity_add(const struct cel_quantity *a, const struct cel_quantity *b,
                           struct diag *d, struct cel_quantity *ret);
_wur_ int cel_quantity_sub(const struct cel_quantity *a, const struct cel_quantity *b,
                           struct diag *d, struct cel_quantity *ret);

/* Kubernetes' AsInt64: false unless the quantity is in the int64 form with a non-negative scale and
 * the value fits in an int64. */
bool cel_quantity_as_int64(const struct cel_quantity *q, int64_t *ret);

/* Kubernetes' AsApproximateFloat64: the mantissa as a double times a power of ten, rounded the same
 * way (so the same double comes out). */
double cel_quantity_approx_double(const struct cel_quantity *q);

/* Writes the string Kubernetes' String() gives (see above) and a NUL into buf, which has room for
 * CEL_QUANTITY_STR_MAX bytes; returns the string's length. */
size_t cel_quantity_format(const struct cel_quantity *q, char buf[static CEL_QUANTITY_STR_MAX]);
