/* The floor under symmem's socket transport on this machine: two processes over one TCP
 * connection on loopback, no runtime in between.
 *
 *   - c_tcp_pingpong_latency: an 8-byte message bounced back and forth (TCP_NODELAY,
 *     non-blocking sockets, both sides spinning on recv(MSG_DONTWAIT)); the one-way time.
 *   - c_tcp_stream_bw: one side writes SIZE-byte chunks (a byte budget per repetition),
 *     the other reads them and answers one byte at the end; GB/s (10^9 bytes/s) over the
 *     whole repetition, sizes as symmem-perf's put_bw. Like symmem's put_bw, both sides
 *     busy-poll non-blocking sockets and step through 16 MiB buffers (chunk k at offset
 *     k * SIZE mod 16 MiB): rewriting one SIZE-byte buffer measured about half as fast
 *     here (2.2-2.6 GB/s at 256 KiB-2 MiB), and blocking calls were slower too.
 *
 *   cc -O2 tcp_pingpong.c -o tcp_pingpong && ./tcp_pingpong [ITERS] [BYTES] [SIZES]
 *
 * BYTES is the byte budget per bandwidth repetition (default 256 MiB, as symmem-perf);
 * SIZES the comma-separated write sizes of the stream (default 256 KiB, 1, 2 and 16 MiB;
 * each must divide 16 MiB). */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common.h"

static void die(const char *what) {
    perror(what);
    exit(1);
}

/* A connected pair of TCP sockets over 127.0.0.1 with TCP_NODELAY: fd[0] accepted, fd[1]
 * connecting. */
static void tcp_pair(int fd[2]) {
    int l = socket(AF_INET, SOCK_STREAM, 0);
    if (l < 0) die("socket");
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, 1) ||
        getsockname(l, (struct sockaddr *)&a, &len))
        die("bind/listen");
    fd[1] = socket(AF_INET, SOCK_STREAM, 0);
    if (fd[1] < 0 || connect(fd[1], (struct sockaddr *)&a, sizeof a)) die("connect");
    fd[0] = accept(l, NULL, NULL);
    if (fd[0] < 0) die("accept");
    close(l);
    int one = 1;
    for (int i = 0; i < 2; i++)
        if (setsockopt(fd[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) die("TCP_NODELAY");
}

/* Sends all `n` bytes; spins when the socket is full (non-blocking) or blocks. */
static void send_all(int fd, const char *p, size_t n) {
    while (n > 0) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k < 0) {
            if (errno == EAGAIN || errno == EINTR) continue;
            die("send");
        }
        p += k;
        n -= (size_t)k;
    }
}

/* Receives exactly `n` bytes, spinning on MSG_DONTWAIT (busy polling, no sleep). */
static void recv_spin(int fd, char *p, size_t n) {
    while (n > 0) {
        ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
        if (k > 0) {
            p += k;
            n -= (size_t)k;
        } else if (k == 0) {
            fprintf(stderr, "tcp_pingpong: peer closed\n");
            exit(1);
        } else if (errno != EAGAIN && errno != EINTR) {
            die("recv");
        }
    }
}

/* One-way latency in µs of an 8-byte ping-pong (median of REPS). */
static double pingpong(long iters) {
    int fd[2];
    tcp_pair(fd);
    long warm = iters / 10 > 2 ? iters / 10 : 2;
    long total = warm + REPS * iters;
    pid_t child = fork();
    if (child < 0) die("fork");
    if (child == 0) {
        close(fd[0]);
        char msg[8];
        for (long i = 0; i < total; i++) {
            recv_spin(fd[1], msg, sizeof msg);
            send_all(fd[1], msg, sizeof msg);
        }
        _exit(0);
    }
    close(fd[1]);
    char msg[8] = {0};
    double vals[REPS];
    for (int r = -1; r < REPS; r++) { /* r == -1: warm-up */
        long n = r < 0 ? warm : iters;
        double t0 = now_s();
        for (long k = 0; k < n; k++) {
            send_all(fd[0], msg, sizeof msg);
            recv_spin(fd[0], msg, sizeof msg);
        }
        double t = now_s() - t0;
        if (r >= 0) vals[r] = t * 1e6 / ((double)n * 2.0);
    }
    waitpid(child, NULL, 0);
    close(fd[0]);
    return median(vals, REPS);
}

/* Size of each side's buffer in the stream test (symmem-perf's largest transfer). */
#define STREAM_BUF (16 << 20)

/* Each side's stream buffer: 16 MiB, page-aligned, every page written. */
static char *stream_buffer(void) {
    char *buf = aligned_alloc(4096, STREAM_BUF);
    if (!buf) die("aligned_alloc");
    memset(buf, 0x5a, STREAM_BUF);
    return buf;
}

/* Streaming bandwidth in GB/s of `size`-byte writes (size divides STREAM_BUF), `budget`
 * bytes per repetition (at least 8 writes), median of REPS. */
static double stream_bw(size_t size, size_t budget) {
    int fd[2];
    tcp_pair(fd);
    for (int i = 0; i < 2; i++)
        if (fcntl(fd[i], F_SETFL, O_NONBLOCK)) die("O_NONBLOCK");
    long writes = (long)(budget / size) > 8 ? (long)(budget / size) : 8;
    long warm = writes / 10 > 2 ? writes / 10 : 2;
    long slots = STREAM_BUF / (long)size;
    pid_t child = fork();
    if (child < 0) die("fork");
    char *buf = stream_buffer();
    if (child == 0) { /* the reader: each repetition's bytes, then a one-byte answer */
        close(fd[0]);
        for (int r = -1; r < REPS; r++) {
            long n = r < 0 ? warm : writes;
            for (long k = 0; k < n; k++) recv_spin(fd[1], buf + (k % slots) * size, size);
            send_all(fd[1], "k", 1);
        }
        _exit(0);
    }
    close(fd[1]);
    double vals[REPS];
    char ack;
    for (int r = -1; r < REPS; r++) {
        long n = r < 0 ? warm : writes;
        double t0 = now_s();
        for (long k = 0; k < n; k++) send_all(fd[0], buf + (k % slots) * size, size);
        recv_spin(fd[0], &ack, 1);
        double t = now_s() - t0;
        if (r >= 0) vals[r] = (double)n * (double)size / t * 1e-9;
    }
    waitpid(child, NULL, 0);
    close(fd[0]);
    free(buf);
    return median(vals, REPS);
}

int main(int argc, char **argv) {
    long iters = iters_from_args(argc, argv);
    long budget = argc > 2 ? atol(argv[2]) : 256L << 20;
    if (budget <= 0) budget = 256L << 20;
    print_json_row("c_tcp_pingpong_latency", 8, pingpong(iters), "us", "tcp");
    long sizes[MAX_SIZES];
    int n_sizes = parse_sizes(argc > 3 ? argv[3] : "262144,1048576,2097152,16777216", sizes);
    for (int i = 0; i < n_sizes; i++) {
        if (STREAM_BUF % sizes[i]) {
            fprintf(stderr, "tcp_pingpong: size %ld does not divide %d\n", sizes[i], STREAM_BUF);
            return 2;
        }
    }
    for (int i = 0; i < n_sizes; i++)
        print_json_row("c_tcp_stream_bw", sizes[i], stream_bw((size_t)sizes[i], (size_t)budget),
                       "GB/s", "tcp");
    return 0;
}
