/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Semantic versions as Kubernetes' CEL Semver library and DRA version attributes see them, as plain
 * C values (no CEL value layer): strict SemVer 2.0.0 parsing (MAJOR.MINOR.PATCH, no leading zeros,
 * dot-separated pre-release identifiers without leading zeros in numeric ones, build metadata of
 * [0-9A-Za-z-]), the tolerant "normalize" form of semver(s, true) (a leading "v" dropped, leading
 * zeros of each of the first three dot-separated parts dropped, a missing minor or patch filled
 * with 0 — but a shortened version may not carry pre-release or build data), and SemVer
 * precedence: numbers compare numerically, a version with a pre-release sorts before the same
 * version without, pre-release identifiers compare numerically when both are numeric, numeric
 * before alphanumeric, alphanumeric ones by bytes, and a shorter list of equal identifiers first.
 * Build metadata is ignored by comparison and equality.
 *
 * Error messages are Kubernetes' (blang/semver's), e.g. "No Major.Minor.Patch elements found".
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

/* A version. pre and build point into the parsed text (borrowed, not NUL-terminated): the text
 * must outlive the struct. */
struct cel_semver {
    uint64_t major, minor, patch;
    const char *pre; /* pre-release identifiers, dot-separated, without the '-'; pre_len 0: none */
    const char *build; /* build metadata without the '+'; build_len 0: none */
    uint32_t pre_len, build_len;
};

/* Parses s[0..len) strictly (normalize false) or tolerantly (true). -EINVAL with the message in d
 * when it is not a version, -ENOMEM. ret->pre and ret->build point into s. */
_wur_ int cel_semver_parse(const char *s, size_t len, bool normalize, struct diag *d,
                           struct cel_semver *ret);

/* -1, 0, 1 by SemVer precedence (build metadata ignored). */
int cel_semver_cmp(const struct cel_semver *a, const struct cel_semver *b);

/* Appends MAJOR.MINOR.PATCH[-PRE][+BUILD] (Kubernetes' String()) to out. 0 or -ENOMEM. */
struct strbuf;
_wur_ int cel_semver_format(const struct cel_semver *v, struct strbuf *out);
