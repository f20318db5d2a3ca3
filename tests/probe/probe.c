/*
 * probe — attempt ONE operation and report what happened as one JSON line.
 *
 *   probe OP [ARGS...]
 *
 * stdout: {"op":"...","ok":true|false,"errno":N,"errname":"EACCES","detail":"..."}
 * exit:   0 ok, 1 refused/failed, 2 usage error (a test bug), 3 unsupported here
 *         (architecture); a fatal signal (SIGSYS from seccomp) just kills it and the
 *         harness sees the signal.
 *
 * Used by tests/security.rs, run both inside `cordon run` (where most operations must
 * fail) and directly on the host (positive controls: the same operation works without
 * the sandbox, so a refusal inside is the sandbox's doing). Linux only.
 *
 * Build: cc -O2 -Wall -o probe probe.c
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/bpf.h>
#include <linux/perf_event.h>
#include <mqueue.h>
#include <net/ethernet.h>
#include <netinet/in.h>
#include <netinet/ip_icmp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/ipc.h>
#include <sys/mman.h>
#include <sys/mount.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/resource.h>
#include <sys/sem.h>
#include <sys/shm.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/time.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>

#ifndef IPPROTO_MPTCP
#define IPPROTO_MPTCP 262
#endif
#ifndef RENAME_EXCHANGE
#define RENAME_EXCHANGE (1 << 1)
#endif
#ifndef RENAME_NOREPLACE
#define RENAME_NOREPLACE (1 << 0)
#endif
#ifndef CLONE_NEWCGROUP
#define CLONE_NEWCGROUP 0x02000000
#endif
#ifndef CLONE_NEWTIME
#define CLONE_NEWTIME 0x00000080
#endif
#ifndef TIOCLINUX
#define TIOCLINUX 0x541C
#endif
#ifndef UFFD_USER_MODE_ONLY
#define UFFD_USER_MODE_ONLY 1
#endif
#ifndef KEY_SPEC_USER_KEYRING
#define KEY_SPEC_USER_KEYRING -4
#endif
#ifndef KEYCTL_SEARCH
#define KEYCTL_SEARCH 10
#endif
#ifndef KEYCTL_INVALIDATE
#define KEYCTL_INVALIDATE 21
#endif
#ifndef KEYCTL_GET_KEYRING_ID
#define KEYCTL_GET_KEYRING_ID 0
#endif
#ifndef __NR_clone3
#define __NR_clone3 435
#endif
#ifndef __NR_io_uring_setup
#define __NR_io_uring_setup 425
#endif
#ifndef __NR_pidfd_open
#define __NR_pidfd_open 434
#endif
#ifndef __NR_pidfd_send_signal
#define __NR_pidfd_send_signal 424
#endif
#ifndef __NR_userfaultfd
#define __NR_userfaultfd 323
#endif
#ifndef __NR_renameat2
#define __NR_renameat2 316
#endif

#define X32_SYSCALL_BIT 0x40000000L
#define DEFAULT_DATA "cordon-probe-was-here\n"

static const char *g_op = "";
static char g_detail[65536];
static size_t g_dlen;

/* ---------------------------------------------------------------- output */

static void put_json_string(const char *s, size_t n) {
    static const char hex[] = "0123456789abcdef";
    putchar('"');
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\') {
            putchar('\\');
            putchar(c);
        } else if (c == '\n') {
            fputs("\\n", stdout);
        } else if (c == '\t') {
            fputs("\\t", stdout);
        } else if (c == '\r') {
            fputs("\\r", stdout);
        } else if (c < 0x20 || c >= 0x7f) {
            /* bytes, not code points: keeps the line valid JSON whatever the input */
            fputs("\\u00", stdout);
            putchar(hex[c >> 4]);
            putchar(hex[c & 15]);
        } else {
            putchar(c);
        }
    }
    putchar('"');
}

static void dappend(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void dappend(const char *fmt, ...) {
    if (g_dlen >= sizeof g_detail - 1)
        return;
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(g_detail + g_dlen, sizeof g_detail - g_dlen, fmt, ap);
    va_end(ap);
    if (n > 0) {
        g_dlen += (size_t)n;
        if (g_dlen > sizeof g_detail - 1)
            g_dlen = sizeof g_detail - 1;
    }
}

static void dappend_bytes(const char *buf, size_t n) {
    size_t room = sizeof g_detail - 1 - g_dlen;
    if (n > room)
        n = room;
    memcpy(g_detail + g_dlen, buf, n);
    g_dlen += n;
    g_detail[g_dlen] = 0;
}

static void emit_exit(int ok, int err, const char *errname_override, int code)
    __attribute__((noreturn));
static void emit_exit(int ok, int err, const char *errname_override, int code) {
    const char *name = errname_override;
    if (!name)
        name = err ? strerrorname_np(err) : "";
    if (!name)
        name = "E?";
    fputs("{\"op\":", stdout);
    put_json_string(g_op, strlen(g_op));
    printf(",\"ok\":%s,\"errno\":%d,\"errname\":", ok ? "true" : "false", err);
    put_json_string(name, strlen(name));
    fputs(",\"detail\":", stdout);
    put_json_string(g_detail, g_dlen);
    fputs("}\n", stdout);
    fflush(stdout);
    _exit(code);
}

/* The operation worked. */
static void succeed(void) __attribute__((noreturn));
static void succeed(void) { emit_exit(1, 0, NULL, 0); }

/* The operation was refused or failed at STEP with ERR. */
static void fail(int err, const char *step) __attribute__((noreturn));
static void fail(int err, const char *step) {
    if (g_dlen && !(g_dlen >= 2 && g_detail[g_dlen - 2] == ';'))
        dappend("; ");
    dappend("%s: %s", step, strerror(err));
    emit_exit(0, err, NULL, 1);
}

static void usage(const char *msg) __attribute__((noreturn));
static void usage(const char *msg) {
    dappend("usage: %s", msg);
    emit_exit(0, 0, "USAGE", 2);
}

#if !defined(__x86_64__)
static void unsupported(const char *msg) __attribute__((noreturn));
static void unsupported(const char *msg) {
    dappend("unsupported: %s", msg);
    emit_exit(0, ENOSYS, "UNSUPPORTED", 3);
}
#endif

#define TRY(expr, step)                                                        \
    do {                                                                       \
        if ((long)(expr) < 0)                                                  \
            fail(errno, step);                                                 \
    } while (0)

static long num(const char *s) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 0);
    if (errno || *end)
        usage("expected a number");
    return v;
}

static unsigned long unum(const char *s) {
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 0);
    if (errno || *end)
        usage("expected a number");
    return v;
}

static const char *data_arg(int argc, char **argv, int i) {
    return argc > i ? argv[i] : DEFAULT_DATA;
}

static void write_all(int fd, const char *data, const char *step) {
    size_t n = strlen(data), off = 0;
    while (off < n) {
        ssize_t w = write(fd, data + off, n - off);
        if (w < 0)
            fail(errno, step);
        off += (size_t)w;
    }
}

/* ---------------------------------------------------------------- files */

static void op_open_write(const char *path, int flags, const char *data) {
    int fd = open(path, flags, 0644);
    TRY(fd, "open");
    if (data)
        write_all(fd, data, "write");
    TRY(close(fd), "close");
    succeed();
}

static void op_read(const char *path) {
    int fd = open(path, O_RDONLY);
    TRY(fd, "open");
    char buf[16384];
    ssize_t n = read(fd, buf, sizeof buf);
    TRY(n, "read");
    dappend_bytes(buf, (size_t)n);
    close(fd);
    succeed();
}

static void op_ls(const char *path) {
    DIR *d = opendir(path);
    if (!d)
        fail(errno, "opendir");
    struct dirent *e;
    int first = 1;
    errno = 0;
    while ((e = readdir(d))) {
        if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
            continue;
        dappend("%s%s", first ? "" : ",", e->d_name);
        first = 0;
    }
    if (errno)
        fail(errno, "readdir");
    closedir(d);
    succeed();
}

static void op_stat(const char *path) {
    struct stat st;
    TRY(lstat(path, &st), "lstat");
    dappend("mode=%o uid=%u gid=%u size=%lld mtime=%lld", (unsigned)st.st_mode,
            (unsigned)st.st_uid, (unsigned)st.st_gid, (long long)st.st_size,
            (long long)st.st_mtime);
    succeed();
}

static void op_readlink(const char *path) {
    char buf[PATH_MAX];
    ssize_t n = readlink(path, buf, sizeof buf - 1);
    TRY(n, "readlink");
    dappend_bytes(buf, (size_t)n);
    succeed();
}

