/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The name formats of resource.k8s.io/v1 as the API server checks them: DNS labels and subdomains
 * (RFC 1123, lower case), C identifiers, the DRA qualified names of attributes and capacities,
 * pool names and label keys (taint and toleration keys). Pure functions over NUL-terminated
 * strings, kept apart from the decoder so they can be tested on their own.
 *
 * Each checker returns NULL when the name is valid and otherwise a static sentence saying why not,
 * in the API server's wording where it has one; the decoder puts it after the object, the field
 * and the offending value.
 */
#pragma once

#include <stddef.h>

/* Longest names of each kind. */
#define DALLOC_NAME_LABEL_MAX 63      /* DNS label */
#define DALLOC_NAME_SUBDOMAIN_MAX 253 /* DNS subdomain, pool name, label key prefix */
#define DALLOC_NAME_DRIVER_MAX 63     /* driver names and the domain of a qualified name */
#define DALLOC_NAME_ID_MAX 32         /* the C identifier of a qualified name */

/* A DNS label: [a-z0-9]([-a-z0-9]*[a-z0-9])?, at most 63 characters. Device, counter set, counter,
 * request and sub-request names; namespaces. */
const char *dalloc_name_dns_label(const char *s);

/* A DNS subdomain: DNS labels joined by '.', at most 253 characters (the API server limits only
 * the whole, not each label). metadata.name of slices, classes and claims; deviceClassName. */
const char *dalloc_name_dns_subdomain(const char *s);

/* A driver name: a DNS subdomain of at most 63 characters. ResourceSlice spec.driver, the driver
 * of opaque configs, the domain part of qualified names. */
const char *dalloc_name_driver(const char *s);

/* A C identifier [A-Za-z_][A-Za-z0-9_]* of at most 32 characters. */
const char *dalloc_name_c_identifier(const char *s);

/* A QualifiedName: a C identifier, or <driver name>/<C identifier>. Attribute and capacity names,
 * capacity requests. */
const char *dalloc_name_qualified(const char *s);

/* A FullyQualifiedName: <driver name>/<C identifier>, the domain required. matchAttribute and
 * distinctAttribute of constraints. */
const char *dalloc_name_fully_qualified(const char *s);

/* A pool name: one or more DNS subdomains joined by '/', at most 253 characters in all. */
const char *dalloc_name_pool(const char *s);

/* A label key: [<DNS subdomain>/]<name>, the name at most 63 characters of alphanumerics, '-', '_'
 * and '.', starting and ending with an alphanumeric. Taint and toleration keys. */
const char *dalloc_name_label_key(const char *s);
