// Only the Transport module imports this target.
#ifndef THREADLINE_CZEROMQ_SHIM_H
#define THREADLINE_CZEROMQ_SHIM_H
#include <zmq.h>
#include <errno.h>
static inline int tl_zmq_errno(void) { return zmq_errno(); }
static inline int tl_eagain(void) { return EAGAIN; }
static inline int tl_eintr(void) { return EINTR; }
static inline int tl_ehostunreach(void) { return EHOSTUNREACH; }
static inline int tl_etimedout(void) { return ETIMEDOUT; }
/* ZAP_ENFORCE_DOMAIN is listed among the draft options, but libzmq 4.3.4 accepts it. */
static inline int tl_zmq_zap_enforce_domain(void) { return 93; }
#endif
