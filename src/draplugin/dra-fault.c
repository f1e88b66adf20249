/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fault points for crash tests: with GPUPLANE_DRA_FAULT=<point> the driver kills itself with
 * SIGKILL when prepare or unprepare reaches that point, leaving files exactly as a power cut or
 * the OOM killer would (no atexit handlers, no socket clean-up). The tests then restart the driver,
 * retry the call, and check that every run converges. The variable is read once at start; an
 * unknown name is refused, so a typo cannot make a crash test pass by never crashing.
 */
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "dra-internal.h"

const char *const dra_fault_points[] = {
    "prepare-before-started",      /* nothing written yet */
    "prepare-after-started",       /* checkpoint says PrepareStarted, no CDI spec */
    "prepare-after-cdi",           /* CDI spec written, checkpoint still PrepareStarted */
    "prepare-after-completed",     /* checkpoint says PrepareCompleted, no reply sent */
    "unprepare-before-cdi-remove", /* nothing removed yet */
    "unprepare-after-cdi-remove",  /* spec gone, the checkpoint still has the claim */
    "unprepare-after-checkpoint",  /* both gone, no reply sent */
    NULL,
};

static const char *armed;

int dra_fault_init(struct diag *d)
{
    const char *v = getenv(DRA_FAULT_ENV);
    armed = NULL;
    if (!v || !v[0])
        return 0;
    for (size_t i = 0; dra_fault_points[i]; i++) {
        if (strcmp(v, dra_fault_points[i]) == 0) {
            armed = dra_fault_points[i];
            log_warn("fault point armed: the driver kills itself when it gets there", "point",
                     armed);
            return 0;
        }
    }
    return diag_fail(d, -EINVAL, "%s=%s: unknown fault point (see --list-fault-points)",
                     DRA_FAULT_ENV, v);
}

void dra_fault(const char *point)
{
    if (!armed || strcmp(point, armed) != 0)
        return;
    log_warn("fault point reached: SIGKILL", "point", point);
    kill(getpid(), SIGKILL);
    _exit(137); /* not reached */
}
