// The fetch address guard: libavformat follows HTTP redirects and resolves names itself, with no
// hook to see where it connects. This file defines `connect`, which the dynamic linker prefers to
// libc's for every library in the process (ELF symbol interposition, as LD_PRELOAD tools do), and
// refuses a connection to a loopback, link-local, private or otherwise non-public address while
// the calling thread has the guard on. Every other call goes straight to libc's `connect`.
// The check is at connect time, on the address actually used, so redirects and DNS answers that
// change between a check and the connection are both covered.
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>
#include "CSupport.h"

static __thread int guard_on = 0;
static __thread int guard_refused = 0;

int tl_address_is_private(const struct sockaddr *sa) {
    if (sa == NULL) return 1;
    if (sa->sa_family == AF_INET) {
        const uint8_t *b = (const uint8_t *)&((const struct sockaddr_in *)sa)->sin_addr;
        return tl_ipv4_is_private(b);
    }
    if (sa->sa_family == AF_INET6) {
        const uint8_t *b = ((const struct sockaddr_in6 *)sa)->sin6_addr.s6_addr;
        int zero10 = 1;
        for (int i = 0; i < 10; i++) if (b[i]) zero10 = 0;
        int zero15 = zero10 && !b[10] && !b[11] && !b[12] && !b[13] && !b[14];
        if (zero15) return 1;                                         // :: and ::1
        if ((b[0] & 0xfe) == 0xfc) return 1;                          // fc00::/7 unique local
        if (b[0] == 0xfe && (b[1] & 0xc0) == 0x80) return 1;          // fe80::/10 link-local
        if (b[0] == 0xff) return 1;                                   // multicast
        if (zero10 && b[10] == 0xff && b[11] == 0xff) return tl_ipv4_is_private(b + 12);   // ::ffff:a.b.c.d
        if (b[0] == 0x00 && b[1] == 0x64 && b[2] == 0xff && b[3] == 0x9b) return tl_ipv4_is_private(b + 12);  // 64:ff9b::/96 NAT64
        return 0;
    }
    return 1;   // Unix sockets and anything else are never a web server on a farm
}

int tl_ipv4_is_private(const uint8_t b[4]) {
    if (b[0] == 0 || b[0] == 10 || b[0] == 127) return 1;
    if (b[0] == 169 && b[1] == 254) return 1;                         // link-local (cloud metadata)
    if (b[0] == 192 && b[1] == 168) return 1;
    if (b[0] == 172 && b[1] >= 16 && b[1] <= 31) return 1;
    if (b[0] == 100 && b[1] >= 64 && b[1] <= 127) return 1;           // carrier-grade NAT
    if (b[0] >= 224) return 1;                                        // multicast, reserved, broadcast
    return 0;
}

void tl_fetch_guard(int on) { guard_on = on; guard_refused = 0; }
int tl_fetch_guard_refused(void) { return guard_refused; }

typedef int (*connect_fn)(int, const struct sockaddr *, socklen_t);

int connect(int fd, const struct sockaddr *addr, socklen_t len) {
    static connect_fn real = NULL;
    if (real == NULL) real = (connect_fn)dlsym(RTLD_NEXT, "connect");
    // Only IP connections are judged: name lookups may talk to nscd or systemd-resolved over
    // Unix sockets, and libavformat's own protocols are limited to the web by a whitelist.
    if (guard_on && addr != NULL && (addr->sa_family == AF_INET || addr->sa_family == AF_INET6) && tl_address_is_private(addr)) {
        guard_refused = 1;
        errno = ECONNREFUSED;
        return -1;
    }
    return real(fd, addr, len);
}

int tl_fetch_guard_installed(void) {
    // Whether libavformat's calls reach the `connect` above: the address the dynamic linker gives
    // for the name must be this file's.
    return dlsym(RTLD_DEFAULT, "connect") == (void *)connect;
}
