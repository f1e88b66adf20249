/* SPDX-License-Identifier: Apache-2.0 */
/* What the files of the nvcdi module share: the scan of a driver root, the rules of a mock root. */
#pragma once

#include "nvcdi.h"

/* One line of proc/driver/nvidia-caps/mig-minors: gpu<gpu>/gi<gi>[/ci<ci>]/access <minor>. */
struct nvcdi_cap {
    unsigned gpu; /* the GPU's minor */
    unsigned gi;
    int ci; /* -1 for the GPU instance's own capability */
    unsigned minor;
};

struct nvcdi {
    char *kind;
    char *root;     /* "" for "/"; no trailing '/' */
    char *dev_root; /* likewise */
    char *hook_path;
    unsigned strategies;
    bool no_all_device;
    bool no_hooks;
    char *driver_version;
    char *libcuda_dir;   /* container path of libcuda's directory, or NULL */
    struct vec nodes;    /* char *, container paths of control nodes that exist */
    struct vec mounts;   /* char *, container paths of files to bind (libraries, tools, ...) */
    struct vec lib_dirs; /* char *, container paths of directories holding driver libraries */
    struct vec links;    /* char *, "libcuda.so.1::/usr/lib/.../libcuda.so" */
    struct vec caps;     /* struct nvcdi_cap */
};

/* Scans the driver and dev roots into nv (paths and options already set). */
_wur_ int nvcdi_scan(struct nvcdi *nv, bool need_caps, struct diag *d);
/* Whether the device node rel ("/dev/nvidia0") exists under the dev root. */
bool nvcdi_dev_present(const struct nvcdi *nv, const char *rel);
/* The capability minor of GPU instance gi (ci -1) or compute instance ci of the GPU with minor
 * gpu; -ENOENT when mig-minors has no such line. */
_wur_ int nvcdi_cap_minor(const struct nvcdi *nv, unsigned gpu, unsigned gi, int ci, unsigned *ret);

/* Whether v can be a driver version: it goes into file names and a hook argument. */
bool nvcdi_valid_driver_version(const char *v);

/* The minor of /dev/nvidia-caps/nvidia-cap<m> of GPU instance gi (ci -1) or its compute instance
 * ci on the GPU with minor gpu_minor, in the driver's numbering (config is 1, monitor 2). */
unsigned nvcdi_mig_cap_minor(unsigned gpu_minor, unsigned gi, int ci);
/* The character major for name in proc_devices (the text of /proc/devices; NULL or "" when there
 * is none): the one listed, else the highest of the local range 240-254 that is neither listed
 * nor avoid; 0 when every one is taken. */
unsigned nvcdi_mock_major(const char *proc_devices, const char *name, unsigned avoid);

/* Room for the name part of a lasting mock root. */
#define NVCDI_MOCK_NAME_MAX 64
/* The name part of a lasting mock root for the --mock argument profile resolved to profile_path
 * (either may be NULL): the bundled name itself ("dgx-h100" for .../dgx-h100.yaml), else the
 * file's stem (at most 32 characters of [A-Za-z0-9_-], others as '_') and 12 hex digits of a hash
 * of the path ("node-3f2a9c1b5e07"). */
void nvcdi_mock_root_name(const char *profile, const char *profile_path,
                          char ret[static NVCDI_MOCK_NAME_MAX]);
