/*
 * gimgd — the user's GPU server: holds the GPU warm (CUDA's context, its
 * lanes' streams and buffers) and computes the tools' operations, so that
 * each tool in a pipe or a Makefile gets a GPU without paying CUDA's
 * start-up (see gimgd(1), lib/serve.h, lib/remote.h).
 *
 *   gimgd [--foreground] [--idle SECONDS] [--device DEV]   serve
 *   gimgd --status | --stop
 *
 * The tools start it on demand; started by hand it detaches too, unless
 * --foreground. Exit status: 0 success (a server already running counts,
 * for a detached start), 1 failure, 2 usage error.
 */
#include "cli.h"
#include "remote.h"
#include "serve.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#define TOOL "gimgd"
#define DEFAULT_IDLE_S 300

enum { OPT_FOREGROUND, OPT_IDLE, OPT_DEVICE, OPT_STATUS, OPT_STOP };

static const gimg_cli_option k_options[] = {
    {"foreground", 0, NULL, "serve in this process, with messages on standard error, instead "
                            "of detaching", OPT_FOREGROUND},
    {"idle", 0, "SECONDS", "exit after SECONDS without a request; 0: never (default 300)",
     OPT_IDLE},
    {"device", 0, "DEV", "gpu, gpu:N[,N...], gpu:all or cpu (default: $GIMGD_DEVICE or gpu:all)",
     OPT_DEVICE},
    {"status", 0, NULL, "print the running server's state (backend, lanes, requests, memory) "
                        "and exit", OPT_STATUS},
    {"stop", 0, NULL, "stop the running server once its requests are answered, and exit",
     OPT_STOP},
    {NULL, 0, NULL, NULL, 0},
};

typedef struct {
    int foreground, status, stop;
    double idle_s;
    const char *device;
} settings;

static gimg_status handle_option(void *user, int key, const char *arg)
{
    settings *s = user;
    switch (key) {
    case OPT_FOREGROUND: s->foreground = 1; break;
    case OPT_STATUS: s->status = 1; break;
    case OPT_STOP: s->stop = 1; break;
    case OPT_DEVICE: s->device = arg; break;
    case OPT_IDLE:
        return gimg_cli_parse_double("--idle", arg, 0, 365.0 * 86400, &s->idle_s);
    }
    return GIMG_OK;
}

/* --status: the server's own text on standard output. */
static int show_status(void)
{
    gimg_wire_reply r;
    if (gimg_remote_call(GIMG_WIRE_STATUS, 5000, &r)) {
        fprintf(stderr, "%s: no server running (%s)\n", TOOL, gimg_last_error());
        return 1;
    }
    fputs(r.message, stdout);
    return fflush(stdout) == 0 ? 0 : 1;
}

/* --stop: asks, then waits (10 s at most) until the server has let go of
 * its lock, so that a server started next is a new one. None running is
 * success: there is nothing to stop. */
static int stop_server(void)
{
    gimg_wire_reply r;
    if (gimg_remote_call(GIMG_WIRE_STOP, 5000, &r))
        return 0;
    char lock_path[4096];
    if (gimg_wire_path("gimgd.lock", 0, lock_path, sizeof lock_path))
        return 0;
    int fd = open(lock_path, O_RDONLY | O_CLOEXEC);
    for (int i = 0; fd >= 0 && i < 1000; i++) {
        if (flock(fd, LOCK_SH | LOCK_NB) == 0)
            break;
        nanosleep(&(struct timespec){0, 10000000}, NULL);
    }
    if (fd >= 0)
        close(fd);
    return 0;
}

/* The lock that makes one server per user, held for the server's life
 * (write_pid puts its pid inside). Returns its descriptor, or -1 with *other the
 * running server's pid (0 if unknown) when one holds it, or -2 on error. */
static int take_lock(long *other)
{
    char path[4096];
    *other = 0;
    if (gimg_wire_path("gimgd.lock", 1, path, sizeof path))
        return -2;
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0) {
        gimg_fail(GIMG_E_IO, "%s: %s", path, strerror(errno));
        return -2;
    }
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
        char pid[32] = "";
        ssize_t n = pread(fd, pid, sizeof pid - 1, 0);
        *other = n > 0 ? strtol(pid, NULL, 10) : 0;
        close(fd);
        return -1;
    }
    return fd;
}

/* The server's pid in its lock, for --status's readers and for people. */
static gimg_status write_pid(int fd)
{
    char pid[32];
    int n = snprintf(pid, sizeof pid, "%ld\n", (long)getpid());
    if (ftruncate(fd, 0) != 0 || pwrite(fd, pid, (size_t)n, 0) != n)
        return gimg_fail(GIMG_E_IO, "gimgd.lock: %s", strerror(errno));
    return GIMG_OK;
}