static void op_tmpfile_link(const char *dir, const char *dest) {
    int fd = open(dir, O_TMPFILE | O_WRONLY, 0644);
    TRY(fd, "open(O_TMPFILE)");
    write_all(fd, DEFAULT_DATA, "write");
    if (linkat(fd, "", AT_FDCWD, dest, AT_EMPTY_PATH) == 0) {
        dappend("linked via AT_EMPTY_PATH");
        succeed();
    }
    dappend("linkat(AT_EMPTY_PATH): %s; ", strerror(errno));
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    TRY(linkat(AT_FDCWD, proc, AT_FDCWD, dest, AT_SYMLINK_FOLLOW),
        "linkat(/proc/self/fd)");
    dappend("linked via /proc/self/fd");
    succeed();
}

static void op_utimes(const char *path) {
    struct timespec ts[2] = {{1000000000, 0}, {1000000000, 0}};
    TRY(utimensat(AT_FDCWD, path, ts, AT_SYMLINK_NOFOLLOW), "utimensat");
    succeed();
}

/* Re-opens PATH for writing through the /proc/self/fd magic link of a read-only fd. */
static void op_reopen_write(const char *path, const char *data) {
    int fd = open(path, O_RDONLY);
    TRY(fd, "open(O_RDONLY)");
    char proc[64];
    snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
    op_open_write(proc, O_WRONLY | O_APPEND, data);
}

/* Links SRC (reached through an O_PATH fd) to DST via /proc/self/fd, writes through DST. */
static void op_fdlink_write(const char *src, const char *dst, const char *data) {
    int fd = open(src, O_PATH);
    TRY(fd, "open(O_PATH)");
    if (linkat(fd, "", AT_FDCWD, dst, AT_EMPTY_PATH) < 0) {
        dappend("linkat(AT_EMPTY_PATH): %s; ", strerror(errno));
        char proc[64];
        snprintf(proc, sizeof proc, "/proc/self/fd/%d", fd);
        if (linkat(AT_FDCWD, proc, AT_FDCWD, dst, AT_SYMLINK_FOLLOW) < 0)
            dappend("linkat(/proc/self/fd): %s; ", strerror(errno));
    }
    op_open_write(dst, O_WRONLY | O_APPEND, data);
}

/* name_to_handle_at + open_by_handle_at(O_WRONLY): opens by inode, not by path. */
static void op_open_by_handle(const char *path, const char *data) {
    struct {
        struct file_handle fh;
        unsigned char buf[MAX_HANDLE_SZ];
    } h;
    h.fh.handle_bytes = MAX_HANDLE_SZ;
    int mount_id;
    TRY(name_to_handle_at(AT_FDCWD, path, &h.fh, &mount_id, 0), "name_to_handle_at");
    int mfd = open(path, O_RDONLY);
    TRY(mfd, "open(mount fd)");
    int fd = open_by_handle_at(mfd, &h.fh, O_WRONLY | O_APPEND);
    TRY(fd, "open_by_handle_at");
    write_all(fd, data, "write");
    succeed();
}

/* socket() for every address family and common type; ok=true always, the detail
 * lists what worked as family/type pairs. */
static void op_socket_sweep(void) {
    static const int types[] = {SOCK_STREAM, SOCK_DGRAM, SOCK_RAW, SOCK_SEQPACKET};
    int first = 1;
    dappend("created=[");
    for (int fam = 0; fam < 64; fam++) {
        for (size_t t = 0; t < sizeof types / sizeof types[0]; t++) {
            int sfd = socket(fam, types[t] | SOCK_CLOEXEC, 0);
            if (sfd >= 0) {
                dappend("%s%d/%d", first ? "" : ",", fam, types[t]);
                first = 0;
                close(sfd);
            }
        }
    }
    dappend("]");
    succeed();
}

/* ---------------------------------------------------------------- network */

/* Fills ss from HOST (an IPv4 or IPv6 literal) and PORT; returns the family. */
static int sockaddr_of(const char *host, const char *port, struct sockaddr_storage *ss,
                       socklen_t *len) {
    memset(ss, 0, sizeof *ss);
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, host, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)num(port));
        *len = sizeof *a4;
        return AF_INET;
    }
    if (inet_pton(AF_INET6, host, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)num(port));
        *len = sizeof *a6;
        return AF_INET6;
    }
    usage("HOST must be an IPv4 or IPv6 literal");
}

static void op_stream_connect(const char *host, const char *port, int proto) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int s = socket(fam, SOCK_STREAM, proto);
    TRY(s, "socket");
    TRY(connect(s, (struct sockaddr *)&ss, len), "connect");
    TRY(send(s, "X", 1, MSG_NOSIGNAL), "send");
    close(s);
    succeed();
}

/* TCP Fast Open: connect and send in one sendto(), with no connect() call at all. */
static void op_tcp_fastopen(const char *host, const char *port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int s = socket(fam, SOCK_STREAM, 0);
    TRY(s, "socket");
    TRY(sendto(s, "X", 1, MSG_FASTOPEN | MSG_NOSIGNAL, (struct sockaddr *)&ss, len), "sendto(MSG_FASTOPEN)");
    close(s);
    succeed();
}

static void op_udp_send(const char *host, const char *port, const char *payload,
                        size_t plen) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int s = socket(fam, SOCK_DGRAM, 0);
    TRY(s, "socket");
    TRY(sendto(s, payload, plen, 0, (struct sockaddr *)&ss, len), "sendto");
    close(s);
    succeed();
}

static void op_dns(const char *host, const char *port) {
    /* A real DNS query for example.com/A, so a resolver-shaped listener sees one. */
    static const unsigned char q[] = {0x12, 0x34, 0x01, 0x00, 0x00, 0x01, 0x00, 0x00,
                                      0x00, 0x00, 0x00, 0x00, 7,    'e',  'x',  'a',
                                      'm',  'p',  'l',  'e',  3,    'c',  'o',  'm',
                                      0,    0x00, 0x01, 0x00, 0x01};
    op_udp_send(host, port, (const char *)q, sizeof q);
}

static void op_listen(const char *host, const char *port, const char *ms) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int s = socket(fam, SOCK_STREAM, 0);
    TRY(s, "socket");
    int one = 1;
    setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    TRY(bind(s, (struct sockaddr *)&ss, len), "bind");
    TRY(listen(s, 16), "listen");
    int accepted = 0;
    long wait_ms = num(ms);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (el >= wait_ms)
            break;
        struct pollfd p = {s, POLLIN, 0};
        if (poll(&p, 1, (int)(wait_ms - el)) > 0) {
            int c = accept(s, NULL, NULL);
            if (c >= 0) {
                accepted++;
                close(c);
            }
        }
    }
    dappend("listening; accepted=%d", accepted);
    succeed();
}

static void op_socket_only(int fam, int type, int proto) {
    int s = socket(fam, type, proto);
    TRY(s, "socket");
    close(s);
    succeed();
}

static void op_ping(const char *host) {
    struct sockaddr_storage ss;
    socklen_t len;
    sockaddr_of(host, "0", &ss, &len);
    int s = socket(AF_INET, SOCK_DGRAM, IPPROTO_ICMP);
    TRY(s, "socket");
    struct icmphdr h;
    memset(&h, 0, sizeof h);
    h.type = ICMP_ECHO;
    TRY(sendto(s, &h, sizeof h, 0, (struct sockaddr *)&ss, len), "sendto");
    close(s);
    succeed();
}

static void op_netlink(void) {
    int s = socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE);
    TRY(s, "socket");
    struct {
        struct nlmsghdr nh;
        struct rtgenmsg g;
    } req;
    memset(&req, 0, sizeof req);
    req.nh.nlmsg_len = sizeof req;
    req.nh.nlmsg_type = RTM_GETLINK;
    req.nh.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
    req.g.rtgen_family = AF_UNSPEC;
    struct sockaddr_nl sa = {.nl_family = AF_NETLINK};
    TRY(sendto(s, &req, sizeof req, 0, (struct sockaddr *)&sa, sizeof sa), "sendto");
    char buf[8192];
    ssize_t n = recv(s, buf, sizeof buf, 0);
    TRY(n, "recv");
    dappend("reply bytes=%zd", n);
    succeed();
}

