/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Registration with the kubelet's plugin watcher (kubelet-apis.md §4): the driver serves
 * pluginregistration.Registration on <registrar dir>/<driver>-reg.sock; the kubelet sees the file,
 * calls GetInfo (1 s deadline: answered at once), validates, and says how it went with
 * NotifyRegistrationStatus. The watcher only acts on files appearing, so everything that should
 * make the kubelet look again means a new socket file: a refusal re-creates it after a back-off,
 * and a socket that vanished (a restarting kubelet may remove its directory and make it anew) is
 * served again. A one-second check of the file's identity catches both the file and the directory
 * going away, which a watch on the directory alone would not.
 */
#include <errno.h>
#include <libgen.h>
#include <stdlib.h>
#include <string.h>

#include "dra-internal.h"
#include "pluginregistration/v1/api.pb-c.h"

#define GETINFO_PATH "/pluginregistration.Registration/GetInfo"
#define NOTIFY_PATH "/pluginregistration.Registration/NotifyRegistrationStatus"
#define PLUGIN_TYPE "DRAPlugin"
#define CHECK_MS 1000
#define BACKOFF_FIRST_MS 1000
#define BACKOFF_MAX_MS 30000

/* v1 first: the newest kubelets take the first entry they support. */
static const char *const VERSIONS[] = {"v1.DRAPlugin", "v1beta1.DRAPlugin"};

struct dra_registrar {
    struct ev_loop *loop;
    char *socket;
    char *dir;
    char *driver;
    char *endpoint;
    struct rpc_server *srv;
    struct dra_file_id bound; /* the socket file we made */
    struct ev_timer *check;
    struct ev_timer *retry;
    unsigned backoff_ms;
    bool retry_armed;
};

void dra_file_id_get(const char *path, struct dra_file_id *ret)
{
    struct stat st;
    *ret = (struct dra_file_id){0};
    if (stat(path, &st) < 0)
        return;
    *ret = (struct dra_file_id){
        .exists = true, .dev = st.st_dev, .ino = st.st_ino, .ctime = st.st_ctim};
}

bool dra_file_id_equal(const struct dra_file_id *a, const struct dra_file_id *b)
{
    return a->exists == b->exists && a->dev == b->dev && a->ino == b->ino &&
           a->ctime.tv_sec == b->ctime.tv_sec && a->ctime.tv_nsec == b->ctime.tv_nsec;
}

static void on_get_info(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    struct dra_registrar *r = userdata;
    Pluginregistration__PluginInfo info = PLUGINREGISTRATION__PLUGIN_INFO__INIT;
    info.type = (char *)PLUGIN_TYPE;
    info.name = r->driver;
    info.endpoint = r->endpoint;
    info.n_supported_versions = ARRAY_SIZE(VERSIONS);
    info.supported_versions = (char **)VERSIONS;
    log_debug(1, "GetInfo from the kubelet", "driver", r->driver);
    if (rpc_call_reply(call, &info.base) < 0)
        log_warn("cannot answer GetInfo", "driver", r->driver);
}

static void on_notify(struct rpc_call *call, const ProtobufCMessage *request, void *userdata)
{
    struct dra_registrar *r = userdata;
    const Pluginregistration__RegistrationStatus *st =
        (const Pluginregistration__RegistrationStatus *)request;
    Pluginregistration__RegistrationStatusResponse resp =
        PLUGINREGISTRATION__REGISTRATION_STATUS_RESPONSE__INIT;
    if (rpc_call_reply(call, &resp.base) < 0)
        log_debug(1, "cannot answer NotifyRegistrationStatus");
    if (st->plugin_registered) {
        r->backoff_ms = BACKOFF_FIRST_MS;
        log_info("registered with the kubelet", "driver", r->driver, "endpoint", r->endpoint);
        return;
    }
    log_error("the kubelet refused the registration; offering it again", "driver", r->driver,
              "error", st->error ? st->error : "", "retry_ms", LOG_INT(r->backoff_ms));
    if (r->retry_armed)
        return;
    if (ev_timer_set(r->retry, r->backoff_ms, 0) < 0) {
        log_error("cannot arm the registration retry timer");
        return;
    }
    r->retry_armed = true;
    r->backoff_ms = r->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : r->backoff_ms * 2;
}

