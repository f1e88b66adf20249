/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Events and fault injection. The fault file (MOCK_NVML_EVENTS, or the profile's events:) is
 * tailed: every call that touches a device stats it and, when it grew, reads the new complete
 * lines, each a JSON object naming a GPU and what happens to it (an XID, an ECC error, the GPU
 * falling off the bus or coming back; telemetry values and running processes change too). An
 * event goes into the queue of every event set that registered its type on that GPU;
 * nvmlEventSetWait_v2 sleeps on a condition variable until something is queued or its timeout
 * passes, re-reading the file every few milliseconds so that lines appear even when no other
 * thread calls in.
 *
 * The reader's position and the losses it caused are process-wide and survive nvmlShutdown, like a
 * driver whose state outlives one client: re-initialising never replays a line. Bad lines are
 * skipped with a message on stderr; the library never fails because of them.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "mock-internal.h"

#define LINE_MAX_BYTES 4096
#define CHUNK_BYTES 65536
/* How often a waiting nvmlEventSetWait_v2 looks at the events file. The driver delivers events at
 * once; the mock's delay must stay far below the 10 ms that health-to-ListAndWatch is measured
 * against, and a stat() every 2 ms costs nothing measurable. */
#define WAIT_TICK_MS 2

/* ---- applying a line ---- */

struct fault {
    const char *type;
    unsigned long long event; /* 0: not an event (lost, recover) */
};

static const struct fault faults[] = {
    {"xid", nvmlEventTypeXidCriticalError},
    {"sbe", nvmlEventTypeSingleBitEccError},
    {"dbe", nvmlEventTypeDoubleBitEccError},
    {"pstate", nvmlEventTypePState},
    {"mig", nvmlEventMigConfigChange},
    {"lost", 0},
    {"recover", 0},
};

static void line_error(const char *fmt, ...) _printf_(1, 2);

static void line_error(const char *fmt, ...)
{
    char msg[256];
    va_list ap;

    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "mock-nvml: %s:%u: %s\n", mock.tail.path, mock.tail.line, msg);
}

static void enqueue(struct nvmlEventSet_st *set, const struct mock_event *e)
{
    if (set->len == MOCK_QUEUE_MAX) {
        line_error("%s", "event set full, event dropped");
        return;
    }
    set->queue[(set->head + set->len) % MOCK_QUEUE_MAX] = *e;
    set->len++;
}

static void deliver(const struct mock_event *e)
{
    for (struct nvmlEventSet_st *set = mock.sets; set; set = set->next) {
        unsigned long long mask = set->mask[e->gpu];

        if (e->lost ? mask != 0 : (mask & e->type) != 0)
            enqueue(set, e);
    }
    pthread_cond_broadcast(&mock.cond);
}

/* Resolves "gpu": an index, a GPU UUID or a MIG UUID (which also sets the default gi/ci). */
static bool resolve_gpu(const json_t *v, unsigned *gpu, unsigned *gi, unsigned *ci)
{
    const struct mock_node *node = mock.node;
    const struct nvmlDevice_st *dev;

    if (json_is_integer(v)) {
        json_int_t i = json_integer_value(v);

        if (i < 0 || (size_t)i >= node->n_gpus)
            return false;
        *gpu = (unsigned)i;
        return true;
    }
    if (!json_is_string(v))
        return false;
    dev = mock_find_uuid(node, json_string_value(v));
    if (!dev)
        return false;
    *gpu = dev->gpu->index;
    if (dev->ci) {
        *gi = dev->ci->gi->id;
        *ci = dev->ci->id;
    }
    return true;
}

/* An optional unsigned member; false when present with the wrong type. */
static bool get_uint(const json_t *obj, const char *key, unsigned long long max,
                     unsigned long long *ret)
{
    const json_t *v = json_object_get(obj, key);

    if (!v)
        return true;
    if (!json_is_integer(v) || json_integer_value(v) < 0 ||
        (unsigned long long)json_integer_value(v) > max)
        return false;
    *ret = (unsigned long long)json_integer_value(v);
    return true;
}