static socklen_t unix_addr(struct sockaddr_un *sa, const char *name, int abstract) {
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n + 2 > sizeof sa->sun_path)
        usage("unix socket name too long");
    if (abstract) {
        memcpy(sa->sun_path + 1, name, n);
        return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
    }
    memcpy(sa->sun_path, name, n);
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n + 1);
}

static void op_unix_connect(const char *name, int abstract) {
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, abstract);
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(s, "socket");
    TRY(connect(s, (struct sockaddr *)&sa, len), "connect");
    TRY(send(s, "X", 1, MSG_NOSIGNAL), "send");
    close(s);
    succeed();
}

static void op_unix_dgram(const char *name, int abstract) {
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, abstract);
    int s = socket(AF_UNIX, SOCK_DGRAM, 0);
    TRY(s, "socket");
    TRY(sendto(s, "X", 1, 0, (struct sockaddr *)&sa, len), "sendto");
    close(s);
    succeed();
}

/* UDP with connect(): the address goes through connect(), as glibc's resolver does. */
static void op_udp_connect(const char *host, const char *port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int s = socket(fam, SOCK_DGRAM, 0);
    TRY(s, "socket");
    TRY(connect(s, (struct sockaddr *)&ss, len), "connect");
    TRY(send(s, "X", 1, MSG_NOSIGNAL), "send");
    close(s);
    succeed();
}

/* Exchange a byte over a connection accepted by listener L from client C. */
static void echo_over(int l, int c) {
    int a = accept(l, NULL, NULL);
    TRY(a, "accept");
    TRY(send(c, "ping", 4, MSG_NOSIGNAL), "send");
    char buf[8] = {0};
    ssize_t n = recv(a, buf, sizeof buf - 1, 0);
    TRY(n, "recv");
    dappend("echo=%s", buf);
    close(a);
}

/* A server of this process on HOST:PORT (0: any) and a client that talks to it. */
static void op_loopback_echo(const char *host, const char *port) {
    struct sockaddr_storage ss;
    socklen_t len;
    int fam = sockaddr_of(host, port, &ss, &len);
    int l = socket(fam, SOCK_STREAM, 0);
    TRY(l, "socket");
    int one = 1;
    setsockopt(l, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    TRY(bind(l, (struct sockaddr *)&ss, len), "bind");
    TRY(listen(l, 4), "listen");
    len = sizeof ss;
    TRY(getsockname(l, (struct sockaddr *)&ss, &len), "getsockname");
    int c = socket(fam, SOCK_STREAM, 0);
    TRY(c, "socket");
    TRY(connect(c, (struct sockaddr *)&ss, len), "connect");
    echo_over(l, c);
    succeed();
}

/* A unix listener of this process at PATH and a client that talks to it. */
static void op_unix_echo(const char *name, int abstract) {
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, abstract);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(l, "socket");
    TRY(bind(l, (struct sockaddr *)&sa, len), "bind");
    TRY(listen(l, 4), "listen");
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(c, "socket");
    TRY(connect(c, (struct sockaddr *)&sa, len), "connect");
    echo_over(l, c);
    if (!abstract)
        unlink(name);
    succeed();
}

/* Listen on the unix socket PATH (and, with PORT, first on 127.0.0.1:PORT: PATH
 * appears once both listen) for MS milliseconds and count the connections. */
static void op_unix_listen(const char *name, const char *ms, const char *port) {
    int t = -1;
    if (port) {
        struct sockaddr_storage ss;
        socklen_t slen;
        int fam = sockaddr_of("127.0.0.1", port, &ss, &slen);
        t = socket(fam, SOCK_STREAM | SOCK_NONBLOCK, 0);
        TRY(t, "socket");
        TRY(bind(t, (struct sockaddr *)&ss, slen), "bind");
        TRY(listen(t, 16), "listen");
    }
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, 0);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(l, "socket");
    TRY(bind(l, (struct sockaddr *)&sa, len), "bind");
    TRY(listen(l, 16), "listen");
    int accepted = 0;
    long wait_ms = num(ms);
    struct timespec start, now;
    clock_gettime(CLOCK_MONOTONIC, &start);
    for (;;) {
        clock_gettime(CLOCK_MONOTONIC, &now);
        long el = (now.tv_sec - start.tv_sec) * 1000 + (now.tv_nsec - start.tv_nsec) / 1000000;
        if (el >= wait_ms)
            break;
        struct pollfd p[2] = {{l, POLLIN, 0}, {t, POLLIN, 0}};
        if (poll(p, t >= 0 ? 2 : 1, (int)(wait_ms - el)) > 0) {
            for (int i = 0; i < 2; i++) {
                if (!(p[i].revents & POLLIN))
                    continue;
                int c = accept(p[i].fd, NULL, NULL);
                if (c >= 0) {
                    accepted++;
                    close(c);
                }
            }
        }
    }
    unlink(name);
    dappend("listening; accepted=%d", accepted);
    succeed();
}

/* Bind and listen at PATH, unlink it and announce that with PATH.gone; once another
 * process has put a socket of its own at PATH (within MS milliseconds), connect to
 * PATH. The listener this process still holds must not make PATH's new socket its own. */
static void op_unix_own_then_replaced(const char *name, const char *ms) {
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, 0);
    int l = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(l, "socket");
    TRY(bind(l, (struct sockaddr *)&sa, len), "bind");
    TRY(listen(l, 4), "listen");
    TRY(unlink(name), "unlink");
    char flag[PATH_MAX];
    snprintf(flag, sizeof flag, "%s.gone", name);
    int f = open(flag, O_CREAT | O_WRONLY | O_CLOEXEC, 0644);
    TRY(f, "announce");
    close(f);
    long wait_ms = num(ms);
    struct stat st;
    for (long waited = 0; stat(name, &st) != 0 || !S_ISSOCK(st.st_mode); waited += 10) {
        if (waited >= wait_ms)
            fail(ETIMEDOUT, "wait for the replacement");
        usleep(10000);
    }
    int c = socket(AF_UNIX, SOCK_STREAM, 0);
    TRY(c, "socket");
    TRY(connect(c, (struct sockaddr *)&sa, len), "connect");
    TRY(send(c, "X", 1, MSG_NOSIGNAL), "send");
    succeed();
}

static void op_socketpair(void) {
    int sv[2];
    TRY(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), "socketpair");
    TRY(write(sv[0], "ping", 4), "write");
    char buf[8] = {0};
    ssize_t n = read(sv[1], buf, sizeof buf - 1);
    TRY(n, "read");
    dappend("read=%s", buf);
    succeed();
}

/* A datagram socketpair end is unconnected for sendto() with an address: it can
 * reach a host daemon's datagram socket without socket() or connect(). */
static void op_socketpair_dgram_send(const char *name) {
    struct sockaddr_un sa;
    socklen_t len = unix_addr(&sa, name, 0);
    int sv[2];
    TRY(socketpair(AF_UNIX, SOCK_DGRAM, 0, sv), "socketpair");
    TRY(sendto(sv[0], "X", 1, 0, (struct sockaddr *)&sa, len), "sendto");
    succeed();
}

/* ---------------------------------------------------------------- processes */

static void op_ptrace_attach(pid_t pid) {
    TRY(ptrace(PTRACE_ATTACH, pid, NULL, NULL), "ptrace(PTRACE_ATTACH)");
    int st;
    waitpid(pid, &st, __WALL);
    errno = 0;
    long word = ptrace(PTRACE_PEEKDATA, pid, NULL, NULL);
    dappend("attached; peek errno=%d word=%lx", errno, word);
    ptrace(PTRACE_DETACH, pid, NULL, NULL);
    succeed();
}

static void op_vm_readv(pid_t pid, unsigned long addr) {
    char buf[64];
    struct iovec local = {buf, sizeof buf};
    struct iovec remote = {(void *)addr, sizeof buf};
    ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
    TRY(n, "process_vm_readv");
    dappend_bytes(buf, (size_t)n);
    succeed();
}

static void op_vm_writev(pid_t pid, unsigned long addr) {
    char buf[1] = {0};
    struct iovec local = {buf, 1};
    struct iovec remote = {(void *)addr, 1};
    /* Writes a zero byte over the address; tests point it at a harmless page. */
    TRY(process_vm_writev(pid, &local, 1, &remote, 1, 0), "process_vm_writev");
    succeed();
}

static void op_proc_mem(pid_t pid, unsigned long addr) {
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)pid);
    int fd = open(path, O_RDONLY);
    TRY(fd, "open");
    char buf[64];
    ssize_t n = pread(fd, buf, sizeof buf, (off_t)addr);
    TRY(n, "pread");
    dappend_bytes(buf, (size_t)n);
    succeed();
}

