/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA `device` variable (Kubernetes' kubernetes.DRADevice) built from one ResourceSlice device
 * (resource.k8s.io/v1 Device): a CEL map with
 *
 *     driver                    string: the slice's driver
 *     attributes                map(domain, map(id, int | bool | string | kubernetes.Semver))
 *     capacity                  map(domain, map(id, kubernetes.Quantity))
 *     allowMultipleAllocations  bool (false when unset)
 *
 * An attribute or capacity name "domain/id" is filed under its domain, a bare "id" under the
 * driver's name. Indexing attributes or capacity with an unknown domain gives an empty map (`in`
 * and has() still say the domain is absent); an unknown id inside a domain is the evaluation error
 * "no such key: <id>" — both as in Kubernetes.
 *
 * Two ways in: cel_dra_device_value() from an in-memory description (the allocator's: nothing is
 * parsed and nothing is copied — the value borrows the description's strings and objects), and
 * cel_dra_device_load*() from a YAML or JSON document holding one device entry (the CLI's
 * --device FILE), which validates it with the API's limits first.
 */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-doc.h"
#include "cel-k8s.h"
#include "cel-value.h"

/* resource.k8s.io/v1 validation limits for one device. */
#define CEL_DRA_MAX_ATTRIBUTES 32 /* attributes and capacities together */
#define CEL_DRA_MAX_ID_LEN 32
#define CEL_DRA_MAX_DOMAIN_LEN 63
#define CEL_DRA_MAX_NAME_LEN 63
#define CEL_DRA_MAX_STRING_LEN 64 /* string and version attribute values */

enum cel_dra_attr_kind {
    CEL_DRA_ATTR_NONE = 0, /* no value set: every evaluation fails, as in Kubernetes */
    CEL_DRA_ATTR_INT,
    CEL_DRA_ATTR_BOOL,
    CEL_DRA_ATTR_STRING,
    CEL_DRA_ATTR_VERSION,
};

struct cel_dra_attr {
    const char *name; /* "id" or "domain/id"; not NUL-terminated */
    size_t name_len;
    enum cel_dra_attr_kind kind;
    union {
        int64_t i;
        bool b;
        struct {
            const char *s;
            size_t len;
        } str;
        const struct cel_semver_obj *version; /* see cel_dra_parse_version() */
    };
};

struct cel_dra_capacity {
    const char *name;
    size_t name_len;
    const struct cel_quantity_obj *value;
};

/* A device as the allocator holds it. Everything is borrowed by the value built from it. */
struct cel_dra_device {
    const char *driver;
    size_t driver_len;
    const struct cel_dra_attr *attrs;
    size_t n_attrs;
    const struct cel_dra_capacity *caps;
    size_t n_caps;
    bool allow_multiple_allocations;
};

/*
 * Builds the `device` value for dev: the maps are allocated in r (a few hundred bytes for a typical
 * GPU), the strings and objects are dev's, so dev's storage must outlive the value; build once per
 * device and evaluate any number of selectors against it. Errors: -EDOM when Kubernetes would fail
 * every evaluation against this device (d: "attribute <name>: unsupported attribute value"),
 * -EEXIST for two attributes (or capacities) with the same domain and id, -ENOMEM.
 */
_wur_ int cel_dra_device_value(struct cel_region *r, const struct cel_dra_device *dev,
                               struct diag *d, struct cel_value *ret);

/* Parses a version attribute strictly into *o (which then borrows s). -EDOM with d = "parse
 * semantic version: <reason>" when s is not a SemVer 2.0.0 version. */
_wur_ int cel_dra_parse_version(const char *s, size_t len, struct cel_semver_obj *o,
                                struct diag *d);

/*
 * Loads the device entry `entry` of doc (a Device object: name, attributes, capacity,
 * allowMultipleAllocations; the other Device fields are accepted and ignored) for driver (NULL:
 * the entry's own "driver" field — not a Device field, gpuplane's way to say it in a file — else
 * ""). Everything the value needs is copied into r, so doc may be freed afterwards. Errors:
 * -EINVAL with "file:line:col: message" for what the API server would reject (unknown fields, bad
 * names, limits, two values in one attribute, a bad quantity), -EDOM as for cel_dra_device_value()
 * and for a version attribute that is not SemVer ("parse semantic version: ..."; the entry is read
 * to the end first, so an -EINVAL anywhere wins), -ENOMEM.
 */
_wur_ int cel_dra_device_load(struct cel_region *r, const struct doc *doc, const json_t *entry,
                              const char *driver, struct diag *d, struct cel_value *ret);
/* The same for a file holding exactly one document, the device entry. -ENOENT etc. from reading
 * the file. */
_wur_ int cel_dra_device_load_file(struct cel_region *r, const char *path, const char *driver,
                                   struct diag *d, struct cel_value *ret);