/* Detaches: the parent returns (exits 0) once the child listens, or 1 if
 * it could not; the child goes on with its messages in gimgd.log. */
static int detach(gimg_serve_opts *o)
{
    char log_path[4096];
    gimg_status st = gimg_wire_path("gimgd.log", 1, log_path, sizeof log_path);
    if (st)
        return gimg_cli_error(TOOL, NULL, st);
    int ready[2];
    if (pipe2(ready, O_CLOEXEC) != 0)
        return gimg_cli_error(TOOL, NULL, gimg_fail(GIMG_E_IO, "pipe: %s", strerror(errno)));
    pid_t pid = fork();
    if (pid < 0)
        return gimg_cli_error(TOOL, NULL, gimg_fail(GIMG_E_IO, "fork: %s", strerror(errno)));
    if (pid > 0) {
        close(ready[1]);
        char c = 0;
        ssize_t n;
        while ((n = read(ready[0], &c, 1)) < 0 && errno == EINTR)
            ;
        return n == 1 && c == 'R' ? 0 : 1;
    }
    close(ready[0]);
    setsid();
    if (chdir("/") != 0) {
        /* the server reads no path: the folder it runs in does not matter */
    }
    int null_fd = open("/dev/null", O_RDWR | O_CLOEXEC);
    int log_fd = open(log_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (null_fd >= 0) {
        dup2(null_fd, STDIN_FILENO);
        dup2(null_fd, STDOUT_FILENO);
        close(null_fd);
    }
    if (log_fd >= 0) {
        dup2(log_fd, STDERR_FILENO);
        close(log_fd);
    }
    o->ready_fd = ready[1];
    o->log = stderr;
    return -1;
}

int main(int argc, char **argv)
{
    gimg_cli_settle_threads(argv);
    /* Whatever the starter left open (a tool's pipe to the next one) is
     * not the server's to hold. */
    closefrom(3);
    settings s = {.idle_s = DEFAULT_IDLE_S};
    const gimg_cli_spec spec = {
        .tool = TOOL,
        .description = "Serve the gimg tools' GPU work from one warm GPU context per user.",
        .options = k_options,
        .handle = handle_option,
        .user = &s,
        .omit = GIMG_CLI_NO_WRITE_OPTS | GIMG_CLI_NO_DEVICE | GIMG_CLI_NO_OUTPUT |
                GIMG_CLI_NO_OPERANDS,
        .epilogue =
            "The tools start gimgd when --device gpu asks for it, and use a running\n"
            "one with --device auto; --no-server or GIMG_SERVER=off bypasses it.\n"
            "Its socket, lock and log are in $XDG_RUNTIME_DIR/gimg/, else\n"
            "/tmp/gimg-UID/: see gimgd(1).",
    };
    gimg_cli_common c;
    int rc = gimg_cli_done(&spec, &c, gimg_cli_parse(&spec, argc, argv, &c));
    if (rc >= 0)
        return rc;
    if (s.status + s.stop + (s.foreground || s.device) > 1)
        return gimg_cli_error(TOOL, NULL, gimg_fail(GIMG_E_USAGE, "--status, --stop and "
                                                    "serving are one at a time"));
    if (s.status)
        return show_status();
    if (s.stop)
        return stop_server();

    gimg_serve_opts o = {.idle_s = s.idle_s, .ready_fd = -1, .log = stderr,
                         .log_requests = c.verbose};
    const char *dev = s.device ? s.device : getenv("GIMGD_DEVICE");
    gimg_status st = gimg_parse_device(dev && *dev ? dev : "gpu:all", &o.device);
    if (!st && o.device.kind == GIMG_DEV_AUTO)
        st = gimg_fail(GIMG_E_USAGE, "--device auto: a server serves one device (gpu, gpu:N, "
                       "gpu:all or cpu)");
    if (st)
        return gimg_cli_error(TOOL, NULL, st);
    o.device.no_server = 1;
    long other;
    o.lock_fd = take_lock(&other);
    if (o.lock_fd == -2)
        return gimg_cli_error(TOOL, NULL, GIMG_E_IO);
    if (o.lock_fd == -1) {
        if (!s.foreground)
            return 0; /* started on demand, and one is running: done */
        return gimg_cli_error(TOOL, NULL, gimg_fail(GIMG_E_IO, "a server is running already "
                                                    "(pid %ld): gimgd --stop stops it", other));
    }
    if (!s.foreground && (rc = detach(&o)) >= 0)
        return rc;
    if ((st = write_pid(o.lock_fd)) || (st = gimg_serve(&o))) {
        fprintf(stderr, "%s: %s\n", TOOL, gimg_last_error());
        return gimg_exit_code(st);
    }
    return 0;
}