static bool check_keys(const json_t *obj)
{
    static const char *const allowed[] = {"gpu", "type", "xid", "gi", "ci"};
    const char *key;
    json_t *v;

    json_object_foreach((json_t *)obj, key, v)
    {
        size_t i;

        for (i = 0; i < ARRAY_SIZE(allowed); i++)
            if (strcmp(key, allowed[i]) == 0)
                break;
        if (i == ARRAY_SIZE(allowed)) {
            line_error("unknown key \"%s\"", key);
            return false;
        }
    }
    return true;
}

static const struct fault *find_fault(const json_t *obj)
{
    const char *type = json_string_value(json_object_get(obj, "type"));

    if (!type) {
        line_error("%s", "missing or non-string \"type\"");
        return NULL;
    }
    for (size_t i = 0; i < ARRAY_SIZE(faults); i++)
        if (strcmp(faults[i].type, type) == 0)
            return &faults[i];
    line_error("unknown type \"%s\"", type);
    return NULL;
}

static void line_message(const char *msg)
{
    line_error("%s", msg);
}

/* telemetry, pcie-replay and remap lines change values rather than deliver events. */
static void apply_telemetry(const json_t *obj, const char *type)
{
    unsigned gpu, gi, ci;

    if (!resolve_gpu(json_object_get(obj, "gpu"), &gpu, &gi, &ci)) {
        line_error("%s", "\"gpu\" is not an index or UUID of this node");
        return;
    }
    (void)mock_telemetry_event(gpu, type, obj, line_message);
}

/* process and process-exit lines change the processes of a GPU or MIG device. */
static void apply_process(const json_t *obj, const char *type)
{
    unsigned gpu, gi = NVML_EVENT_NO_INSTANCE, ci = NVML_EVENT_NO_INSTANCE;

    if (!resolve_gpu(json_object_get(obj, "gpu"), &gpu, &gi, &ci)) {
        line_error("%s", "\"gpu\" is not an index or UUID of this node");
        return;
    }
    (void)mock_process_event(gpu, gi, ci, type, obj, line_message);
}

static void apply_object(const json_t *obj)
{
    struct mock_event e = {.gi = NVML_EVENT_NO_INSTANCE, .ci = NVML_EVENT_NO_INSTANCE};
    unsigned long long gi, ci, xid = 0;
    const struct fault *f;
    bool has_xid = json_object_get(obj, "xid") != NULL;
    const char *type = json_string_value(json_object_get(obj, "type"));

    if (type && mock_telemetry_type(type)) {
        apply_telemetry(obj, type);
        return;
    }
    if (type && mock_process_type(type)) {
        apply_process(obj, type);
        return;
    }
    if (!check_keys(obj) || !(f = find_fault(obj)))
        return;
    if (!resolve_gpu(json_object_get(obj, "gpu"), &e.gpu, &e.gi, &e.ci)) {
        line_error("%s", "\"gpu\" is not an index or UUID of this node");
        return;
    }
    gi = e.gi;
    ci = e.ci;
    if (!get_uint(obj, "gi", 0xFFFFFFFFull, &gi) || !get_uint(obj, "ci", 0xFFFFFFFFull, &ci) ||
        !get_uint(obj, "xid", 0xFFFFFFFFull, &xid)) {
        line_error("%s", "\"gi\", \"ci\" and \"xid\" must be unsigned 32-bit integers");
        return;
    }
    if (f->event == nvmlEventTypeXidCriticalError && !has_xid) {
        line_error("%s", "an xid event needs \"xid\"");
        return;
    }
    e.gi = (unsigned)gi;
    e.ci = (unsigned)ci;
    e.type = f->event;
    e.data = f->event == nvmlEventTypeXidCriticalError ? xid : 0;
    if (strcmp(f->type, "recover") == 0) {
        mock.lost[e.gpu] = MOCK_LOST_RECOVERED;
        return;
    }
    if (strcmp(f->type, "lost") == 0) {
        mock.lost[e.gpu] = MOCK_LOST_RUNTIME;
        e.lost = true;
    }
    deliver(&e);
}

