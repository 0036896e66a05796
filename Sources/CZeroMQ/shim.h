// Only the Transport module imports this target.
#ifndef THREADLINE_CZEROMQ_SHIM_H
#define THREADLINE_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
#include <sys/eventfd.h>
#include <unistd.h>
#include <stdint.h>
static inline int tl_zmq_errno(void) { return zmq_errno(); }
static inline int tl_eagain(void) { return EAGAIN; }
static inline int tl_eintr(void) { return EINTR; }
static inline int tl_ehostunreach(void) { return EHOSTUNREACH; }
static inline int tl_etimedout(void) { return ETIMEDOUT; }
/* ZAP_ENFORCE_DOMAIN is listed among the draft options, but libzmq 4.3.4 accepts it. */
static inline int tl_zmq_zap_enforce_domain(void) { return 93; }
/* An eventfd for waking a thread blocked in zmq_poll. */
static inline int tl_eventfd(void) { return eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC); }
static inline void tl_eventfd_signal(int fd) { uint64_t one = 1; ssize_t r = write(fd, &one, 8); (void)r; }
static inline void tl_eventfd_drain(int fd) { uint64_t v; ssize_t r = read(fd, &v, 8); (void)r; }
#endif
