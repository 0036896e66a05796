#ifndef THREADLINE_CSUPPORT_H
#define THREADLINE_CSUPPORT_H
#include <stddef.h>
#include <stdint.h>

/// Incremental SHA-256 (FIPS 180-4). Kept in C so hashing stays fast in debug builds.
typedef struct {
    uint32_t state[8];
    uint64_t length;      // bytes hashed so far
    uint8_t buffer[64];
    size_t buffered;
} tl_sha256_ctx;

void tl_sha256_init(tl_sha256_ctx *ctx);
void tl_sha256_update(tl_sha256_ctx *ctx, const void *data, size_t len);
void tl_sha256_final(tl_sha256_ctx *ctx, uint8_t out[32]);
int tl_sha256_accelerated(void);  /* 1 when the CPU's SHA extensions do the work */
/* Turns their use off (0) or back on; returns whether they are used now. */
int tl_sha256_use_acceleration(int on);

/// Peak resident set size of this process, in bytes (getrusage).
int64_t tl_peak_rss_self(void);
/// Peak resident set size of reaped children, in bytes.
int64_t tl_peak_rss_children(void);
/// CPU seconds (user + system) used by this process.
double tl_cpu_seconds_self(void);

#endif

/// Ask the kernel to send `sig` to this process when its parent dies (Linux; no-op elsewhere).
void tl_die_with_parent(int sig);

/// Unblocks SIGTERM, SIGINT, SIGHUP and SIGQUIT for this thread (and threads it starts later): a
/// parent's blocked signal mask is inherited through exec, and would leave these signals pending.
void tl_unblock_termination_signals(void);