/* Scans every /proc/PID/environ it can read for MARKER. Always ok: the detail says
 * how many were scanned and which matched. */
static void op_proc_grep(const char *marker) {
    DIR *d = opendir("/proc");
    if (!d)
        fail(errno, "opendir(/proc)");
    struct dirent *e;
    int scanned = 0, unreadable = 0;
    char matches[4096] = "";
    size_t ml = 0;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        char path[300];
        snprintf(path, sizeof path, "/proc/%s/environ", e->d_name);
        int fd = open(path, O_RDONLY);
        if (fd < 0) {
            unreadable++;
            continue;
        }
        static char buf[1 << 17];
        ssize_t n = read(fd, buf, sizeof buf - 1);
        close(fd);
        if (n < 0) {
            unreadable++;
            continue;
        }
        scanned++;
        for (ssize_t i = 0; i < n; i++)
            if (!buf[i])
                buf[i] = '\n';
        buf[n] = 0;
        if (strstr(buf, marker) && ml + strlen(e->d_name) + 2 < sizeof matches)
            ml += (size_t)snprintf(matches + ml, sizeof matches - ml, "%s%s",
                                   ml ? "," : "", e->d_name);
    }
    closedir(d);
    dappend("scanned=%d unreadable=%d matches=[%s]", scanned, unreadable, matches);
    succeed();
}

/* ---------------------------------------------------------------- terminal */

static int tty_fd(const char *path) {
    if (!strcmp(path, "-"))
        return 0;
    int fd = open(path, O_RDWR | O_NOCTTY);
    if (fd < 0) {
        /* TIOCSTI/TIOCLINUX need no write access: retry read-only, as an attacker would. */
        dappend("open(O_RDWR): %s; ", strerror(errno));
        fd = open(path, O_RDONLY | O_NOCTTY);
    }
    TRY(fd, "open");
    return fd;
}

/* Makes FD our controlling terminal when it can (so that, without a filter, TIOCSTI
 * would work even unprivileged), then pushes TEXT into its input queue. */
static void op_tiocsti(const char *path, const char *text, unsigned long request) {
    int fd = tty_fd(path);
    if (setsid() < 0)
        dappend("setsid: %s; ", strerror(errno));
    if (ioctl(fd, TIOCSCTTY, 0) < 0)
        dappend("TIOCSCTTY: %s; ", strerror(errno));
    else
        dappend("ctty=yes; ");
    for (const char *c = text; *c; c++)
        TRY(syscall(SYS_ioctl, fd, request, c), "ioctl(TIOCSTI)");
    dappend("injected %zu bytes", strlen(text));
    succeed();
}

static void op_tioclinux(const char *path, unsigned long request) {
    int fd = tty_fd(path);
    char sub[2] = {6 /* TIOCL_GETSHIFTSTATE: read-only, harmless */, 0};
    TRY(syscall(SYS_ioctl, fd, request, sub), "ioctl(TIOCLINUX)");
    dappend("shiftstate=%d", sub[0]);
    succeed();
}

/* ---------------------------------------------------------------- syscall ABIs */

#if defined(__x86_64__)
/* A 32-bit (i386 ABI) system call from this 64-bit process: int $0x80. Arguments are
 * truncated to 32 bits, so pointers must point below 4 GiB (see low_page()). */
static long int80(long nr, long a, long b, long c) {
    long ret;
    __asm__ volatile("int $0x80"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c)
                     : "memory", "r8", "r9", "r10", "r11", "cc");
    return ret;
}

static long int80_6(long nr, long a, long b, long c, long d, long e, long f) {
    long ret;
    register long rsi __asm__("rsi") = d;
    register long rdi __asm__("rdi") = e;
    register long r12 __asm__("r12") = f;
    /* ebp carries the sixth argument; save and restore it around the trap. */
    __asm__ volatile("push %%rbp\n\t"
                     "mov %%r12, %%rbp\n\t"
                     "int $0x80\n\t"
                     "pop %%rbp"
                     : "=a"(ret)
                     : "a"(nr), "b"(a), "c"(b), "d"(c), "r"(rsi), "r"(rdi), "r"(r12)
                     : "memory", "r8", "r9", "r10", "r11", "cc");
    return ret;
}

static char *low_page(void) {
    void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_32BIT, -1, 0);
    if (p == MAP_FAILED)
        fail(errno, "mmap(MAP_32BIT)");
    return p;
}

static void i386_check(long r, const char *step) {
    if (r < 0 && r > -4096)
        fail((int)-r, step);
}

/* i386 numbers */
#define I386_GETPID 20
#define I386_SOCKETCALL 102
#define I386_UNSHARE 310
#define I386_SOCKET 359
#define I386_CONNECT 362
#define I386_SENDTO 369

static void op_i386_udp4(const char *port, int via_socketcall) {
    char *low = low_page();
    struct sockaddr_in *sa = (struct sockaddr_in *)low;
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)num(port));
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    char *payload = low + 64;
    payload[0] = 'X';
    long s;
    if (via_socketcall) {
        uint32_t *args = (uint32_t *)(low + 128);
        args[0] = AF_INET;
        args[1] = SOCK_DGRAM;
        args[2] = 0;
        s = int80(I386_SOCKETCALL, 1 /* SYS_SOCKET */, (long)(uintptr_t)args, 0);
        i386_check(s, "socketcall(SOCKET)");
        args[0] = (uint32_t)s;
        args[1] = (uint32_t)(uintptr_t)payload;
        args[2] = 1;
        args[3] = 0;
        args[4] = (uint32_t)(uintptr_t)sa;
        args[5] = sizeof *sa;
        i386_check(int80(I386_SOCKETCALL, 11 /* SYS_SENDTO */, (long)(uintptr_t)args, 0),
                   "socketcall(SENDTO)");
    } else {
        s = int80(I386_SOCKET, AF_INET, SOCK_DGRAM, 0);
        i386_check(s, "socket(i386)");
        i386_check(int80_6(I386_SENDTO, s, (long)(uintptr_t)payload, 1, 0,
                           (long)(uintptr_t)sa, sizeof *sa),
                   "sendto(i386)");
    }
    dappend("sent via i386 ABI");
    succeed();
}

static void op_i386_tcp4(const char *port) {
    char *low = low_page();
    struct sockaddr_in *sa = (struct sockaddr_in *)low;
    sa->sin_family = AF_INET;
    sa->sin_port = htons((uint16_t)num(port));
    sa->sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    long s = int80(I386_SOCKET, AF_INET, SOCK_STREAM, 0);
    i386_check(s, "socket(i386)");
    i386_check(int80(I386_CONNECT, s, (long)(uintptr_t)sa, sizeof *sa), "connect(i386)");
    dappend("connected via i386 ABI");
    succeed();
}
#endif

/* ---------------------------------------------------------------- privilege */

static void op_status_caps(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f)
        fail(errno, "fopen(/proc/self/status)");
    char line[512];
    while (fgets(line, sizeof line, f)) {
        if (!strncmp(line, "Cap", 3) || !strncmp(line, "NoNewPrivs", 10) ||
            !strncmp(line, "Seccomp", 7) || !strncmp(line, "Uid", 3) ||
            !strncmp(line, "Gid", 3)) {
            char *nl = strchr(line, '\n');
            if (nl)
                *nl = 0;
            char *tab;
            while ((tab = strchr(line, '\t')))
                *tab = ' ';
            dappend("%s;", line);
        }
    }
    fclose(f);
    succeed();
}

static void op_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        fail(errno, "opendir(/proc/self/fd)");
    int self = dirfd(d);
    struct dirent *e;
    int first = 1;
    while ((e = readdir(d))) {
        if (e->d_name[0] < '0' || e->d_name[0] > '9')
            continue;
        int fd = atoi(e->d_name);
        if (fd < 3 || fd == self)
            continue;
        char path[64], target[PATH_MAX];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        ssize_t n = readlink(path, target, sizeof target - 1);
        target[n > 0 ? n : 0] = 0;
        dappend("%s%d=%s", first ? "" : ",", fd, target);
        first = 0;
    }
    closedir(d);
    succeed();
}

