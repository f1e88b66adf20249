/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The DRA driver's checkpoint: which claims are prepared (or being prepared) on this node, kept in
 * one JSON file (<plugins dir>/<driver>/checkpoint.json) so that a restarted driver answers
 * NodePrepareResources the same way and can roll back what a crash left half done. The file is
 * versioned and carries a checksum; it is written with the atomic-write helper (temporary file,
 * fsync, rename, fsync of the directory). A torn, corrupt or unknown-version file is reported and
 * never trusted. Claims recorded under another boot ID were prepared before a reboot: their state
 * is gone (CDI specs in /var/run are too), so they are dropped on load.
 *
 * In memory the checkpoint is a jansson object, claim UID -> entry:
 *   {"state": "PrepareStarted"|"PrepareCompleted", "namespace": NS, "name": NAME,
 *    "devices": [{"requests": [REQ, ...], "poolName": P, "deviceName": D,
 *                 "cdiDeviceIDs": [ID, ...], "shareID": S (optional)}, ...]}
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base.h"

#define DRA_STATE_STARTED "PrepareStarted"
#define DRA_STATE_COMPLETED "PrepareCompleted"

struct dra_checkpoint {
    json_t *claims; /* UID -> entry, as above (owned) */
    char *boot_id;  /* this boot's ID (owned) */
};

/* Whether uid is a Kubernetes UID gpuplane accepts before it names a file: a lower-case RFC 4122
 * UUID ("8-4-4-4-12" hex digits). */
bool dra_claim_uid_valid(const char *uid);

/* This boot's ID: /proc/sys/kernel/random/boot_id under root ("" or NULL: "/"). */
_wur_ int dra_boot_id(const char *root, char **ret);

/*
 * Reads path. A missing file is an empty checkpoint. -EBADMSG with d ("checkpoint.json: checksum
 * mismatch", "...: line 1 col 40: ...", "...: unsupported version 7") for a file that cannot be
 * trusted; the caller decides what to do (the driver moves it aside and starts empty, loudly).
 * Entries with an invalid UID or shape are refused the same way.
 */
_wur_ int dra_checkpoint_load(const char *path, const char *boot_id, struct diag *d,
                              struct dra_checkpoint **ret);
/* Like dra_checkpoint_load, on a file's bytes (len of them; data need not be NUL-terminated);
 * name labels the diagnostics. A zero-length input is refused, not empty. For the fuzz target and
 * tests. */
_wur_ int dra_checkpoint_parse(const char *data, size_t len, const char *name, const char *boot_id,
                               struct diag *d, struct dra_checkpoint **ret);
/* The checksum a checkpoint file's top-level object doc must carry: CRC-32 (IEEE) of the compact,
 * key-sorted serialization of doc without its "checksum" member (see docs/dra-driver.md). For tests
 * and the fuzz target, which build files with a valid checksum around other damage. */
_wur_ int dra_checkpoint_checksum(const json_t *doc, uint32_t *ret);
/* An empty checkpoint for boot_id. */
_wur_ int dra_checkpoint_new(const char *boot_id, struct dra_checkpoint **ret);
struct dra_checkpoint *dra_checkpoint_free(struct dra_checkpoint *cp);
DEFINE_POINTER_CLEANUP(struct dra_checkpoint, dra_checkpoint_free)

/* The file's bytes for the checkpoint as it is now (malloc'd, *len set): what dra_checkpoint_save
 * writes; split out so that a worker thread can write a snapshot taken on the loop thread. -EINVAL
 * if an entry was changed (through dra_checkpoint_get) into a shape load would refuse. */
_wur_ int dra_checkpoint_serialize(const struct dra_checkpoint *cp, char **ret, size_t *len);
/* Writes data atomically to path (mode 0600) with fsync of the file and its directory. */
_wur_ int dra_checkpoint_write(const char *path, const char *data, size_t len, struct diag *d);
/* serialize + write. */
_wur_ int dra_checkpoint_save(const struct dra_checkpoint *cp, const char *path, struct diag *d);

/* The entry of uid, or NULL (borrowed). */
json_t *dra_checkpoint_get(const struct dra_checkpoint *cp, const char *uid);
/* Sets the entry of uid (state, namespace, name, devices: a JSON array, borrowed and copied, may be
 * NULL for []). -EINVAL for an invalid uid or state, or devices not of the shape above (what put
 * accepts, load accepts). */
_wur_ int dra_checkpoint_put(struct dra_checkpoint *cp, const char *uid, const char *state,
                             const char *ns, const char *name, json_t *devices);
void dra_checkpoint_drop(struct dra_checkpoint *cp, const char *uid);
