/* SPDX-License-Identifier: Apache-2.0 */
/* What the policy reader, the image rules and the renderer share inside the operator module. */
#pragma once

#include <stdbool.h>

#include "operator-policy.h"

/* The longest JSON path a message names ("spec.validator.plugin.env[12].name"). */
#define OP_PATH_MAX 256

/* An RFC 1123 subdomain: lower-case letters, digits, '-' and '.', alphanumeric at both ends, at
 * most 253 characters (names of ConfigMaps, Secrets, classes). */
bool op_valid_subdomain(const char *s);
/* An RFC 1123 label: as a subdomain without '.', at most 63 characters (namespaces). */
bool op_valid_label(const char *s);
/* A ConfigMap key: letters, digits, '-', '_' and '.', not "." or "..", at most 253 characters. */
bool op_valid_config_key(const char *s);
/* An absolute path with no ".." component and no control characters. */
bool op_valid_host_path(const char *s);
/* A DaemonSet maxUnavailable: a decimal integer or a decimal percentage ("1", "25%"). */
bool op_valid_max_unavailable(const char *s);

/*
 * NVIDIA's image rule for one set of image fields (see op_component_image()): key names the
 * section in messages ("spec.driver.manager"), env_name and fallback_env are read with getenv_fn
 * when every field is unset (either may be NULL). On success *ret is a new string.
 */
_wur_ int op_image_path(const struct op_component_spec *s, const char *key, const char *env_name,
                        const char *fallback_env, const char *(*getenv_fn)(const char *name),
                        char **ret, struct diag *d);