static unsigned long unshare_flags(const char *names) {
    unsigned long f = 0;
    char buf[256];
    snprintf(buf, sizeof buf, "%s", names);
    for (char *t = strtok(buf, ","); t; t = strtok(NULL, ",")) {
        if (!strcmp(t, "user")) f |= CLONE_NEWUSER;
        else if (!strcmp(t, "net")) f |= CLONE_NEWNET;
        else if (!strcmp(t, "ns") || !strcmp(t, "mnt")) f |= CLONE_NEWNS;
        else if (!strcmp(t, "pid")) f |= CLONE_NEWPID;
        else if (!strcmp(t, "ipc")) f |= CLONE_NEWIPC;
        else if (!strcmp(t, "uts")) f |= CLONE_NEWUTS;
        else if (!strcmp(t, "cgroup")) f |= CLONE_NEWCGROUP;
        else if (!strcmp(t, "time")) f |= CLONE_NEWTIME;
        else usage("namespace names: user,net,ns,pid,ipc,uts,cgroup,time");
    }
    return f;
}

struct clone_args_v0 {
    uint64_t flags, pidfd, child_tid, parent_tid, exit_signal, stack, stack_size, tls;
};

static void reap(long pid, const char *how) {
    int st = 0;
    waitpid((pid_t)pid, &st, 0);
    dappend("%s child=%ld status=%d", how, pid, st);
    succeed();
}

static void op_clone3(unsigned long flags) {
    struct clone_args_v0 a;
    memset(&a, 0, sizeof a);
    a.flags = flags;
    a.exit_signal = SIGCHLD;
    long pid = syscall(__NR_clone3, &a, sizeof a);
    if (pid == 0)
        _exit(0);
    TRY(pid, "clone3");
    reap(pid, "clone3");
}

static void op_clone(unsigned long flags) {
    long pid = syscall(SYS_clone, flags | SIGCHLD, 0, 0, 0, 0);
    if (pid == 0)
        _exit(0);
    TRY(pid, "clone");
    reap(pid, "clone");
}

static void op_bpf(void) {
    union bpf_attr attr;
    memset(&attr, 0, sizeof attr);
    attr.map_type = BPF_MAP_TYPE_ARRAY;
    attr.key_size = 4;
    attr.value_size = 4;
    attr.max_entries = 1;
    long fd = syscall(SYS_bpf, BPF_MAP_CREATE, &attr, sizeof attr);
    TRY(fd, "bpf(BPF_MAP_CREATE)");
    succeed();
}

static void op_perf(void) {
    struct perf_event_attr pe;
    memset(&pe, 0, sizeof pe);
    pe.type = PERF_TYPE_SOFTWARE;
    pe.size = sizeof pe;
    pe.config = PERF_COUNT_SW_TASK_CLOCK;
    pe.disabled = 1;
    pe.exclude_kernel = 1;
    pe.exclude_hv = 1;
    long fd = syscall(SYS_perf_event_open, &pe, 0, -1, -1, 0);
    TRY(fd, "perf_event_open");
    succeed();
}

static void op_userfaultfd(void) {
    long fd = syscall(__NR_userfaultfd, O_CLOEXEC | UFFD_USER_MODE_ONLY);
    TRY(fd, "userfaultfd");
    succeed();
}

static void op_add_key(const char *desc) {
    long id = syscall(SYS_add_key, "user", desc, "cordon-probe", 12, KEY_SPEC_USER_KEYRING);
    TRY(id, "add_key");
    dappend("key=%ld", id);
    succeed();
}

static void op_key_search(const char *desc, int purge) {
    long id = syscall(SYS_keyctl, KEYCTL_SEARCH, KEY_SPEC_USER_KEYRING, "user", desc, 0);
    TRY(id, "keyctl(KEYCTL_SEARCH)");
    dappend("found key=%ld", id);
    if (purge)
        syscall(SYS_keyctl, KEYCTL_INVALIDATE, id);
    succeed();
}

static void op_keyctl(void) {
    long id = syscall(SYS_keyctl, KEYCTL_GET_KEYRING_ID, KEY_SPEC_USER_KEYRING, 0);
    TRY(id, "keyctl(KEYCTL_GET_KEYRING_ID)");
    dappend("user keyring=%ld", id);
    succeed();
}

/* ---------------------------------------------------------------- IPC */

static void op_sysv(const char *kind, key_t key) {
    int id;
    if (!strcmp(kind, "shm"))
        id = shmget(key, 4096, IPC_CREAT | IPC_EXCL | 0666);
    else if (!strcmp(kind, "msg"))
        id = msgget(key, IPC_CREAT | IPC_EXCL | 0666);
    else
        id = semget(key, 1, IPC_CREAT | IPC_EXCL | 0666);
    TRY(id, "get(IPC_CREAT)");
    dappend("id=%d", id);
    succeed();
}

static void op_shm_read(key_t key) {
    int id = shmget(key, 0, 0);
    TRY(id, "shmget");
    char *p = shmat(id, NULL, SHM_RDONLY);
    if (p == (void *)-1)
        fail(errno, "shmat");
    dappend_bytes(p, strnlen(p, 256));
    succeed();
}

static void op_mq_open(const char *name) {
    mqd_t q = mq_open(name, O_CREAT | O_EXCL | O_RDWR, 0666, NULL);
    TRY(q, "mq_open");
    succeed();
}

static void op_mq_read(const char *name) {
    mqd_t q = mq_open(name, O_RDONLY | O_NONBLOCK);
    TRY(q, "mq_open");
    struct mq_attr at;
    TRY(mq_getattr(q, &at), "mq_getattr");
    char *buf = malloc((size_t)at.mq_msgsize + 1);
    ssize_t n = mq_receive(q, buf, (size_t)at.mq_msgsize, NULL);
    TRY(n, "mq_receive");
    dappend_bytes(buf, (size_t)n);
    succeed();
}

static void op_shm_open(const char *name, int create) {
    int fd = shm_open(name, create ? (O_CREAT | O_EXCL | O_RDWR) : O_RDONLY, 0666);
    TRY(fd, "shm_open");
    if (create) {
        write_all(fd, DEFAULT_DATA, "write");
    } else {
        char buf[256];
        ssize_t n = read(fd, buf, sizeof buf);
        TRY(n, "read");
        dappend_bytes(buf, (size_t)n);
    }
    succeed();
}

/* ---------------------------------------------------------------- lifetime */

static void sleep_ms(long ms) {
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) < 0 && errno == EINTR) {
    }
}

static void detach_stdio(void) {
    int null = open("/dev/null", O_RDWR);
    if (null >= 0) {
        dup2(null, 0);
        dup2(null, 1);
        dup2(null, 2);
        if (null > 2)
            close(null);
    }
}

static void late_write(long ms, const char *path) {
    sleep_ms(ms);
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
        if (write(fd, "survived\n", 9) < 0) {
        }
        close(fd);
    }
    _exit(0);
}

/* Classic daemon: fork, setsid, fork again, close stdio, write PATH after MS. */
static void op_daemonize(long ms, const char *path) {
    fflush(stdout);
    pid_t p = fork();
    TRY(p, "fork");
    if (p == 0) {
        if (setsid() < 0)
            _exit(1);
        signal(SIGHUP, SIG_IGN);
        pid_t q = fork();
        if (q < 0)
            _exit(1);
        if (q > 0)
            _exit(0);
        detach_stdio();
        late_write(ms, path);
    }
    int st;
    waitpid(p, &st, 0);
    dappend("daemon started; first child status=%d", st);
    succeed();
}

/* A plain background child (same session) that writes PATH after MS. */
static void op_background(long ms, const char *path) {
    fflush(stdout);
    pid_t p = fork();
    TRY(p, "fork");
    if (p == 0) {
        detach_stdio();
        late_write(ms, path);
    }
    dappend("background child=%d", (int)p);
    succeed();
}

/* ---------------------------------------------------------------- misc */

extern char **environ;

static void op_environ(void) {
    for (char **e = environ; *e; e++)
        dappend("%s\n", *e);
    succeed();
}

static void op_tmpdir(void) {
    const char *t = getenv("TMPDIR");
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/probe-XXXXXX", t && *t ? t : "/tmp");
    int fd = mkstemp(path);
    dappend("TMPDIR=%s; ", t ? t : "(unset)");
    TRY(fd, "mkstemp");
    write_all(fd, DEFAULT_DATA, "write");
    close(fd);
    unlink(path);
    dappend("created %s", path);
    succeed();
}

/* ---------------------------------------------------------------- dispatch */

#define NEED(n, msg)                                                           \
    do {                                                                       \
        if (argc < (n) + 2)                                                    \
            usage(msg);                                                        \
    } while (0)

/* ---------------------------------------------------------------- resources */

/* Fork up to N children that sleep MS and exit, stopping at the first refused fork
 * (EAGAIN at a pids limit). The children are left running for the run's cleanup. */
