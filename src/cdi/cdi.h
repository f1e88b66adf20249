/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Container Device Interface (CDI) specs: the files that tell a container runtime (containerd,
 * CRI-O, podman) what to do to a container when it is handed a device named "vendor/class=name".
 * This module holds a spec in memory, checks it the way the reference library
 * (cncf-tags/container-device-interface) checks what it loads, writes the lowest cdiVersion that
 * supports what the spec uses (so older runtimes still accept it), serialises it with a stable key
 * order, and writes it atomically into a spec directory. It also knows the names Kubernetes passes
 * around: fully-qualified device names, and the "cdi.k8s.io/..." annotations a device plugin
 * returns.
 *
 * Ownership: a spec owns everything added to it; every add function copies its arguments. The
 * structs are public so callers can read a spec, but they change it only through the functions
 * below. Functions return 0 or a negative errno; those that take a struct diag say why in it.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

#define CDI_SPEC_DIR_STATIC "/etc/cdi"
#define CDI_SPEC_DIR_DYNAMIC "/var/run/cdi"
#define CDI_ANNOTATION_PREFIX "cdi.k8s.io/"
#define CDI_CLASS_MAX 63
#define CDI_ANNOTATION_NAME_MAX 63
/* The newest cdiVersion this module knows. */
#define CDI_VERSION_LATEST "1.1.0"
/* Entries per list of a spec (devices, mounts, ...): a spec built from a directory listing cannot
 * grow without bound. */
#define CDI_LIST_MAX 65536

enum cdi_format {
    CDI_FORMAT_JSON,
    CDI_FORMAT_YAML,
};

/* The optional numbers of a device node that are present (cdi_device_node.set). */
enum {
    CDI_NODE_MAJOR = 1 << 0,
    CDI_NODE_MINOR = 1 << 1,
    CDI_NODE_FILE_MODE = 1 << 2,
    CDI_NODE_UID = 1 << 3,
    CDI_NODE_GID = 1 << 4,
};

struct cdi_device_node {
    const char *path;        /* in the container; required, absolute */
    const char *host_path;   /* NULL: the same as path; needs cdiVersion 0.5.0 */
    const char *type;        /* "c", "b", "u", "p", or NULL: the runtime stats the host node */
    const char *permissions; /* cgroup access, any of "rwm", or "none"; NULL: "rwm" */
    int64_t major;
    int64_t minor;
    uint32_t file_mode;
    uint32_t uid;
    uint32_t gid;
    unsigned set; /* CDI_NODE_* bits of the numbers above that are present */
};

struct cdi_mount {
    char *host_path;
    char *container_path;
    char *type;     /* NULL when absent; needs cdiVersion 0.4.0 */
    char **options; /* NULL-terminated, never NULL */
};

struct cdi_hook {
    char *hook_name;  /* createRuntime, createContainer, startContainer, poststart, poststop,
                         prestart */
    char *path;       /* absolute */
    char **args;      /* NULL-terminated, never NULL; args[0] is the program name by convention */
    char **env;       /* NULL-terminated, never NULL */
    unsigned timeout; /* seconds; 0 = not set */
};

struct cdi_annotation {
    char *key;
    char *value;
};

/* What a runtime does to a container: the containerEdits object. */
struct cdi_edits {
    struct vec env;             /* char *, "NAME=value" */
    struct vec device_nodes;    /* struct cdi_device_node, strings owned */
    struct vec mounts;          /* struct cdi_mount */
    struct vec hooks;           /* struct cdi_hook */
    struct vec additional_gids; /* uint32_t; needs cdiVersion 0.7.0 */
};

struct cdi_device {
    char *name;
    struct vec annotations; /* struct cdi_annotation; needs cdiVersion 0.6.0 */
    struct cdi_edits edits;
};

struct cdi_spec {
    char *version; /* the cdiVersion to declare; NULL: the minimum the content needs */
    char *kind;
    char *vendor; /* the two halves of kind */
    char *class;
    struct vec annotations; /* struct cdi_annotation */
    struct vec devices;     /* struct cdi_device *, in the order added */
    struct cdi_edits edits; /* spec-level edits, applied once when any device is used */
};

/* ---- naming rules (cdi.md §4); all ASCII, as the reference parser is ---- */

/* "nvidia.com": starts with a letter, ends with a letter or digit, letters, digits, '_', '-', '.'
 * in between. */
