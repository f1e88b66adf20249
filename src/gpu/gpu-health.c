/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Health events: XID and ECC events from NVML, delivered on the event loop. nvmlEventSetWait
 * blocks, so one worker thread waits on one event set covering every full GPU and posts each event
 * to the loop (ABI facts §2.6, §8). The thread never touches loop state: it owns only the event set
 * and a copy of each watched GPU's handle, index and UUID, taken at start so the caller may free
 * the inventory. Queued deliveries hold a reference to a small "sink" instead of the health object,
 * so gpu_health_stop() can free everything while events are still queued; they are dropped on
 * arrival.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "gpu-internal.h"

#define HEALTH_EVENTS                                                                              \
    (nvmlEventTypeXidCriticalError | nvmlEventTypeDoubleBitEccError |                              \
     nvmlEventTypeSingleBitEccError)

/* Where events go. Shared by the health object and every queued delivery; the last one frees it. */
struct sink {
    atomic_uint refs;
    bool stopped; /* loop thread only: set by gpu_health_stop() */
    gpu_health_fn fn;
    void *userdata;
};

struct delivery {
    struct sink *sink;
    struct gpu_health_event event;
};

struct watched {
    nvmlDevice_t handle;
    int index;
    char uuid[GPU_UUID_MAX];
};

struct gpu_health {
    struct gpu_nvml *nvml;
    struct ev_loop *loop;
    struct sink *sink;
    struct gpu_health_options opts;
    nvmlEventSet_t set;
    struct watched *gpus;
    size_t n_gpus;

    pthread_t thread;
    bool thread_started;
    atomic_bool stop;
    pthread_mutex_t lock; /* with wake: lets stop cut a back-off short */
    pthread_cond_t wake;
};

static void sink_unref(struct sink *s)
{
    if (s && atomic_fetch_sub(&s->refs, 1) == 1)
        free(s);
}

static void deliver(void *userdata)
{
    struct delivery *m = userdata;
    if (!m->sink->stopped)
        m->sink->fn(&m->event, m->sink->userdata);
    sink_unref(m->sink);
    free(m);
}

/* Any thread. A delivery that cannot be queued is dropped: there is nobody to tell but the log. */
static void post(struct gpu_health *h, const struct gpu_health_event *event)
{
    struct delivery *m = malloc(sizeof(*m));
    if (!m) {
        log_debug(1, "dropping a GPU health event: out of memory");
        return;
    }
    atomic_fetch_add(&h->sink->refs, 1);
    m->sink = h->sink;
    m->event = *event;
    if (ev_post(h->loop, deliver, m) < 0) {
        sink_unref(m->sink);
        free(m);
        log_debug(1, "dropping a GPU health event: cannot post to the loop");
    }
}

static void post_error(struct gpu_health *h, int index, const char *uuid, nvmlReturn_t r)
{
    struct gpu_health_event e = {.gpu_index = index,
                                 .gi_id = NVML_EVENT_NO_INSTANCE,
                                 .ci_id = NVML_EVENT_NO_INSTANCE,
                                 .wait_error = (int)r};
    snprintf(e.uuid, sizeof(e.uuid), "%s", uuid ? uuid : "");
    post(h, &e);
}

/* The watched GPU an event names: by handle, else by the UUID NVML gives for the handle. */
static const struct watched *resolve(struct gpu_health *h, nvmlDevice_t device)
{
    char uuid[GPU_UUID_MAX];
    for (size_t i = 0; i < h->n_gpus; i++)
        if (h->gpus[i].handle == device)
            return &h->gpus[i];
    if (NVML_CALL(h->nvml, nvmlDeviceGetUUID, device, uuid, sizeof(uuid)) != NVML_SUCCESS)
        return NULL;
    for (size_t i = 0; i < h->n_gpus; i++)
        if (strcmp(h->gpus[i].uuid, uuid) == 0)
            return &h->gpus[i];
    return NULL;
}