static void op_fork_loop(long n, long ms) {
    long forked = 0;
    for (; forked < n; forked++) {
        pid_t p = fork();
        if (p == 0) {
            detach_stdio();
            sleep_ms(ms);
            _exit(0);
        }
        if (p < 0) {
            int e = errno;
            dappend("forked=%ld", forked);
            fail(e, "fork");
        }
    }
    dappend("forked=%ld", forked);
    succeed();
}

/* Allocate and touch MB mebibytes, one at a time. */
static void op_alloc(long mb, long hold_ms) {
    long done = 0;
    for (; done < mb; done++) {
        char *p = malloc(1 << 20);
        if (!p) {
            dappend("allocated=%ldM", done);
            fail(ENOMEM, "malloc");
        }
        memset(p, 1, 1 << 20);
    }
    dappend("allocated=%ldM", done);
    if (hold_ms > 0)
        usleep((useconds_t)(hold_ms * 1000));
    succeed();
}

/* Write PATH in 64 KiB chunks until a write fails or MAX bytes are written. */
static void op_fill(const char *path, long max) {
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    TRY(fd, "open");
    static char chunk[1 << 16];
    memset(chunk, 'x', sizeof chunk);
    long long written = 0;
    while (written < max) {
        ssize_t w = write(fd, chunk, sizeof chunk);
        if (w < 0) {
            int e = errno;
            dappend("bytes=%lld", written);
            fail(e, "write");
        }
        written += w;
    }
    dappend("bytes=%lld", written);
    succeed();
}

