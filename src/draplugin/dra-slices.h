/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ResourceSlices the DRA driver publishes for its node, built from the GPU inventory the way
 * NVIDIA's gpu.nvidia.com driver names and describes devices (one pool named after the node;
 * full GPUs "gpu-<minor>", MIG devices when MIG is enabled; NVIDIA's attributes plus index and
 * minor; capacity memory; an unhealthy device carries a NoSchedule taint), and kept published
 * through the API: create or update, generation bumped when the content changes, stale slices of
 * this node and driver deleted, retried with back-off until it succeeds.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base.h"
#include "ev.h"
#include "gpu.h"
#include "kube.h"

/* The taint an unhealthy device gets (key, effect NoSchedule). */
#define DRA_TAINT_UNHEALTHY "gpu.nvidia.com/unhealthy"

struct dra_slices_options {
    const char *node;       /* the node (and pool) name */
    const char *driver;     /* "gpu.nvidia.com" */
    const char *sysfs_root; /* where /sys is, for resource.kubernetes.io/pcieRoot; NULL: "/" */
    const bool *unhealthy;  /* per NVML index: taint the GPU and its MIG devices; NULL: none */
};

/*
 * The slices' specs (a JSON array of ResourceSlice objects, metadata.name
 * "<node>-<driver>-<i>", pool generation and resourceSliceCount filled with `generation`): one
 * slice unless there are more than 128 devices. -EINVAL with d for names the API would refuse.
 */
_wur_ int dra_slices_build(const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                           int64_t generation, struct diag *d, json_t **ret);

struct dra_publisher;

/*
 * Keeps the slices published: lists this node's slices of this driver
 * (fieldSelector=spec.nodeName=<node>,spec.driver=<driver>), takes the highest pool generation
 * seen, and from then on each dra_publish creates/updates the wanted slices (bumping the
 * generation when the devices changed), deletes the others, and calls done(0) when the API holds
 * exactly the wanted slices (done(<0) is never final: failures are retried with back-off, and
 * logged).
 */
_wur_ int dra_publisher_new(struct ev_loop *loop, struct kube_client *kube,
                            const struct gpu_inventory *inv, const struct dra_slices_options *opts,
                            struct dra_publisher **ret);
struct dra_publisher *dra_publisher_free(struct dra_publisher *p);
DEFINE_POINTER_CLEANUP(struct dra_publisher, dra_publisher_free)
/* (Re)publishes with the current health (opts->unhealthy is read again). done may be NULL. */
_wur_ int dra_publish(struct dra_publisher *p, void (*done)(int result, void *userdata),
                      void *userdata);
/*
 * How the above behaves in detail. The publisher borrows loop, kube, inv and opts->unhealthy
 * (they must outlive it) and copies the strings of opts. Publishing starts from the loop, never
 * inside dra_publish, and each done is called exactly once, never from inside dra_publish: with 0
 * when the run that served it left the API holding exactly the wanted slices, or with the run's
 * negative errno (the publisher then retries by itself, 1 s doubling to 30 s, and logs the
 * outcome; a later dra_publish retries at once). Calls during a run are served together by one
 * more run. A done may free the publisher. dra_publisher_free drops the callbacks not yet made;
 * a request still in flight keeps a small record that its kube callback frees (a kube client
 * freed afterwards never calls back: the records then stay allocated, still reachable, so free
 * the pair at exit only).
 */
/* The pool generation of the slices last wanted; -1 before the first run got its answer. */
int64_t dra_publisher_generation(const struct dra_publisher *p);
