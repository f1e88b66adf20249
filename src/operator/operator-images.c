/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Image paths, by NVIDIA's rule (gpu-operator's ImagePath): a ClusterPolicy names an image with
 * repository, image and version; an image alone is used verbatim (tools that rewrite images to
 * digests set only that); nothing at all falls back to the operator pod's environment, where
 * NVIDIA's per-component variables come first and GPUPLANE_IMAGE (the image the operator itself
 * runs) last, for the components gpuplane's own binary serves.
 *
 * A ClusterPolicy written for NVIDIA's operator names NVIDIA's images for the components gpuplane
 * serves (the device plugin, GFD, the exporter, the validator). Those images cannot run gpuplane's
 * commands, so such a name stands for "this component": it is replaced by GPUPLANE_IMAGE, and the
 * policy works unchanged after a switch.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base-strbuf.h"
#include "operator-policy-internal.h"

struct image_env {
    const char *name;     /* NVIDIA's variable */
    const char *fallback; /* then this one, or NULL */
};

static const struct image_env IMAGE_ENV[OP_COMPONENT_MAX] = {
    [OP_DRIVER] = {"DRIVER_IMAGE", NULL},
    [OP_TOOLKIT] = {"CONTAINER_TOOLKIT_IMAGE", NULL},
    [OP_VALIDATOR] = {"VALIDATOR_IMAGE", "GPUPLANE_IMAGE"},
    [OP_DEVICE_PLUGIN] = {"DEVICE_PLUGIN_IMAGE", "GPUPLANE_IMAGE"},
    [OP_DRA_DRIVER] = {NULL, "GPUPLANE_IMAGE"},
    [OP_DCGM_EXPORTER] = {"DCGM_EXPORTER_IMAGE", "GPUPLANE_IMAGE"},
    [OP_GFD] = {"GFD_IMAGE", "GPUPLANE_IMAGE"},
};

/* NVIDIA's own image names (the last path segment, without tag or digest) for the components
 * gpuplane serves. */
static const char *const *const NVIDIA_IMAGES[OP_COMPONENT_MAX] = {
    [OP_VALIDATOR] = (const char *const[]){"gpu-operator", "gpu-operator-validator", NULL},
    [OP_DEVICE_PLUGIN] = (const char *const[]){"k8s-device-plugin", NULL},
    [OP_DRA_DRIVER] = (const char *const[]){"k8s-dra-driver-gpu", "k8s-dra-driver", NULL},
    [OP_DCGM_EXPORTER] = (const char *const[]){"dcgm-exporter", NULL},
    [OP_GFD] = (const char *const[]){"k8s-device-plugin", "gpu-feature-discovery", NULL},
};

/* Whether path ("nvcr.io/nvidia/k8s-device-plugin:v0.20.0", or a mirror of it) is one of NVIDIA's
 * images for component c. */
static bool nvidia_image(enum op_component c, const char *path)
{
    const char *name = strrchr(path, '/');
    name = name ? name + 1 : path;
    size_t len = strcspn(name, ":@");
    for (const char *const *n = NVIDIA_IMAGES[c]; n && *n; n++)
        if (strlen(*n) == len && strncmp(name, *n, len) == 0)
            return true;
    return false;
}

static const char *env_value(const char *(*getenv_fn)(const char *name), const char *name)
{
    const char *v;

    if (!getenv_fn || !name)
        return NULL;
    v = getenv_fn(name);
    return v && *v ? v : NULL;
}

int op_image_path(const struct op_component_spec *s, const char *key, const char *env_name,
                  const char *fallback_env, const char *(*getenv_fn)(const char *name), char **ret,
                  struct diag *d)
{
    _cleanup_strbuf_ struct strbuf sb = STRBUF_INIT;
    const char *v;
    char *out;
    int r;

    if (!s->repository && !s->version) {
        if (s->image) {
            r = strbuf_addstr(&sb, s->image);
        } else if ((v = env_value(getenv_fn, env_name)) ||
                   (v = env_value(getenv_fn, fallback_env))) {
            r = strbuf_addstr(&sb, v);
        } else {
            return diag_fail(
                d, -EINVAL, "%s: no image: set repository, image and version%s%s%s%s%s", key,
                env_name || fallback_env ? ", or " : "", env_name ? env_name : "",
                env_name && fallback_env ? " or " : "", fallback_env ? fallback_env : "",
                env_name || fallback_env ? " in the operator's environment" : "");
        }
    } else if (!s->repository || !s->image || !s->version) {
        return diag_fail(d, -EINVAL,
                         "%s: repository, image and version must all be set (repository=%s, "
                         "image=%s, version=%s)",
                         key, s->repository ? s->repository : "", s->image ? s->image : "",
                         s->version ? s->version : "");
    } else {
        /* A digest takes '@', a tag ':'. */
        r = strbuf_addf(&sb, "%s/%s%c%s", s->repository, s->image,
                        strncmp(s->version, "sha256:", 7) == 0 ? '@' : ':', s->version);
    }
    if (r < 0)
        return r;
    out = strbuf_detach(&sb, NULL);
    if (!out)
        return -ENOMEM;
    *ret = out;
    return 0;
}

int op_component_image(const struct op_policy *p, enum op_component c,
                       const char *(*getenv_fn)(const char *name), const char *os_tag, char **ret,
                       struct diag *d)
{
    char key[64];
    _cleanup_free_ char *path = NULL;
    int r;

    if ((unsigned)c >= OP_COMPONENT_MAX)
        return -EINVAL;
    snprintf(key, sizeof(key), "spec.%s", op_component_key(c));
    r = op_image_path(&p->comp[c], key, IMAGE_ENV[c].name, IMAGE_ENV[c].fallback, getenv_fn, &path,
                      d);
    if (r < 0)
        return r;
    if (nvidia_image(c, path)) {
        const char *own = env_value(getenv_fn, "GPUPLANE_IMAGE");
        if (!own)
            return diag_fail(
                d, -EINVAL,
                "%s: %s is NVIDIA's image, which cannot run gpuplane; set GPUPLANE_IMAGE "
                "in the operator's environment or name gpuplane's image",
                key, path);
        free(path);
        if (!(path = strdup(own)))
            return -ENOMEM;
    }
    /* NVIDIA's driver images are built per OS: "driver:595.91.07-ubuntu22.04". */
    if (c == OP_DRIVER && os_tag && *os_tag && !strstr(path, "sha256:")) {
        char *tagged = NULL;
        if (asprintf(&tagged, "%s-%s", path, os_tag) < 0)
            return -ENOMEM;
        free(path);
        path = tagged;
    }
    *ret = TAKE_PTR(path);
    return 0;
}
