/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics (the lock NVIDIA's
 * operator takes through controller-runtime: Lease "53822513.nvidia.com", 15 s lease, 10 s renew
 * deadline, 2 s retry period):
 *
 *  - a candidate reads the Lease every retry period; it takes it when it does not exist, when its
 *    holderIdentity is empty (released), or when the record has not changed for the lease duration
 *    as measured by the candidate's own clock since it first saw that record (clocks of different
 *    machines are never compared);
 *  - the leader renews (renewTime) every retry period with an update carrying the resourceVersion
 *    it read, so two candidates racing for the Lease see 409 Conflict for the loser;
 *  - a leader that has not renewed within the renew deadline has lost the lease: the daemon exits
 *    ("leader election lost"), as controller-runtime's manager does, and the kubelet restarts it;
 *  - taking the Lease from another holder counts one leaseTransitions and sets acquireTime.
 *
 * Two layers: struct op_lease_sm is the decision logic with no I/O and no clock of its own (unit
 * tested step by step), struct op_elector drives it on the event loop with a kube client.
 */
#pragma once

#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>

#include "base-diag.h"
#include "base-macro.h"

struct ev_loop;
struct kube_client;

#define OP_LEASE_NAME "53822513.nvidia.com"
#define OP_LEASE_HOLDER_MAX 256

/* The spec of a Lease as the elector reads and writes it. Times are wall-clock microseconds since
 * the epoch (0: unset). */
struct op_lease_record {
    char holder[OP_LEASE_HOLDER_MAX]; /* "" when free */
    int32_t duration_s;
    int64_t acquire_us;
    int64_t renew_us;
    int32_t transitions;
};

/* Reads lease.spec. -EINVAL when a field has the wrong type or a time is not a MicroTime. */
_wur_ int op_lease_record_from_json(const json_t *lease, struct op_lease_record *ret);
/* The spec object for rec (a new reference, or NULL without memory). */
json_t *op_lease_record_to_json(const struct op_lease_record *rec);
bool op_lease_record_equal(const struct op_lease_record *a, const struct op_lease_record *b);

/* A metav1.MicroTime: "2006-01-02T15:04:05.000000Z" (UTC). buf gets at most 32 bytes. */
void op_microtime_format(int64_t us, char buf[static 32]);
/* Parses RFC 3339 with 0 to 9 fraction digits and Z or a +hh:mm offset. -EINVAL otherwise. */
_wur_ int op_microtime_parse(const char *s, int64_t *ret_us);

/* ---- the decision logic ---- */

struct op_lease_sm {
    char identity[OP_LEASE_HOLDER_MAX];
    uint64_t lease_ms;          /* written as leaseDurationSeconds (rounded up) */
    uint64_t renew_deadline_ms; /* the leader gives up when it has not renewed for this long */
    bool have_observed;
    struct op_lease_record observed; /* the record last read or written */
    uint64_t observed_ms;            /* monotonic time when observed last changed */
    bool leader;
    uint64_t renewed_ms; /* monotonic time of the last successful write while leader */
};

enum op_lease_action {
    OP_LEASE_WAIT,   /* someone else holds a valid lease */
    OP_LEASE_CREATE, /* the Lease does not exist: create it with *ret_write */
    OP_LEASE_UPDATE, /* take or renew: update it with *ret_write */
};

void op_lease_sm_init(struct op_lease_sm *sm, const char *identity, uint64_t lease_ms,
                      uint64_t renew_deadline_ms);

/*
 * What to do after a read: live is the record read, or NULL when the Lease does not exist.
 * now_ms is monotonic, now_us wall clock (what goes into acquireTime/renewTime).
 */
enum op_lease_action op_lease_sm_step(struct op_lease_sm *sm, const struct op_lease_record *live,
                                      uint64_t now_ms, int64_t now_us,
                                      struct op_lease_record *ret_write);

/* The write of rec succeeded (ok) or failed (a 409 means someone else wrote first). */
void op_lease_sm_written(struct op_lease_sm *sm, bool ok, const struct op_lease_record *rec,
                         uint64_t now_ms);

/* Whether the leader has gone longer than the renew deadline without renewing. */
bool op_lease_sm_lost(const struct op_lease_sm *sm, uint64_t now_ms);

/* ---- the elector on the event loop ---- */

struct op_elector_options {
    const char *namespace_; /* of the Lease */
    const char *name;       /* NULL: OP_LEASE_NAME */
    const char *identity;   /* holderIdentity */
    uint64_t lease_ms;
    uint64_t renew_deadline_ms;
    uint64_t retry_ms;
    /* Called once when this process becomes the leader. */
    void (*on_leading)(void *userdata);
    /* Called once when the leader lost the lease (no renewal within the deadline, or another
     * holder took it); the daemon exits. */
    void (*on_lost)(void *userdata);
    void *userdata;
};

struct op_elector;

/* Starts campaigning at once. The kube client is borrowed and is the elector's alone; free it
 * before the elector, so that no answer to a request in flight comes after. */
_wur_ int op_elector_new(struct ev_loop *loop, struct kube_client *kube,
                         const struct op_elector_options *o, struct diag *d,
                         struct op_elector **ret);
struct op_elector *op_elector_free(struct op_elector *e);
DEFINE_POINTER_CLEANUP(struct op_elector, op_elector_free)

bool op_elector_is_leader(const struct op_elector *e);

/*
 * Gives the lease up (holderIdentity "", leaseDurationSeconds 1, as client-go's ReleaseOnCancel),
 * so a successor need not wait for the lease to expire; done(userdata) is called when the write
 * finished or failed, or at once when not leader. Campaigning stops.
 */
void op_elector_release(struct op_elector *e, void (*done)(void *userdata), void *userdata);

/* A holder identity as client-go's: "<hostname>_<uuid>" (uuid v4 from /dev/urandom). */
_wur_ int op_lease_identity(char buf[static OP_LEASE_HOLDER_MAX]);