bool cdi_valid_vendor(const char *vendor);
/* "gpu": the vendor's character rules, at most CDI_CLASS_MAX characters. */
bool cdi_valid_class(const char *class);
/* "vendor/class" with exactly one '/'. */
bool cdi_valid_kind(const char *kind);
/* A device name from anywhere (a config file, a claim, a request): starts and ends with a letter
 * or digit, letters, digits, '_', '-', '.', ':' in between. */
bool cdi_valid_device_name(const char *name);
/* "vendor/class=name". */
bool cdi_valid_qualified_name(const char *name);

/* Splits "vendor/class=name" (at the first '=', then the first '/') and checks each part. Each
 * ret_ pointer may be NULL; the caller frees what it asked for. -EINVAL with the reason in d. */
_wur_ int cdi_parse_qualified_name(const char *name, struct diag *d, char **ret_vendor,
                                   char **ret_class, char **ret_device);
/* "kind=device" after checking both. The caller frees *ret. */
_wur_ int cdi_qualified_name(const char *kind, const char *device, struct diag *d, char **ret);

/* ---- Kubernetes annotations (cdi.md §6) ---- */

/*
 * The annotation key a device plugin returns with CDI devices: prefix (NULL: "cdi.k8s.io/") +
 * plugin + "_" + device_id with every '/' replaced by '_'. The part after the prefix must be at
 * most 63 characters, start and end with a letter or digit, and hold only letters, digits, '_',
 * '-', '.'. The caller frees *ret.
 */
_wur_ int cdi_annotation_key(const char *prefix, const char *plugin, const char *device_id,
                             struct diag *d, char **ret);
/* cdi_annotation_key with a random UUID v4 as the device id, as NVIDIA's device plugin does (a
 * container may carry several CDI annotations; each key must be unique). */
_wur_ int cdi_annotation_key_random(const char *prefix, const char *plugin, struct diag *d,
                                    char **ret);
/* The annotation value: the n qualified names (each checked) joined with ','. The same names go
 * unchanged into the CRI CDIDevices list (ContainerAllocateResponse.cdi_devices). The caller
 * frees *ret. */
_wur_ int cdi_annotation_value(const char *const *names, size_t n, struct diag *d, char **ret);

/* ---- versions (cdi.md §2) ---- */

/* One of the cdiVersion values loaders accept ("0.3.0" ... "1.1.0", a leading 'v' tolerated). */
bool cdi_valid_version(const char *version);
/* <0, 0, >0 as a is older, the same, newer than b; both must be valid versions. */
int cdi_version_compare(const char *a, const char *b);
/* The lowest cdiVersion whose loaders accept every feature spec uses (a static string). */
const char *cdi_spec_min_version(const struct cdi_spec *spec);
/* The cdiVersion a spec declares when written: its set version, else the minimum. */
const char *cdi_spec_version(const struct cdi_spec *spec);

/* ---- the model ---- */

/* An empty spec of the given kind ("nvidia.com/gpu"). -EINVAL (reason in d) for a bad kind. */
_wur_ int cdi_spec_new(const char *kind, struct diag *d, struct cdi_spec **ret);
struct cdi_spec *cdi_spec_free(struct cdi_spec *spec);
DEFINE_POINTER_CLEANUP(struct cdi_spec, cdi_spec_free)

/* Declares a cdiVersion (NULL: the minimum, the default). -EINVAL for an unknown version; one
 * lower than the content needs is caught by cdi_spec_validate. */
_wur_ int cdi_spec_set_version(struct cdi_spec *spec, const char *version, struct diag *d);
/* Adds or replaces an annotation (key as Kubernetes accepts: [prefix/]name). */
_wur_ int cdi_spec_set_annotation(struct cdi_spec *spec, const char *key, const char *value,
                                  struct diag *d);
/* Adds a device with empty edits. -EINVAL for a bad name, -EEXIST for a name already in the spec.
 * *ret (may be NULL) is borrowed: the spec owns the device and it stays valid until the spec is
 * freed. */
_wur_ int cdi_spec_add_device(struct cdi_spec *spec, const char *name, struct diag *d,
                              struct cdi_device **ret);
/* The device of that name, or NULL. */
struct cdi_device *cdi_spec_find_device(const struct cdi_spec *spec, const char *name);
_wur_ int cdi_device_set_annotation(struct cdi_device *dev, const char *key, const char *value,
                                    struct diag *d);