/* Burn CPU until a signal ends it. */
static void op_spin(void) {
    volatile unsigned long x = 0;
    for (;;)
        x++;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        g_op = "";
        usage("probe OP [ARGS...]");
    }
    g_op = argv[1];
    const char *op = argv[1];
    /* "@ppid" inside an argument stands for this process's parent: the run's init when
       the probe is the command itself. */
    for (int i = 2; i < argc; i++) {
        char *at = strstr(argv[i], "@ppid");
        if (!at)
            continue;
        size_t len = strlen(argv[i]) + 16;
        char *arg = malloc(len);
        if (!arg)
            fail(ENOMEM, "malloc");
        snprintf(arg, len, "%.*s%d%s", (int)(at - argv[i]), argv[i], (int)getppid(), at + 5);
        argv[i] = arg;
    }
    char **a = argv + 2; /* a[0] is the first argument after OP */

    /* files */
    if (!strcmp(op, "write")) { NEED(1, "write PATH [DATA]"); op_open_write(a[0], O_WRONLY | O_CREAT | O_TRUNC, data_arg(argc, argv, 3)); }
    if (!strcmp(op, "overwrite")) { NEED(1, "overwrite PATH [DATA]"); op_open_write(a[0], O_WRONLY, data_arg(argc, argv, 3)); }
    if (!strcmp(op, "append")) { NEED(1, "append PATH [DATA]"); op_open_write(a[0], O_WRONLY | O_APPEND, data_arg(argc, argv, 3)); }
    /* A FIFO without a reader answers ENXIO instead of blocking. */
    if (!strcmp(op, "append-nb")) { NEED(1, "append-nb PATH [DATA]"); op_open_write(a[0], O_WRONLY | O_APPEND | O_NONBLOCK, data_arg(argc, argv, 3)); }
    if (!strcmp(op, "create")) { NEED(1, "create PATH"); op_open_write(a[0], O_WRONLY | O_CREAT | O_EXCL, data_arg(argc, argv, 3)); }
    if (!strcmp(op, "open-trunc")) { NEED(1, "open-trunc PATH"); op_open_write(a[0], O_WRONLY | O_TRUNC, NULL); }
    if (!strcmp(op, "read")) { NEED(1, "read PATH"); op_read(a[0]); }
    if (!strcmp(op, "ls")) { NEED(1, "ls DIR"); op_ls(a[0]); }
    if (!strcmp(op, "stat")) { NEED(1, "stat PATH"); op_stat(a[0]); }
    if (!strcmp(op, "readlink")) { NEED(1, "readlink PATH"); op_readlink(a[0]); }
    if (!strcmp(op, "unlink")) { NEED(1, "unlink PATH"); TRY(unlink(a[0]), "unlink"); succeed(); }
    if (!strcmp(op, "mkdir")) { NEED(1, "mkdir PATH"); TRY(mkdir(a[0], 0755), "mkdir"); succeed(); }
    if (!strcmp(op, "rmdir")) { NEED(1, "rmdir PATH"); TRY(rmdir(a[0]), "rmdir"); succeed(); }
    if (!strcmp(op, "rename")) { NEED(2, "rename SRC DST"); TRY(rename(a[0], a[1]), "rename"); succeed(); }
    if (!strcmp(op, "flip")) {
        /* flip A B SECONDS [USEC]: swap A and B (renameat2 RENAME_EXCHANGE) for
           SECONDS, pausing USEC between swaps: the concurrent half of a check/use race. */
        NEED(3, "flip A B SECONDS [USEC]");
        time_t end = time(NULL) + atoi(a[2]);
        int pause = argc > 5 ? atoi(a[3]) : 0;
        long n = 0;
        while (time(NULL) < end) {
            TRY(syscall(__NR_renameat2, AT_FDCWD, a[0], AT_FDCWD, a[1], RENAME_EXCHANGE), "renameat2(RENAME_EXCHANGE)");
            n++;
            if (pause > 0)
                usleep(pause);
        }
        dappend("%ld exchanges", n);
        succeed();
    }
    if (!strcmp(op, "exchange")) { NEED(2, "exchange A B"); TRY(syscall(__NR_renameat2, AT_FDCWD, a[0], AT_FDCWD, a[1], RENAME_EXCHANGE), "renameat2(RENAME_EXCHANGE)"); succeed(); }
    if (!strcmp(op, "rename-noreplace")) { NEED(2, "rename-noreplace SRC DST"); TRY(syscall(__NR_renameat2, AT_FDCWD, a[0], AT_FDCWD, a[1], RENAME_NOREPLACE), "renameat2(RENAME_NOREPLACE)"); succeed(); }
    if (!strcmp(op, "link")) { NEED(2, "link SRC DST"); TRY(link(a[0], a[1]), "link"); succeed(); }
    if (!strcmp(op, "link-write")) {
        NEED(2, "link-write SRC DST [DATA]");
        if (link(a[0], a[1]) < 0)
            dappend("link: %s; ", strerror(errno));
        op_open_write(a[1], O_WRONLY | O_APPEND, data_arg(argc, argv, 4));
    }
    if (!strcmp(op, "symlink")) { NEED(2, "symlink TARGET LINK"); TRY(symlink(a[0], a[1]), "symlink"); succeed(); }
    if (!strcmp(op, "symlink-write")) {
        NEED(2, "symlink-write TARGET LINK [DATA]");
        if (symlink(a[0], a[1]) < 0)
            dappend("symlink: %s; ", strerror(errno));
        op_open_write(a[1], O_WRONLY | O_CREAT | O_APPEND, data_arg(argc, argv, 4));
    }
    if (!strcmp(op, "truncate")) { NEED(2, "truncate PATH LEN"); TRY(truncate(a[0], num(a[1])), "truncate"); succeed(); }
    if (!strcmp(op, "ftruncate")) {
        NEED(2, "ftruncate PATH LEN");
        int fd = open(a[0], O_WRONLY);
        TRY(fd, "open");
        TRY(ftruncate(fd, num(a[1])), "ftruncate");
        succeed();
    }
    if (!strcmp(op, "mknod")) { NEED(1, "mknod PATH"); TRY(mknod(a[0], S_IFCHR | 0666, makedev(1, 3)), "mknod(S_IFCHR 1:3)"); succeed(); }
    if (!strcmp(op, "mkfifo")) { NEED(1, "mkfifo PATH"); TRY(mkfifo(a[0], 0644), "mkfifo"); succeed(); }
    if (!strcmp(op, "tmpfile-link")) { NEED(2, "tmpfile-link DIR DEST"); op_tmpfile_link(a[0], a[1]); }
    if (!strcmp(op, "tmpfile")) {
        NEED(1, "tmpfile DIR");
        int fd = open(a[0], O_TMPFILE | O_WRONLY, 0644);
        TRY(fd, "open(O_TMPFILE)");
        write_all(fd, DEFAULT_DATA, "write");
        succeed();
    }
    if (!strcmp(op, "open-w")) {
        NEED(1, "open-w PATH (opens for writing, writes nothing)");
        int fd = open(a[0], O_WRONLY);
        TRY(fd, "open(O_WRONLY)");
        close(fd);
        succeed();
    }
    if (!strcmp(op, "reopen-write")) { NEED(1, "reopen-write PATH [DATA]"); op_reopen_write(a[0], data_arg(argc, argv, 3)); }
    if (!strcmp(op, "fdlink-write")) { NEED(2, "fdlink-write SRC DST [DATA]"); op_fdlink_write(a[0], a[1], data_arg(argc, argv, 4)); }
    if (!strcmp(op, "open-by-handle")) { NEED(1, "open-by-handle PATH [DATA]"); op_open_by_handle(a[0], data_arg(argc, argv, 3)); }
    if (!strcmp(op, "chmod")) { NEED(2, "chmod PATH MODE"); TRY(chmod(a[0], (mode_t)unum(a[1])), "chmod"); succeed(); }
    if (!strcmp(op, "chown")) { NEED(3, "chown PATH UID GID"); TRY(chown(a[0], (uid_t)num(a[1]), (gid_t)num(a[2])), "chown"); succeed(); }
    if (!strcmp(op, "utimes")) { NEED(1, "utimes PATH"); op_utimes(a[0]); }
    if (!strcmp(op, "setxattr")) { NEED(3, "setxattr PATH NAME VALUE"); TRY(setxattr(a[0], a[1], a[2], strlen(a[2]), 0), "setxattr"); succeed(); }

    /* network */
    if (!strcmp(op, "tcp")) { NEED(2, "tcp HOST PORT"); op_stream_connect(a[0], a[1], 0); }
    if (!strcmp(op, "tfo")) { NEED(2, "tfo HOST PORT"); op_tcp_fastopen(a[0], a[1]); }
    if (!strcmp(op, "mptcp")) { NEED(2, "mptcp HOST PORT"); op_stream_connect(a[0], a[1], IPPROTO_MPTCP); }
    if (!strcmp(op, "udp")) { NEED(2, "udp HOST PORT"); op_udp_send(a[0], a[1], "X", 1); }
    if (!strcmp(op, "dns")) { NEED(2, "dns HOST PORT"); op_dns(a[0], a[1]); }
    if (!strcmp(op, "udp-connect")) { NEED(2, "udp-connect HOST PORT"); op_udp_connect(a[0], a[1]); }
    if (!strcmp(op, "loopback-echo")) { NEED(2, "loopback-echo HOST PORT"); op_loopback_echo(a[0], a[1]); }
    if (!strcmp(op, "unix-echo")) { NEED(1, "unix-echo PATH"); op_unix_echo(a[0], 0); }
    if (!strcmp(op, "unix-abstract-echo")) { NEED(1, "unix-abstract-echo NAME"); op_unix_echo(a[0], 1); }
    if (!strcmp(op, "unix-listen")) { NEED(2, "unix-listen PATH MS [PORT]"); op_unix_listen(a[0], a[1], argc > 4 ? a[2] : NULL); }
    if (!strcmp(op, "unix-own-then-replaced")) { NEED(2, "unix-own-then-replaced PATH MS"); op_unix_own_then_replaced(a[0], a[1]); }
    if (!strcmp(op, "listen")) { NEED(3, "listen HOST PORT MS"); op_listen(a[0], a[1], a[2]); }
    if (!strcmp(op, "raw")) op_socket_only(AF_INET, SOCK_RAW, IPPROTO_ICMP);
    if (!strcmp(op, "raw6")) op_socket_only(AF_INET6, SOCK_RAW, IPPROTO_ICMPV6);
    if (!strcmp(op, "packet")) op_socket_only(AF_PACKET, SOCK_RAW, htons(ETH_P_ALL));
    if (!strcmp(op, "ping")) { NEED(1, "ping HOST"); op_ping(a[0]); }
    if (!strcmp(op, "netlink")) op_netlink();
    if (!strcmp(op, "socket")) { NEED(3, "socket FAMILY TYPE PROTO"); op_socket_only((int)num(a[0]), (int)num(a[1]), (int)num(a[2])); }
    if (!strcmp(op, "unix-connect")) { NEED(1, "unix-connect PATH"); op_unix_connect(a[0], 0); }
    if (!strcmp(op, "unix-dgram")) { NEED(1, "unix-dgram PATH"); op_unix_dgram(a[0], 0); }
    if (!strcmp(op, "unix-abstract")) { NEED(1, "unix-abstract NAME"); op_unix_connect(a[0], 1); }
    if (!strcmp(op, "unix-abstract-dgram")) { NEED(1, "unix-abstract-dgram NAME"); op_unix_dgram(a[0], 1); }
    if (!strcmp(op, "socketpair")) op_socketpair();
    if (!strcmp(op, "socketpair-dgram-send")) { NEED(1, "socketpair-dgram-send PATH"); op_socketpair_dgram_send(a[0]); }
    if (!strcmp(op, "socket-sweep")) op_socket_sweep();

    /* other processes */
    if (!strcmp(op, "kill")) { NEED(2, "kill PID SIG"); TRY(kill((pid_t)num(a[0]), (int)num(a[1])), "kill"); succeed(); }
    if (!strcmp(op, "pidfd-kill")) {
        NEED(2, "pidfd-kill PID SIG");
        long fd = syscall(__NR_pidfd_open, (pid_t)num(a[0]), 0);
        TRY(fd, "pidfd_open");
        TRY(syscall(__NR_pidfd_send_signal, fd, (int)num(a[1]), NULL, 0), "pidfd_send_signal");
        succeed();
    }
    if (!strcmp(op, "ptrace-attach")) { NEED(1, "ptrace-attach PID"); op_ptrace_attach((pid_t)num(a[0])); }
    if (!strcmp(op, "vm-read")) { NEED(2, "vm-read PID ADDR"); op_vm_readv((pid_t)num(a[0]), unum(a[1])); }
    if (!strcmp(op, "vm-write")) { NEED(2, "vm-write PID ADDR"); op_vm_writev((pid_t)num(a[0]), unum(a[1])); }
    if (!strcmp(op, "proc-mem")) { NEED(2, "proc-mem PID ADDR"); op_proc_mem((pid_t)num(a[0]), unum(a[1])); }
    if (!strcmp(op, "proc-grep")) { NEED(1, "proc-grep MARKER"); op_proc_grep(a[0]); }
    if (!strcmp(op, "setpriority")) { NEED(2, "setpriority PID PRIO"); TRY(setpriority(PRIO_PROCESS, (id_t)num(a[0]), (int)num(a[1])), "setpriority"); succeed(); }
    if (!strcmp(op, "prlimit")) {
        NEED(2, "prlimit PID NOFILE");
        struct rlimit rl = {(rlim_t)num(a[1]), (rlim_t)num(a[1])};
        TRY(prlimit((pid_t)num(a[0]), RLIMIT_NOFILE, &rl, NULL), "prlimit");
        succeed();
    }
    if (!strcmp(op, "setns")) {
        NEED(1, "setns NSPATH");
        int fd = open(a[0], O_RDONLY);
        TRY(fd, "open");
        TRY(setns(fd, 0), "setns");
        succeed();
    }
    if (!strcmp(op, "pid")) { dappend("pid=%d ppid=%d pgid=%d sid=%d", (int)getpid(), (int)getppid(), (int)getpgid(0), (int)getsid(0)); succeed(); }
    if (!strcmp(op, "ids")) { dappend("uid=%d euid=%d gid=%d egid=%d", (int)getuid(), (int)geteuid(), (int)getgid(), (int)getegid()); succeed(); }

    /* terminal */
    if (!strcmp(op, "tiocsti")) { NEED(1, "tiocsti TTY|- [TEXT]"); op_tiocsti(a[0], argc > 3 ? a[1] : "x", TIOCSTI); }
    if (!strcmp(op, "tiocsti-hi")) { NEED(1, "tiocsti-hi TTY|- [TEXT]"); op_tiocsti(a[0], argc > 3 ? a[1] : "x", 0xffffffff00000000UL | TIOCSTI); }
    if (!strcmp(op, "tioclinux")) { NEED(1, "tioclinux TTY|-"); op_tioclinux(a[0], TIOCLINUX); }
    if (!strcmp(op, "tioclinux-hi")) { NEED(1, "tioclinux-hi TTY|-"); op_tioclinux(a[0], 0xffffffff00000000UL | TIOCLINUX); }

    /* syscall ABIs and filter bypasses */
    if (!strcmp(op, "io_uring")) {
        char params[120]; /* struct io_uring_params */
        memset(params, 0, sizeof params);
        long fd = syscall(__NR_io_uring_setup, 4, params);
        TRY(fd, "io_uring_setup");
        succeed();
    }
    if (!strcmp(op, "clone3")) { op_clone3(0); }
    if (!strcmp(op, "clone3-userns")) { op_clone3(CLONE_NEWUSER); }
    if (!strcmp(op, "clone-userns")) { op_clone(CLONE_NEWUSER); }
    if (!strcmp(op, "clone-netns")) { op_clone(CLONE_NEWNET); }
    if (!strcmp(op, "fork")) {
        pid_t p = fork();
        if (p == 0)
            _exit(0);
        TRY(p, "fork");
        reap(p, "fork");
    }
    if (!strcmp(op, "unshare")) { NEED(1, "unshare user,net,ns,..."); TRY(unshare((int)unshare_flags(a[0])), "unshare"); succeed(); }
