#define _GNU_SOURCE
#include "CSupport.h"
#include <errno.h>
#include <fcntl.h>
#include <linux/fs.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

enum { step = 64 << 20 };

/* Whether the caller still wants the copy; errno ECANCELED when not. */
static int wanted(int (*keep_going)(void *), void *context) {
    if (!keep_going || keep_going(context)) return 1;
    errno = ECANCELED;
    return 0;
}

/* read/write, for file systems that copy_file_range cannot serve. */
static int copy_by_hand(int in, int out, int (*keep_going)(void *), void *context) {
    enum { size = 1 << 20 };
    char *buffer = malloc(size);
    if (!buffer) return -1;
    int result = 0;
    for (long k = 0;; k++) {
        if (k % (step / size) == 0 && !wanted(keep_going, context)) { result = -1; break; }
        ssize_t n = read(in, buffer, size);
        if (n == 0) break;
        if (n < 0) { if (errno == EINTR) continue; result = -1; break; }
        for (ssize_t done = 0; done < n && result == 0;) {
            ssize_t w = write(out, buffer + done, (size_t)(n - done));
            if (w < 0) { if (errno != EINTR) result = -1; } else done += w;
        }
        if (result != 0) break;
    }
    int e = errno;
    free(buffer);
    errno = e;
    return result;
}

int tl_copy_file(const char *src, const char *dst) { return tl_copy_file_checked(src, dst, NULL, NULL); }

int tl_copy_file_checked(const char *src, const char *dst, int (*keep_going)(void *), void *context) {
    int in = open(src, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = open(dst, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (out < 0) { int e = errno; close(in); errno = e; return -1; }
    int result = 0;
    if (ioctl(out, FICLONE, in) != 0) {
        for (;;) {
            if (!wanted(keep_going, context)) { result = -1; break; }
            ssize_t n = copy_file_range(in, NULL, out, NULL, (size_t)step, 0);
            if (n > 0) continue;
            if (n == 0) break;
            if (errno == EINTR) continue;
            /* Nothing copied yet and the kernel or file system cannot: by hand. */
            if ((errno == EXDEV || errno == ENOSYS || errno == EINVAL || errno == EOPNOTSUPP)
                && lseek(in, 0, SEEK_CUR) == 0 && lseek(out, 0, SEEK_CUR) == 0) {
                result = copy_by_hand(in, out, keep_going, context);
            } else {
                result = -1;
            }
            break;
        }
    }
    int e = errno;
    if (close(out) != 0 && result == 0) { result = -1; e = errno; }
    close(in);
    if (result != 0) unlink(dst);
    errno = e;
    return result;
}

int tl_set_note(const char *path, const char *name, const char *value) {
    return setxattr(path, name, value, strlen(value), 0);
}

int tl_get_note(const char *path, const char *name, char *value, int capacity) {
    ssize_t n = getxattr(path, name, value, (size_t)(capacity - 1));
    if (n < 0) return -1;
    value[n] = 0;
    return (int)n;
}
