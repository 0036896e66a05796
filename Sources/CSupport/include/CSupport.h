#ifndef THREADLINE_CSUPPORT_H
#define THREADLINE_CSUPPORT_H
#include <stddef.h>
#include <stdint.h>
/* fts(3): walking a photo library, following its symbolic links without looping (Engine.LibraryScanner). */
#include <sys/types.h>
#include <sys/stat.h>
#include <fts.h>

/// Copies `src` to the new file `dst` (created 0644, never overwritten): a clone sharing the
/// blocks where the file system can (btrfs, XFS), else copy_file_range, else read/write. 0, or -1
/// with errno set (and `dst` removed).
int tl_copy_file(const char *src, const char *dst);
/// `tl_copy_file`, asking `keep_going(context)` before each 64 MiB: when it answers 0 the copy
/// stops, `dst` is removed and -1 returned with errno ECANCELED (a stopped fetch of a large file
/// gives its slot back at once). A clone is one step and is not asked.
int tl_copy_file_checked(const char *src, const char *dst, int (*keep_going)(void *context), void *context);
/// An extended attribute of a file, set and read as text (-1 with errno where the file system
/// keeps none: the caller does without).
int tl_set_note(const char *path, const char *name, const char *value);
int tl_get_note(const char *path, const char *name, char *value, int capacity);

/// Peak resident set size of this process, in bytes (getrusage).
int64_t tl_peak_rss_self(void);
/// Peak resident set size of reaped children, in bytes.
int64_t tl_peak_rss_children(void);
/// CPU seconds (user + system) used by this process.
double tl_cpu_seconds_self(void);
/// mallopt: allocations below `mmap_threshold` bytes come from the heap, and up to `trim_threshold`
/// bytes of freed heap are kept (glibc; elsewhere nothing). 1 when both were set.
int tl_malloc_keep(int mmap_threshold, int trim_threshold);
/// malloc_trim(0): gives the heap's free memory back to the system (glibc; elsewhere nothing). 1 when some was.
int tl_malloc_trim(void);

struct sockaddr;
/// Whether an address is loopback, link-local, private, shared (CGNAT), multicast, unspecified or
/// not an IP address at all: places a farm worker must not fetch from.
int tl_address_is_private(const struct sockaddr *sa);
int tl_ipv4_is_private(const uint8_t b[4]);
/// Turns the connect-time address guard on or off for the calling thread (see netguard.c).
void tl_fetch_guard(int on);
/// Whether the guard refused a connection since it was last turned on, on this thread.
int tl_fetch_guard_refused(void);
/// Whether this process's `connect` is the guarded one.
int tl_fetch_guard_installed(void);

/// Ask the kernel to send `sig` to this process when its parent dies (Linux; no-op elsewhere).
void tl_die_with_parent(int sig);

/// Whether a process listens on the Unix socket at `path`: 1 one does, 0 none does (the socket
/// was left by a process that is gone: connect is refused), -1 it cannot tell (no such file, a
/// full backlog, a path too long).
int tl_unix_socket_listened(const char *path);

/// Unblocks SIGTERM, SIGINT, SIGHUP and SIGQUIT for this thread (and threads it starts later): a
/// parent's blocked signal mask is inherited through exec, and would leave these signals pending.
void tl_unblock_termination_signals(void);

/// Columns a code point takes on a terminal (glibc's wcwidth with its UTF-8 table): 2 for wide
/// characters, 0 for combining marks, -1 where it cannot tell.
int tl_column_width(uint32_t code_point);
/// Columns of the terminal `fd` is, or 0 when it is not one or does not say.
int tl_terminal_columns(int fd);

#endif