#if defined(__x86_64__)
    if (!strcmp(op, "x32-getpid")) { long r = syscall(X32_SYSCALL_BIT | SYS_getpid); TRY(r, "getpid(x32)"); dappend("pid=%ld", r); succeed(); }
    if (!strcmp(op, "x32-unshare-user")) { TRY(syscall(X32_SYSCALL_BIT | SYS_unshare, CLONE_NEWUSER), "unshare(x32)"); succeed(); }
    if (!strcmp(op, "x32-udp")) {
        NEED(1, "x32-udp PORT");
        long s = syscall(X32_SYSCALL_BIT | SYS_socket, AF_INET, SOCK_DGRAM, 0);
        TRY(s, "socket(x32)");
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)num(a[0])), .sin_addr = {htonl(INADDR_LOOPBACK)}};
        TRY(syscall(X32_SYSCALL_BIT | SYS_sendto, s, "X", 1, 0, &sa, sizeof sa), "sendto(x32)");
        succeed();
    }
    if (!strcmp(op, "i386-getpid")) { long r = int80(I386_GETPID, 0, 0, 0); i386_check(r, "getpid(i386)"); dappend("pid=%ld", r); succeed(); }
    if (!strcmp(op, "i386-unshare-user")) { i386_check(int80(I386_UNSHARE, CLONE_NEWUSER, 0, 0), "unshare(i386)"); succeed(); }
    if (!strcmp(op, "i386-udp")) { NEED(1, "i386-udp PORT"); op_i386_udp4(a[0], 0); }
    if (!strcmp(op, "i386-udp-socketcall")) { NEED(1, "i386-udp-socketcall PORT"); op_i386_udp4(a[0], 1); }
    if (!strcmp(op, "i386-tcp")) { NEED(1, "i386-tcp PORT"); op_i386_tcp4(a[0]); }
#else
    if (!strncmp(op, "x32-", 4) || !strncmp(op, "i386-", 5))
        unsupported("x32/i386 entry points exist only on x86_64");
#endif

    /* privilege */
    if (!strcmp(op, "caps")) op_status_caps();
    if (!strcmp(op, "nnp")) { int r = prctl(PR_GET_NO_NEW_PRIVS, 0, 0, 0, 0); TRY(r, "prctl"); dappend("nnp=%d", r); succeed(); }
    if (!strcmp(op, "bpf")) op_bpf();
    if (!strcmp(op, "perf")) op_perf();
    if (!strcmp(op, "userfaultfd")) op_userfaultfd();
    if (!strcmp(op, "userfaultfd-dev")) {
        /* The ioctl needs no write access: fall back to a read-only open. */
        int fd = open("/dev/userfaultfd", O_RDWR | O_CLOEXEC);
        if (fd < 0) {
            dappend("open(O_RDWR): %s; ", strerror(errno));
            fd = open("/dev/userfaultfd", O_RDONLY | O_CLOEXEC);
        }
        TRY(fd, "open(/dev/userfaultfd)");
        long u = ioctl(fd, 0xAA00 /* USERFAULTFD_IOC_NEW */, O_CLOEXEC);
        TRY(u, "ioctl(USERFAULTFD_IOC_NEW)");
        dappend("uffd=%ld", u);
        succeed();
    }
    if (!strcmp(op, "add-key")) { NEED(1, "add-key DESC"); op_add_key(a[0]); }
    if (!strcmp(op, "key-search")) { NEED(1, "key-search DESC [purge]"); op_key_search(a[0], argc > 3); }
    if (!strcmp(op, "keyctl")) op_keyctl();
    if (!strcmp(op, "mount-tmpfs")) { NEED(1, "mount-tmpfs DIR"); TRY(mount("tmpfs", a[0], "tmpfs", 0, "size=1m"), "mount(tmpfs)"); succeed(); }
    if (!strcmp(op, "remount-write")) {
        NEED(2, "remount-write MOUNTPOINT FILE");
        if (mount(NULL, a[0], NULL, MS_REMOUNT | MS_BIND, NULL) < 0)
            dappend("remount: %s; ", strerror(errno));
        op_open_write(a[1], O_WRONLY | O_CREAT | O_TRUNC, DEFAULT_DATA);
    }
    if (!strcmp(op, "umount-write")) {
        NEED(2, "umount-write MOUNTPOINT FILE");
        if (umount2(a[0], MNT_DETACH) < 0)
            dappend("umount2: %s; ", strerror(errno));
        op_open_write(a[1], O_WRONLY | O_CREAT | O_TRUNC, DEFAULT_DATA);
    }
    if (!strcmp(op, "chroot")) { NEED(1, "chroot DIR"); TRY(chroot(a[0]), "chroot"); succeed(); }
    if (!strcmp(op, "fds")) op_fds();
    if (!strcmp(op, "fd-write")) { NEED(1, "fd-write FD [DATA]"); write_all((int)num(a[0]), data_arg(argc, argv, 3), "write"); succeed(); }

    /* IPC */
    if (!strcmp(op, "shmget")) { NEED(1, "shmget KEY"); op_sysv("shm", (key_t)num(a[0])); }
    if (!strcmp(op, "msgget")) { NEED(1, "msgget KEY"); op_sysv("msg", (key_t)num(a[0])); }
    if (!strcmp(op, "semget")) { NEED(1, "semget KEY"); op_sysv("sem", (key_t)num(a[0])); }
    if (!strcmp(op, "shm-read")) { NEED(1, "shm-read KEY"); op_shm_read((key_t)num(a[0])); }
    if (!strcmp(op, "mq-open")) { NEED(1, "mq-open /NAME"); op_mq_open(a[0]); }
    if (!strcmp(op, "mq-read")) { NEED(1, "mq-read /NAME"); op_mq_read(a[0]); }
    if (!strcmp(op, "shm-open")) { NEED(1, "shm-open /NAME"); op_shm_open(a[0], 1); }
    if (!strcmp(op, "shm-open-read")) { NEED(1, "shm-open-read /NAME"); op_shm_open(a[0], 0); }

    /* lifetime */
    if (!strcmp(op, "daemonize")) { NEED(2, "daemonize MS PATH"); op_daemonize(num(a[0]), a[1]); }
    if (!strcmp(op, "background")) { NEED(2, "background MS PATH"); op_background(num(a[0]), a[1]); }
    if (!strcmp(op, "sleep")) { NEED(1, "sleep MS"); sleep_ms(num(a[0])); succeed(); }

    /* resources (the trailing MARK arguments only make the process findable) */
    if (!strcmp(op, "fork-loop")) { NEED(2, "fork-loop N MS [MARK]"); op_fork_loop(num(a[0]), num(a[1])); }
    if (!strcmp(op, "alloc")) { NEED(1, "alloc MB [HOLD_MS]"); op_alloc(num(a[0]), argc > 3 ? num(a[1]) : 0); }
    if (!strcmp(op, "fill")) { NEED(2, "fill PATH MAXBYTES"); op_fill(a[0], num(a[1])); }
    if (!strcmp(op, "spin")) op_spin();

    /* environment */
    if (!strcmp(op, "environ")) op_environ();
    if (!strcmp(op, "getenv")) { NEED(1, "getenv NAME"); const char *v = getenv(a[0]); if (!v) fail(ENOENT, "getenv"); dappend("%s", v); succeed(); }
    if (!strcmp(op, "tmpdir")) op_tmpdir();
    if (!strcmp(op, "true")) succeed();

    usage("unknown OP");
}