static void post_event(struct gpu_health *h, const nvmlEventData_t *data)
{
    const struct watched *w = resolve(h, data->device);
    struct gpu_health_event e = {.gpu_index = w ? w->index : -1,
                                 .type = data->eventType,
                                 .xid = data->eventData,
                                 .gi_id = data->gpuInstanceId,
                                 .ci_id = data->computeInstanceId};
    snprintf(e.uuid, sizeof(e.uuid), "%s", w ? w->uuid : "");
    post(h, &e);
}

/* Sleeps up to ms, or until gpu_health_stop() asks the thread to end. */
static void back_off(struct gpu_health *h, unsigned ms)
{
    struct timespec until;
    clock_gettime(CLOCK_MONOTONIC, &until);
    until.tv_sec += ms / 1000;
    until.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (until.tv_nsec >= 1000000000L) {
        until.tv_sec++;
        until.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&h->lock);
    while (!atomic_load(&h->stop))
        if (pthread_cond_timedwait(&h->wake, &h->lock, &until) == ETIMEDOUT)
            break;
    pthread_mutex_unlock(&h->lock);
}

static void *wait_loop(void *userdata)
{
    struct gpu_health *h = userdata;
    while (!atomic_load(&h->stop)) {
        nvmlEventData_t data = {0};
        nvmlReturn_t r =
            NVML_CALL(h->nvml, nvmlEventSetWait_v2, h->set, &data, h->opts.wait_timeout_ms);
        if (r == NVML_SUCCESS) {
            log_debug(4, "NVML event received", "type", LOG_INT(data.eventType), "data",
                      LOG_INT(data.eventData));
            post_event(h, &data);
        } else if (r != NVML_ERROR_TIMEOUT) {
            /* The driver's plugin takes a failed wait as every GPU unhealthy; the caller decides.
             * Backing off keeps a persistent failure from spinning the thread. */
            post_error(h, -1, NULL, r);
            back_off(h, h->opts.error_backoff_ms);
        }
    }
    return NULL;
}

/* Registers one GPU. NOT_SUPPORTED anywhere means "no events from this GPU", not unhealthy. */
static nvmlReturn_t watch_gpu(struct gpu_health *h, const struct gpu_device *dev,
                              struct watched *ret)
{
    nvmlDevice_t handle = NULL;
    unsigned long long supported = 0;
    nvmlReturn_t r;

    if (dev->uuid[0])
        r = NVML_CALL(h->nvml, nvmlDeviceGetHandleByUUID, dev->uuid, &handle);
    else
        r = NVML_CALL(h->nvml, nvmlDeviceGetHandleByIndex_v2, dev->index, &handle);
    if (r == NVML_SUCCESS)
        r = NVML_CALL(h->nvml, nvmlDeviceGetSupportedEventTypes, handle, &supported);
    if (r == NVML_SUCCESS && (supported & HEALTH_EVENTS) == 0)
        r = NVML_ERROR_NOT_SUPPORTED;
    if (r == NVML_SUCCESS)
        r = NVML_CALL(h->nvml, nvmlDeviceRegisterEvents, handle, supported & HEALTH_EVENTS, h->set);
    if (r != NVML_SUCCESS)
        return r;
    ret->handle = handle;
    ret->index = (int)dev->index;
    snprintf(ret->uuid, sizeof(ret->uuid), "%s", dev->uuid);
    return NVML_SUCCESS;
}

static void watch_all(struct gpu_health *h, const struct gpu_inventory *inv)
{
    for (size_t i = 0; i < inv->n_devices; i++) {
        const struct gpu_device *dev = &inv->devices[i];
        if (dev->lost)
            continue; /* already unhealthy, and NVML would only say so again */
        nvmlReturn_t r = watch_gpu(h, dev, &h->gpus[h->n_gpus]);
        if (r == NVML_SUCCESS)
            h->n_gpus++;
        else if (r != NVML_ERROR_NOT_SUPPORTED)
            post_error(h, (int)dev->index, dev->uuid, r);
        else
            log_debug(3, "GPU health events not supported", "index", LOG_INT(dev->index));
    }
}