void cdi_edits_init(struct cdi_edits *e);
void cdi_edits_release(struct cdi_edits *e);
bool cdi_edits_is_empty(const struct cdi_edits *e);
/* Appends "name=value". */
_wur_ int cdi_edits_add_env(struct cdi_edits *e, const char *name, const char *value);
/* Appends a copy of *node; a node with the same container path as one already there is skipped
 * when identical and -EEXIST otherwise. */
_wur_ int cdi_edits_add_device_node(struct cdi_edits *e, const struct cdi_device_node *node);
/* Appends a mount; options is NULL-terminated (NULL: none), type may be NULL. A second mount at
 * the same container path is skipped when identical and -EEXIST otherwise. */
_wur_ int cdi_edits_add_mount(struct cdi_edits *e, const char *host_path,
                              const char *container_path, const char *type,
                              const char *const *options);
/* Appends a hook; args and env are NULL-terminated (NULL: none); timeout 0 = not set. */
_wur_ int cdi_edits_add_hook(struct cdi_edits *e, const char *hook_name, const char *path,
                             const char *const *args, const char *const *env, unsigned timeout);
_wur_ int cdi_edits_add_gid(struct cdi_edits *e, uint32_t gid);
/* Appends copies of everything in src that dst does not hold yet (the union the "all" device of
 * a spec needs). */
_wur_ int cdi_edits_merge(struct cdi_edits *dst, const struct cdi_edits *src);

/*
 * Checks a spec as a loader would: at least one device, every device with non-empty edits,
 * absolute paths, "NAME=value" env entries, known hook names, valid permissions, and a declared
 * version no lower than the minimum. -EINVAL with the first problem in d.
 */
_wur_ int cdi_spec_validate(const struct cdi_spec *spec, struct diag *d);

/* ---- serialisation and files ---- */

/* The spec as a JSON document, keys in the order of the reference Go structs. Validates first.
 * The caller owns *ret. */
_wur_ int cdi_spec_to_json(const struct cdi_spec *spec, struct diag *d, json_t **ret);
/* The spec as text (JSON indented by 2, or YAML), ending in a newline. The caller frees *ret. */
_wur_ int cdi_spec_format(const struct cdi_spec *spec, enum cdi_format format, struct diag *d,
                          char **ret, size_t *ret_len);
/* "json" or "yaml". */
_wur_ int cdi_format_parse(const char *s, enum cdi_format *ret);
const char *cdi_format_extension(enum cdi_format format);

/*
 * The file name of a spec (cdi.md §5): "<vendor>-<class>.json", or for a transient spec (one per
 * consumer, e.g. a DRA claim) "<vendor>-<class>_<id>.yaml" with every '/' of id replaced by '_'.
 * transient_id NULL: a normal spec. -EINVAL for a kind or id that would not make a plain file
 * name. The caller frees *ret.
 */
_wur_ int cdi_spec_file_name(const char *kind, const char *transient_id, enum cdi_format format,
                             struct diag *d, char **ret);
/*
 * Validates, formats and writes spec atomically (temporary file in dir, fsync, rename; mode 0644)
 * as dir/<file name>. dir (NULL: CDI_SPEC_DIR_DYNAMIC) is created when missing; -ENOTDIR when it
 * is not a directory. *ret_path (may be NULL) gets the written path; the caller frees it.
 */
_wur_ int cdi_spec_write(const struct cdi_spec *spec, const char *dir, const char *transient_id,
                         enum cdi_format format, struct diag *d, char **ret_path);
/* Removes the spec file(s) of kind/transient_id from dir (both the .json and the .yaml form).
 * Already absent is not an error: unprepare may run twice. */
_wur_ int cdi_spec_remove(const char *dir, const char *kind, const char *transient_id,
                          struct diag *d);

/*
 * Loads a spec file (one JSON or YAML document) as a runtime's CDI cache would: strictly (unknown
 * keys are errors), every field type-checked, then cdi_spec_validate. Errors are "file:line:col:
 * message" in d: -EINVAL for a malformed or invalid spec, -EOPNOTSUPP for intelRdt and netDevices
 * (valid CDI that this model does not hold), -EFBIG past 4 MiB, -ENOENT and other read errors. The
 * caller owns *ret.
 */
_wur_ int cdi_spec_load_file(const char *path, struct diag *d, struct cdi_spec **ret);
/* The same from text in memory; name is what messages call it. */
_wur_ int cdi_spec_load_string(const char *name, const char *text, size_t len, struct diag *d,
                               struct cdi_spec **ret);
