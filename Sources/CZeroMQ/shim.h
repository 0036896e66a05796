// Only the Transport module imports this target.
#ifndef THREADLINE_CZEROMQ_SHIM_H
#define THREADLINE_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
static inline int tl_zmq_errno(void) { return zmq_errno(); }
static inline int tl_eagain(void) { return EAGAIN; }
static inline int tl_eintr(void) { return EINTR; }
static inline int tl_ehostunreach(void) { return EHOSTUNREACH; }
#endif