/* The worker must not take the loop's signals (SIGTERM, SIGHUP go to its signalfd); faults stay
 * unblocked so a crash in NVML still reaches the crash handlers instead of being undefined. */
static int start_thread(struct gpu_health *h)
{
    static const int faults[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP, SIGSYS};
    sigset_t all, old;
    sigfillset(&all);
    for (size_t i = 0; i < ARRAY_SIZE(faults); i++)
        sigdelset(&all, faults[i]);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    int r = pthread_create(&h->thread, NULL, wait_loop, h);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (r != 0)
        return -r;
    h->thread_started = true;
    return 0;
}

static int health_new(struct gpu_nvml *nvml, struct ev_loop *loop,
                      const struct gpu_health_options *opts, size_t n, struct gpu_health **ret)
{
    pthread_condattr_t attr;
    struct gpu_health *h = calloc(1, sizeof(*h));
    if (!h)
        return -ENOMEM;
    h->nvml = nvml;
    h->loop = loop;
    h->opts.wait_timeout_ms = opts && opts->wait_timeout_ms ? opts->wait_timeout_ms : 5000;
    h->opts.error_backoff_ms = opts && opts->error_backoff_ms ? opts->error_backoff_ms : 1000;
    atomic_init(&h->stop, false);
    pthread_mutex_init(&h->lock, NULL);
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&h->wake, &attr);
    pthread_condattr_destroy(&attr);
    h->gpus = calloc(n ? n : 1, sizeof(*h->gpus));
    h->sink = calloc(1, sizeof(*h->sink));
    if (!h->gpus || !h->sink) {
        gpu_health_stop(h);
        return -ENOMEM;
    }
    atomic_init(&h->sink->refs, 1);
    *ret = h;
    return 0;
}

static int set_create_errno(nvmlReturn_t r)
{
    if (r == NVML_ERROR_NOT_SUPPORTED || r == NVML_ERROR_FUNCTION_NOT_FOUND)
        return -EOPNOTSUPP;
    return -EIO;
}

int gpu_health_start_with(struct gpu_nvml *nvml, const struct gpu_inventory *inv,
                          struct ev_loop *loop, const struct gpu_health_options *opts,
                          gpu_health_fn fn, void *userdata, struct gpu_health **ret)
{
    _cleanup_(gpu_health_stopp) struct gpu_health *h = NULL;
    int r = health_new(nvml, loop, opts, inv->n_devices, &h);
    if (r < 0)
        return r;
    h->sink->fn = fn;
    h->sink->userdata = userdata;
    nvmlReturn_t nr = NVML_CALL(nvml, nvmlEventSetCreate, &h->set);
    if (nr != NVML_SUCCESS) {
        h->set = NULL;
        log_debug(1, "cannot create an NVML event set", "nvml", gpu_nvml_strerror(nvml, (int)nr));
        return set_create_errno(nr);
    }
    watch_all(h, inv);
    if (h->n_gpus > 0) {
        r = start_thread(h);
        if (r < 0)
            return r;
    }
    *ret = TAKE_PTR(h);
    return 0;
}

struct gpu_health *gpu_health_stop(struct gpu_health *h)
{
    if (!h)
        return NULL;
    if (h->thread_started) {
        pthread_mutex_lock(&h->lock);
        atomic_store(&h->stop, true);
        pthread_cond_signal(&h->wake);
        pthread_mutex_unlock(&h->lock);
        pthread_join(h->thread, NULL);
    }
    if (h->set)
        (void)NVML_CALL(h->nvml, nvmlEventSetFree, h->set);
    if (h->sink) {
        h->sink->stopped = true;
        sink_unref(h->sink);
    }
    pthread_cond_destroy(&h->wake);
    pthread_mutex_destroy(&h->lock);
    free(h->gpus);
    free(h);
    return NULL;
}
