#include "CSupport.h"
#include <errno.h>
#include <string.h>
#include <unistd.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>

int64_t tl_peak_rss_self(void) {
    struct rusage u; getrusage(RUSAGE_SELF, &u); return (int64_t)u.ru_maxrss * 1024;
}
int64_t tl_peak_rss_children(void) {
    struct rusage u; getrusage(RUSAGE_CHILDREN, &u); return (int64_t)u.ru_maxrss * 1024;
}
double tl_cpu_seconds_self(void) {
    struct rusage u; getrusage(RUSAGE_SELF, &u);
    return u.ru_utime.tv_sec + u.ru_utime.tv_usec / 1e6 + u.ru_stime.tv_sec + u.ru_stime.tv_usec / 1e6;
}

#ifdef __linux__
#include <sys/prctl.h>
void tl_die_with_parent(int sig) { prctl(PR_SET_PDEATHSIG, sig); }
#else
void tl_die_with_parent(int sig) { (void)sig; }
#endif

#include <signal.h>
#include <pthread.h>
void tl_unblock_termination_signals(void) {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM); sigaddset(&set, SIGINT); sigaddset(&set, SIGHUP); sigaddset(&set, SIGQUIT);
    pthread_sigmask(SIG_UNBLOCK, &set, NULL);
}

#ifdef __GLIBC__
#include <malloc.h>
int tl_malloc_keep(int mmap_threshold, int trim_threshold) {
    return mallopt(M_MMAP_THRESHOLD, mmap_threshold) && mallopt(M_TRIM_THRESHOLD, trim_threshold);
}
int tl_malloc_trim(void) { return malloc_trim(0); }
#else
int tl_malloc_keep(int mmap_threshold, int trim_threshold) { (void)mmap_threshold; (void)trim_threshold; return 0; }
int tl_malloc_trim(void) { return 0; }
#endif

int tl_unix_socket_listened(const char *path) {
    struct sockaddr_un a;
    memset(&a, 0, sizeof a);
    a.sun_family = AF_UNIX;
    if (strlen(path) >= sizeof a.sun_path) return -1;
    strcpy(a.sun_path, path);
    // Non-blocking: a listener whose backlog is full answers EAGAIN (cannot tell) rather than hold us.
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    int r = connect(fd, (struct sockaddr *)&a, sizeof a);
    int e = errno;
    close(fd);
    if (r == 0) return 1;
    return e == ECONNREFUSED ? 0 : -1;
}