static void apply_line(const char *text, size_t len)
{
    json_error_t err;
    json_t *obj;

    if (len == 0)
        return;
    obj = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
    if (!obj) {
        line_error("not JSON: %s", err.text);
        return;
    }
    if (json_is_object(obj))
        apply_object(obj);
    else
        line_error("%s", "not a JSON object");
    json_decref(obj);
}

/* ---- tailing the file ---- */

static void tail_reset(void)
{
    mock.tail.offset = 0;
    mock.tail.line = 0;
    mock.tail.skipping = false;
}

/* Splits buf into lines and applies the complete ones; returns the bytes consumed. */
static size_t apply_chunk(const char *buf, size_t len)
{
    size_t used = 0;

    while (used < len) {
        const char *nl = memchr(buf + used, '\n', len - used);
        size_t n;

        if (!nl) {
            if (len - used < LINE_MAX_BYTES)
                break; /* a partial line: wait for its newline */
            mock.tail.skipping = true;
            mock.tail.line++;
            line_error("%s", "line longer than 4096 bytes skipped");
            return len;
        }
        n = (size_t)(nl - (buf + used));
        if (mock.tail.skipping)
            mock.tail.skipping = false;
        else {
            mock.tail.line++;
            if (n >= LINE_MAX_BYTES)
                line_error("%s", "line longer than 4096 bytes skipped");
            else
                apply_line(buf + used, n);
        }
        used += n + 1;
    }
    return used;
}

static void read_new(int fd, uint64_t size)
{
    _cleanup_free_ char *buf = malloc(CHUNK_BYTES);

    while (buf && mock.tail.offset < size) {
        size_t want =
            size - mock.tail.offset > CHUNK_BYTES ? CHUNK_BYTES : (size_t)(size - mock.tail.offset);
        ssize_t got = pread(fd, buf, want, (off_t)mock.tail.offset);
        size_t used;

        if (got <= 0)
            return;
        used = apply_chunk(buf, (size_t)got);
        if (used == 0)
            return;
        mock.tail.offset += used;
    }
}