static int add_methods(struct dra_registrar *r)
{
    const struct rpc_method methods[] = {
        {.path = GETINFO_PATH,
         .request = &pluginregistration__info_request__descriptor,
         .response = &pluginregistration__plugin_info__descriptor,
         .handler = on_get_info,
         .userdata = r},
        {.path = NOTIFY_PATH,
         .request = &pluginregistration__registration_status__descriptor,
         .response = &pluginregistration__registration_status_response__descriptor,
         .handler = on_notify,
         .userdata = r},
    };
    for (size_t i = 0; i < ARRAY_SIZE(methods); i++) {
        int e = rpc_server_add_method(r->srv, &methods[i]);
        if (e < 0)
            return e;
    }
    return 0;
}

/* A fresh server on a fresh socket file (the old one, if any, goes first). */
static int serve(struct dra_registrar *r, struct diag *d)
{
    r->srv = rpc_server_free(r->srv);
    r->bound = (struct dra_file_id){0};
    int e = file_mkdir_p(r->dir, 0755);
    if (e < 0)
        return diag_fail(d, e, "cannot create %s: %s", r->dir, strerror(-e));
    e = rpc_server_new(r->loop, NULL, &r->srv);
    if (e >= 0)
        e = add_methods(r);
    if (e >= 0)
        e = rpc_server_listen(r->srv, r->socket, d);
    if (e < 0) {
        r->srv = rpc_server_free(r->srv);
        if (!d || !d->msg[0])
            diag_fail(d, e, "cannot serve %s: %s", r->socket, strerror(-e));
        return e;
    }
    dra_file_id_get(r->socket, &r->bound);
    log_info("serving the registration socket", "socket", r->socket);
    return 0;
}

static void serve_logged(struct dra_registrar *r)
{
    struct diag d;
    diag_init(&d);
    if (serve(r, &d) < 0)
        log_error("cannot serve the registration socket; trying again", "error", d.msg);
}

static void on_check(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct dra_registrar *r = userdata;
    struct dra_file_id now;
    dra_file_id_get(r->socket, &now);
    if (r->srv && dra_file_id_equal(&now, &r->bound))
        return;
    if (r->srv)
        log_info("the registration socket is gone (kubelet restart?); serving it again", "socket",
                 r->socket);
    serve_logged(r);
}

static void on_retry(struct ev_timer *t, uint64_t expirations, void *userdata)
{
    struct dra_registrar *r = userdata;
    r->retry_armed = false;
    log_info("offering the registration socket again", "socket", r->socket);
    serve_logged(r);
}

int dra_registrar_new(struct ev_loop *loop, const char *socket, const char *driver,
                      const char *endpoint, struct diag *d, struct dra_registrar **ret)
{
    _cleanup_(dra_registrar_freep) struct dra_registrar *r = calloc(1, sizeof(*r));
    _cleanup_free_ char *copy = strdup(socket);
    if (!r || !copy)
        return -ENOMEM;
    r->loop = loop;
    r->backoff_ms = BACKOFF_FIRST_MS;
    r->socket = strdup(socket);
    r->dir = strdup(dirname(copy));
    r->driver = strdup(driver);
    r->endpoint = strdup(endpoint);
    if (!r->socket || !r->dir || !r->driver || !r->endpoint)
        return -ENOMEM;
    int e = ev_timer_add(loop, CHECK_MS, CHECK_MS, on_check, r, &r->check);
    if (e >= 0)
        e = ev_timer_add(loop, BACKOFF_MAX_MS, 0, on_retry, r, &r->retry);
    if (e >= 0)
        e = ev_timer_disarm(r->retry);
    if (e < 0)
        return diag_fail(d, e, "cannot set up timers: %s", strerror(-e));
    e = serve(r, d);
    if (e < 0)
        return e;
    *ret = TAKE_PTR(r);
    return 0;
}

struct dra_registrar *dra_registrar_free(struct dra_registrar *r)
{
    if (!r)
        return NULL;
    r->srv = rpc_server_free(r->srv);
    ev_timer_del(r->check);
    ev_timer_del(r->retry);
    free(r->socket);
    free(r->dir);
    free(r->driver);
    free(r->endpoint);
    free(r);
    return NULL;
}
