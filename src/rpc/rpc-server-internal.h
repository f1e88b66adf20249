/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The server's own structures, shared by its files: the server and its listeners
 * (rpc-server.c, rpc-socket.c), a connection with its nghttp2 session (rpc-server-conn.c) and a
 * call, which is one HTTP/2 stream (rpc-server-call.c).
 *
 * Lifetimes. A connection is marked dead where trouble is found and freed only by the server's
 * reaper (a zero-delay timer), so nothing deep inside a callback frees what a caller up the stack
 * still uses. A call lives while its stream is open or its handler holds it: it is freed when both
 * are over. A call whose stream ended while its handler still holds it (no cancel callback) waits
 * on the server's orphan list for the handler to finish it.
 */
#pragma once

#include "rpc-internal.h"

struct rpc_listener {
    struct rpc_server *srv;
    int fd;
    struct ev_io *io;
    char *path;
    dev_t dev; /* of the socket file we created, to remove only ours */
    ino_t ino;
};

struct rpc_server {
    struct ev_loop *loop;
    struct rpc_server_options opts;
    struct rpc_method **methods;
    size_t n_methods;
    struct rpc_listener **listeners;
    size_t n_listeners;
    struct rpc_conn *conns; /* doubly linked */
    size_t n_conns;
    struct rpc_call *orphans; /* calls whose stream is gone but whose handler holds them */
    size_t n_calls;
    struct ev_timer *reaper; /* frees dead connections, reports shutdown completion */
    bool shutting_down;
    bool freeing;
    void (*done)(void *userdata);
    void *done_userdata;
};

struct rpc_conn {
    struct rpc_server *srv;
    struct rpc_conn *prev, *next;
    int fd;
    struct ev_io *io;
    uint32_t io_events;
    nghttp2_session *session;
    struct strbuf out; /* bytes nghttp2 produced that the socket did not take yet */
    size_t out_off;
    struct rpc_call *calls; /* open streams, doubly linked */
    unsigned depth;         /* > 0 while nghttp2 runs our callbacks: sending is deferred */
    bool dead;              /* to be closed by the reaper */
    bool goaway_final;      /* the last-stream GOAWAY has been submitted */
    bool notice_sent;
    bool flush_pending;     /* output submitted outside the I/O callback: the reaper flushes it */
    bool deadlines_pending; /* a call got a deadline whose timer is not armed yet */
};

struct rpc_call {
    struct rpc_server *srv;
    struct rpc_conn *conn; /* NULL once the stream is gone */
    struct rpc_call *prev, *next;
    int32_t stream_id;
    const struct rpc_method *method;
    struct rpc_header_list headers;
    struct rpc_msg_reader reader;
    ProtobufCMessage *request; /* in arena */
    struct rpc_arena arena;
    unsigned n_messages;
    struct rpc_outbuf out;
    uint64_t deadline_ms;
    struct ev_timer *timer;
    void (*cancel_fn)(struct rpc_call *call, void *userdata);
    void *cancel_userdata;
    bool remote_closed; /* the client half-closed (END_STREAM) */
    bool held;          /* the handler has the call and has not finished it */
    bool responding;    /* response HEADERS submitted with a data provider */
    bool ended;         /* the status is decided and submitted (or dropped) */
    bool dispatched;
    bool orphan; /* on the server's orphan list */
    uint32_t
        rst_code; /* RST_STREAM sent after our END_STREAM when the client has not half-closed */
    int status;
    char *status_message; /* percent-encoded; NULL when empty */
};

/* rpc-socket.c: binds, sets the mode and listens, then renames into place; the file's identity
 * comes back for rpc_socket_remove(). */
_wur_ int rpc_socket_listen(const char *path, mode_t mode, int *ret_fd, dev_t *ret_dev,
                            ino_t *ret_ino, struct diag *d);
/* Unlinks path if it is still the file we created. */
void rpc_socket_remove(const char *path, dev_t dev, ino_t ino);

/* rpc-server.c */
/* Arms the reaper: dead connections are freed and shutdown completion reported on the next loop
 * iteration, outside of every nghttp2 and handler callback. */
void rpc_server_reap_soon(struct rpc_server *srv);
const struct rpc_method *rpc_server_find_method(const struct rpc_server *srv, const char *path);
/* True when some method path starts with "/<service>/". */
bool rpc_server_has_service(const struct rpc_server *srv, const char *service, size_t len);

/* rpc-server-conn.c */
_wur_ int rpc_conn_new(struct rpc_server *srv, int fd);
/* Marks the connection dead; the reaper closes it. */
void rpc_conn_kill(struct rpc_conn *conn);
/* Frees a connection: ends its calls (cancel callbacks), frees the session, closes the fd. */
void rpc_conn_free(struct rpc_conn *conn);
/* Writes what nghttp2 has to send, unless inside one of its callbacks (then the outer caller
 * does); marks the connection dead when it is finished or broken. Runs nghttp2 callbacks, hence
 * cancel callbacks: only for top-level callers (I/O callback, reaper). */
void rpc_conn_flush(struct rpc_conn *conn);
/* Asks for a flush on the next loop iteration (or after the current I/O callback): what the
 * handler-facing functions use, so they never call back into a handler. */
void rpc_conn_flush_soon(struct rpc_conn *conn);
/* Graceful stop of one connection: GOAWAY, then streaming calls end with OK. */
void rpc_conn_shutdown(struct rpc_conn *conn);
/* The last GOAWAY, once the client had a round trip to see the first. */
void rpc_conn_goaway_final(struct rpc_conn *conn);

/* rpc-server-call.c */
_wur_ int rpc_call_new(struct rpc_conn *conn, int32_t stream_id, struct rpc_call **ret);
/* The stream is gone (closed, reset, or its connection closed): runs the cancel callback if the
 * handler still holds the call, then frees it or leaves it to the handler. */
void rpc_call_detach(struct rpc_call *call);
/* Frees a call whatever its state (rpc_server_free). */
void rpc_call_free(struct rpc_call *call);
/* Ends a call from the server side: runs the cancel callback, then sends the status. */
void rpc_call_abort(struct rpc_call *call, enum rpc_code code, const char *message);
void rpc_call_fail(struct rpc_call *call, unsigned http_status, enum rpc_code code, const char *fmt,
                   ...) _printf_(4, 5);
void rpc_call_set_callbacks(nghttp2_session_callbacks *cbs);
/* Arms the deadline timers of the calls that got one while reading and are still open; only from
 * the I/O callback, once nghttp2 has returned (an abort here runs a cancel callback). */
void rpc_conn_arm_deadlines(struct rpc_conn *conn);