void mock_events_poll(void)
{
    struct stat st;
    _cleanup_close_ int fd = -1;

    if (!mock.tail.path || !mock.node)
        return;
    if (stat(mock.tail.path, &st) < 0)
        return;
    if (!mock.tail.known || st.st_dev != mock.tail.dev || st.st_ino != mock.tail.ino) {
        /* Another file under the name: a new fault history. */
        if (mock.tail.known)
            memset(mock.lost, 0, sizeof(mock.lost));
        mock.tail.known = true;
        mock.tail.dev = st.st_dev;
        mock.tail.ino = st.st_ino;
        tail_reset();
    }
    if ((uint64_t)st.st_size < mock.tail.offset)
        tail_reset();
    if ((uint64_t)st.st_size == mock.tail.offset)
        return;
    fd = open(mock.tail.path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    read_new(fd, (uint64_t)st.st_size);
}

void mock_events_attach(const char *path)
{
    if (path && mock.tail.path && strcmp(path, mock.tail.path) == 0)
        return;
    if (!path && !mock.tail.path)
        return;
    free(mock.tail.path);
    mock.tail = (struct mock_tail){.path = path ? strdup(path) : NULL};
    memset(mock.lost, 0, sizeof(mock.lost));
}

void mock_events_release(void)
{
    while (mock.sets) {
        struct nvmlEventSet_st *next = mock.sets->next;

        free(mock.sets);
        mock.sets = next;
    }
}

/* ---- event sets ---- */

static nvmlReturn_t event_set(nvmlEventSet_t h, bool ptr_ok, struct nvmlEventSet_st **ret)
{
    nvmlReturn_t r = mock_ready();

    if (r != NVML_SUCCESS)
        return r;
    for (struct nvmlEventSet_st *s = mock.sets; s; s = s->next)
        if (s == h && ptr_ok) {
            *ret = s;
            return NVML_SUCCESS;
        }
    return NVML_ERROR_INVALID_ARGUMENT;
}

nvmlReturn_t nvmlEventSetCreate(nvmlEventSet_t *set)
{
    MOCK_LOCKED;
    struct nvmlEventSet_st *s;
    nvmlReturn_t r = mock_ready();

    if (r != NVML_SUCCESS)
        return r;
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    s = calloc(1, sizeof(*s));
    if (!s)
        return NVML_ERROR_MEMORY;
    s->next = mock.sets;
    mock.sets = s;
    *set = s;
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetFree(nvmlEventSet_t set)
{
    MOCK_LOCKED;
    struct nvmlEventSet_st *s;
    nvmlReturn_t r;

    r = event_set(set, true, &s);
    if (r != NVML_SUCCESS)
        return r;
    for (struct nvmlEventSet_st **p = &mock.sets; *p; p = &(*p)->next)
        if (*p == s) {
            *p = s->next;
            break;
        }
    free(s);
    return NVML_SUCCESS;
}

static unsigned long long supported_events(const struct mock_gpu *gpu)
{
    unsigned long long types = nvmlEventTypeXidCriticalError | nvmlEventTypePState;

    if (gpu->ecc)
        types |= nvmlEventTypeSingleBitEccError | nvmlEventTypeDoubleBitEccError;
    if (gpu->mig_capable)
        types |= nvmlEventMigConfigChange;
    return types;
}

nvmlReturn_t nvmlDeviceGetSupportedEventTypes(nvmlDevice_t device, unsigned long long *eventTypes)
{
    MOCK_LOCKED;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = mock_full_gpu(device, eventTypes != NULL, NVML_ERROR_INVALID_ARGUMENT, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    *eventTypes = supported_events(gpu);
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlDeviceRegisterEvents(nvmlDevice_t device, unsigned long long eventTypes,
                                      nvmlEventSet_t set)
{
    MOCK_LOCKED;
    struct nvmlEventSet_st *s;
    struct mock_gpu *gpu;
    nvmlReturn_t r;

    r = event_set(set, true, &s);
    if (r != NVML_SUCCESS)
        return r;
    r = mock_full_gpu(device, true, NVML_ERROR_INVALID_ARGUMENT, &gpu);
    if (r != NVML_SUCCESS)
        return r;
    if (eventTypes & ~supported_events(gpu))
        return NVML_ERROR_NOT_SUPPORTED;
    s->mask[gpu->index] |= eventTypes;
    return NVML_SUCCESS;
}

static uint64_t now_ms(void)
{
    struct timespec ts;

    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Sleeps on the condition variable until ms (monotonic), releasing the lock meanwhile. */
static void sleep_until(uint64_t ms)
{
    struct timespec ts = {.tv_sec = (time_t)(ms / 1000u), .tv_nsec = (long)(ms % 1000u) * 1000000};

    pthread_cond_timedwait(&mock.cond, &mock.lock, &ts);
}

static nvmlReturn_t pop(struct nvmlEventSet_st *s, nvmlEventData_t *data)
{
    struct mock_event e = s->queue[s->head];

    s->head = (s->head + 1) % MOCK_QUEUE_MAX;
    s->len--;
    if (e.lost)
        return NVML_ERROR_GPU_IS_LOST;
    *data = (nvmlEventData_t){
        .device = mock.node->gpus[e.gpu].handle,
        .eventType = e.type,
        .eventData = e.data,
        .gpuInstanceId = e.gi,
        .computeInstanceId = e.ci,
    };
    return NVML_SUCCESS;
}

nvmlReturn_t nvmlEventSetWait_v2(nvmlEventSet_t set, nvmlEventData_t *data, unsigned int timeoutms)
{
    MOCK_LOCKED;
    struct nvmlEventSet_st *s;
    uint64_t deadline = now_ms() + timeoutms;
    nvmlReturn_t r;

    for (;;) {
        uint64_t now, tick;

        /* Re-validated after every sleep: another thread may have freed the set or shut down. */
        r = event_set(set, data != NULL, &s);
        if (r != NVML_SUCCESS)
            return r;
        mock_events_poll();
        if (s->len > 0)
            return pop(s, data);
        now = now_ms();
        if (now >= deadline)
            return NVML_ERROR_TIMEOUT;
        tick = now + WAIT_TICK_MS;
        sleep_until(tick < deadline ? tick : deadline);
    }
}
