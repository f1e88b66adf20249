/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The floor under bench/deviceplugin's side by side: the least any server can do to answer the
 * grpc-go client's Allocate. It listens on a unix socket, takes one connection at a time and
 * answers every request stream with the same bytes gpuplane would send for Allocate of one GPU in
 * the envvar strategy (NVIDIA_VISIBLE_DEVICES=ID): response HEADERS, one DATA frame and the
 * trailers, written with one write(). No event loop, no HPACK decoding (the request headers are
 * skipped; the answer's header fields are indexed as nghttp2 indexes them), no protobuf, no checks;
 * blocking reads, so a call costs one read() and one write(). What the client measures
 * against it is grpc-go's own cost plus the kernel's round trip across the two CPUs: no server
 * can be faster, so gpuplane / grpc-go cannot go below floor / grpc-go.
 *
 *   h2-floor SOCKET ID
 *
 * Prints "ready" once it listens; ends on SIGTERM. It speaks just enough HTTP/2 for a well-behaved
 * client: the server SETTINGS, SETTINGS and PING acknowledgements, and connection WINDOW_UPDATEs
 * for the request bytes it consumed. Built by bench/deviceplugin/run.py with the system's cc; not
 * part of the project build, and not a server for anything else.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

enum {
    DATA = 0,
    HEADERS = 1,
    SETTINGS = 4,
    PING = 6,
    GOAWAY = 7,
    WINDOW_UPDATE = 8
};
enum {
    END_STREAM = 0x1,
    ACK = 0x1,
    END_HEADERS = 0x4
};

#define PREFACE_LEN 24
#define IN_CAP 65536
#define OUT_CAP 4096

struct buf {
    uint8_t b[OUT_CAP];
    size_t n;
};

static void put(struct buf *o, const void *p, size_t n)
{
    if (o->n + n > sizeof(o->b)) {
        fprintf(stderr, "h2-floor: answer too large\n");
        exit(1);
    }
    memcpy(o->b + o->n, p, n);
    o->n += n;
}

static void put8(struct buf *o, unsigned v)
{
    uint8_t c = (uint8_t)v;
    put(o, &c, 1);
}

static void frame_head(struct buf *o, size_t len, unsigned type, unsigned flags, uint32_t stream)
{
    put8(o, (unsigned)(len >> 16));
    put8(o, (unsigned)(len >> 8));
    put8(o, (unsigned)len);
    put8(o, type);
    put8(o, flags);
    put8(o, stream >> 24);
    put8(o, stream >> 16);
    put8(o, stream >> 8);
    put8(o, stream);
}

/* A string (shorter than 128 octets) with its length: protobuf and HPACK agree on this form. */
static void put_str(struct buf *o, const char *s)
{
    size_t n = strlen(s);
    if (n > 127) {
        fprintf(stderr, "h2-floor: string too long\n");
        exit(1);
    }
    put8(o, (unsigned)n);
    put(o, s, n);
}

/* The AllocateResponse: container_responses[0].envs = {NVIDIA_VISIBLE_DEVICES: id}. */
static void allocate_response(struct buf *msg, const char *id)
{
    struct buf entry = {0}, container = {0};

    put8(&entry, 0x0a); /* key, field 1 */
    put_str(&entry, "NVIDIA_VISIBLE_DEVICES");
    put8(&entry, 0x12); /* value, field 2 */
    put_str(&entry, id);
    put8(&container, 0x0a); /* envs, field 1 */
    put8(&container, (unsigned)entry.n);
    put(&container, entry.b, entry.n);
    put8(msg, 0x0a); /* container_responses, field 1 */
    put8(msg, (unsigned)container.n);
    put(msg, container.b, container.n);
}

/* The answer to one stream: HEADERS, DATA, trailers, with the stream id patched in by answer().
 * The first answer on a connection adds content-type and grpc-status: 0 to the client's HPACK
 * table, as nghttp2 does; the later ones name them by index (62 is the newest entry), so the client
 * decodes no literal after the first call. */
struct reply {
    struct buf b;
    size_t ids[3];
};
static struct reply first_reply, later_reply;

static void build_reply(struct reply *r, const char *id, bool first)
{
    struct buf msg = {0}, head = {0}, trailers = {0};
    uint8_t prefix[5] = {0};

    allocate_response(&msg, id);
    if (msg.n > 127) {
        fprintf(stderr, "h2-floor: id too long\n");
        exit(1);
    }
    prefix[4] = (uint8_t)msg.n;
    put8(&head, 0x88); /* :status: 200, static index 8 */
    if (first) {
        put8(&head, 0x5f); /* content-type (static 31), literal, indexed: becomes 62 */
        put_str(&head, "application/grpc");
        put8(&trailers, 0x40); /* literal name, indexed: becomes 62, content-type 63 */
        put_str(&trailers, "grpc-status");
        put_str(&trailers, "0");
    } else {
        put8(&head, 0x80 | 63);
        put8(&trailers, 0x80 | 62);
    }

    r->ids[0] = r->b.n + 5;
    frame_head(&r->b, head.n, HEADERS, END_HEADERS, 0);
    put(&r->b, head.b, head.n);
    r->ids[1] = r->b.n + 5;
    frame_head(&r->b, sizeof(prefix) + msg.n, DATA, 0, 0);
    put(&r->b, prefix, sizeof(prefix));
    put(&r->b, msg.b, msg.n);
    r->ids[2] = r->b.n + 5;
    frame_head(&r->b, trailers.n, HEADERS, END_HEADERS | END_STREAM, 0);
    put(&r->b, trailers.b, trailers.n);
}

static void answer(struct buf *o, struct reply *r, uint32_t stream)
{
    for (size_t i = 0; i < 3; i++) {
        r->b.b[r->ids[i]] = (uint8_t)(stream >> 24);
        r->b.b[r->ids[i] + 1] = (uint8_t)(stream >> 16);
        r->b.b[r->ids[i] + 2] = (uint8_t)(stream >> 8);
        r->b.b[r->ids[i] + 3] = (uint8_t)stream;
    }
    put(o, r->b.b, r->b.n);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

/* Serves one connection until the client closes it. */
static void serve(int fd)
{
    static uint8_t in[IN_CAP];
    size_t have = 0, off = 0, unacked = 0;
    bool preface = false, answered = false;
    struct buf out = {0};

    frame_head(&out, 0, SETTINGS, 0, 0);
    if (write_all(fd, out.b, out.n) < 0)
        return;
    for (;;) {
        ssize_t n = read(fd, in + have, sizeof(in) - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        have += (size_t)n;
        out.n = 0;
        if (!preface) {
            if (have < PREFACE_LEN)
                continue;
            preface = true;
            off = PREFACE_LEN;
        }
        while (have - off >= 9) {
            const uint8_t *h = in + off;
            size_t len = (size_t)h[0] << 16 | (size_t)h[1] << 8 | h[2];
            unsigned type = h[3], flags = h[4];
            uint32_t stream =
                ((uint32_t)h[5] << 24 | (uint32_t)h[6] << 16 | (uint32_t)h[7] << 8 | h[8]) &
                0x7fffffff;

            if (len > sizeof(in) - 9) {
                fprintf(stderr, "h2-floor: frame of %zu octets\n", len);
                return;
            }
            if (have - off < 9 + len)
                break;
            if (type == SETTINGS && !(flags & ACK)) {
                frame_head(&out, 0, SETTINGS, ACK, 0);
            } else if (type == PING && !(flags & ACK) && len == 8) {
                frame_head(&out, 8, PING, ACK, 0);
                put(&out, h + 9, 8);
            } else if (type == DATA) {
                unacked += len;
                if (flags & END_STREAM) {
                    answer(&out, answered ? &later_reply : &first_reply, stream);
                    answered = true;
                }
            } else if (type == HEADERS && (flags & END_STREAM)) {
                /* A request without a message: answered the same. */
                answer(&out, answered ? &later_reply : &first_reply, stream);
                answered = true;
            } else if (type == GOAWAY) {
                return;
            }
            off += 9 + len;
        }
        /* The connection's receive window: give back what was consumed once it adds up. */
        if (unacked >= 16384) {
            frame_head(&out, 4, WINDOW_UPDATE, 0, 0);
            put8(&out, (unsigned)(unacked >> 24));
            put8(&out, (unsigned)(unacked >> 16));
            put8(&out, (unsigned)(unacked >> 8));
            put8(&out, (unsigned)unacked);
            unacked = 0;
        }
        memmove(in, in + off, have - off);
        have -= off;
        off = 0;
        if (out.n > 0 && write_all(fd, out.b, out.n) < 0)
            return;
    }
}

static const char *socket_path;

static void on_term(int sig)
{
    (void)sig;
    unlink(socket_path);
    _exit(0);
}

int main(int argc, char **argv)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    int lfd;

    if (argc != 3 || strlen(argv[1]) >= sizeof(sa.sun_path)) {
        fprintf(stderr, "usage: h2-floor SOCKET ID\n");
        return 2;
    }
    socket_path = argv[1];
    build_reply(&first_reply, argv[2], true);
    build_reply(&later_reply, argv[2], false);
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    memcpy(sa.sun_path, argv[1], strlen(argv[1]) + 1);
    unlink(argv[1]);
    lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 16) < 0) {
        perror("h2-floor: listen");
        return 1;
    }
    printf("ready\n");
    fflush(stdout);
    for (;;) {
        int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
        if (fd < 0) {
            if (errno == EINTR)
                continue;
            perror("h2-floor: accept");
            return 1;
        }
        serve(fd);
        close(fd);
    }
}
