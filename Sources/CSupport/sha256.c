#include "CSupport.h"
#include <string.h>
#include <sys/resource.h>

static const uint32_t K[64] = {
    0x428a2f98,0x71374491,0xb5c0fbcf,0xe9b5dba5,0x3956c25b,0x59f111f1,0x923f82a4,0xab1c5ed5,
    0xd807aa98,0x12835b01,0x243185be,0x550c7dc3,0x72be5d74,0x80deb1fe,0x9bdc06a7,0xc19bf174,
    0xe49b69c1,0xefbe4786,0x0fc19dc6,0x240ca1cc,0x2de92c6f,0x4a7484aa,0x5cb0a9dc,0x76f988da,
    0x983e5152,0xa831c66d,0xb00327c8,0xbf597fc7,0xc6e00bf3,0xd5a79147,0x06ca6351,0x14292967,
    0x27b70a85,0x2e1b2138,0x4d2c6dfc,0x53380d13,0x650a7354,0x766a0abb,0x81c2c92e,0x92722c85,
    0xa2bfe8a1,0xa81a664b,0xc24b8b70,0xc76c51a3,0xd192e819,0xd6990624,0xf40e3585,0x106aa070,
    0x19a4c116,0x1e376c08,0x2748774c,0x34b0bcb5,0x391c0cb3,0x4ed8aa4a,0x5b9cca4f,0x682e6ff3,
    0x748f82ee,0x78a5636f,0x84c87814,0x8cc70208,0x90befffa,0xa4506ceb,0xbef9a3f7,0xc67178f2};

#define ROTR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void compress(uint32_t s[8], const uint8_t block[64]) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)block[4*i] << 24 | (uint32_t)block[4*i+1] << 16 | (uint32_t)block[4*i+2] << 8 | block[4*i+3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROTR(w[i-15], 7) ^ ROTR(w[i-15], 18) ^ (w[i-15] >> 3);
        uint32_t s1 = ROTR(w[i-2], 17) ^ ROTR(w[i-2], 19) ^ (w[i-2] >> 10);
        w[i] = w[i-16] + s0 + w[i-7] + s1;
    }
    uint32_t a = s[0], b = s[1], c = s[2], d = s[3], e = s[4], f = s[5], g = s[6], h = s[7];
    for (int i = 0; i < 64; i++) {
        uint32_t S1 = ROTR(e, 6) ^ ROTR(e, 11) ^ ROTR(e, 25);
        uint32_t ch = (e & f) ^ (~e & g);
        uint32_t t1 = h + S1 + ch + K[i] + w[i];
        uint32_t S0 = ROTR(a, 2) ^ ROTR(a, 13) ^ ROTR(a, 22);
        uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
        uint32_t t2 = S0 + maj;
        h = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    s[0] += a; s[1] += b; s[2] += c; s[3] += d; s[4] += e; s[5] += f; s[6] += g; s[7] += h;
}

#if defined(__x86_64__) && (defined(__clang__) || defined(__GNUC__))
#include <immintrin.h>
#define TL_HAVE_SHA_NI 1

/* The same compression with the CPU's SHA extensions (x86 SHA-NI): the state lives as ABEF and
   CDGH in two registers, sha256rnds2 does two rounds, msg1/msg2 extend the message schedule. */
__attribute__((target("sha,sse4.1,ssse3")))
static void compress_ni(uint32_t s[8], const uint8_t *p, size_t blocks) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bULL, 0x0405060700010203ULL);
    __m128i dcba = _mm_loadu_si128((const __m128i *)&s[0]);
    __m128i hgfe = _mm_loadu_si128((const __m128i *)&s[4]);
    __m128i cdab = _mm_shuffle_epi32(dcba, 0xB1);
    __m128i efgh = _mm_shuffle_epi32(hgfe, 0x1B);
    __m128i abef = _mm_alignr_epi8(cdab, efgh, 8);
    __m128i cdgh = _mm_blend_epi16(efgh, cdab, 0xF0);
    for (; blocks > 0; blocks--, p += 64) {
        const __m128i abef0 = abef, cdgh0 = cdgh;
        __m128i w[16];
        for (int j = 0; j < 4; j++) w[j] = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
        for (int j = 4; j < 16; j++) {
            __m128i t = _mm_sha256msg1_epu32(w[j - 4], w[j - 3]);      /* W[i-16] + s0(W[i-15]) */
            t = _mm_add_epi32(t, _mm_alignr_epi8(w[j - 1], w[j - 2], 4)); /* + W[i-7] */
            w[j] = _mm_sha256msg2_epu32(t, w[j - 1]);                  /* + s1(W[i-2]) */
        }
        for (int j = 0; j < 16; j++) {
            __m128i wk = _mm_add_epi32(w[j], _mm_loadu_si128((const __m128i *)&K[4 * j]));
            cdgh = _mm_sha256rnds2_epu32(cdgh, abef, wk);
            wk = _mm_shuffle_epi32(wk, 0x0E);
            abef = _mm_sha256rnds2_epu32(abef, cdgh, wk);
        }
        abef = _mm_add_epi32(abef, abef0);
        cdgh = _mm_add_epi32(cdgh, cdgh0);
    }
    __m128i feba = _mm_shuffle_epi32(abef, 0x1B);
    __m128i dchg = _mm_shuffle_epi32(cdgh, 0xB1);
    _mm_storeu_si128((__m128i *)&s[0], _mm_blend_epi16(feba, dchg, 0xF0));
    _mm_storeu_si128((__m128i *)&s[4], _mm_alignr_epi8(dchg, feba, 8));
}

/* Whether to use them where the CPU has them (tests turn it off to check the portable code). */
static _Atomic int use_ni = 1;

static int has_sha_ni(void) {
    static _Atomic int known = -1;
    if (known < 0) {
        __builtin_cpu_init();
        known = __builtin_cpu_supports("sha") && __builtin_cpu_supports("sse4.1") && __builtin_cpu_supports("ssse3");
    }
    return known && use_ni;
}
#endif

/* Compresses `blocks` consecutive 64-byte blocks. */
static void compress_blocks(uint32_t s[8], const uint8_t *p, size_t blocks) {
#ifdef TL_HAVE_SHA_NI
    if (has_sha_ni()) { compress_ni(s, p, blocks); return; }
#endif
    for (; blocks > 0; blocks--, p += 64) compress(s, p);
}

int tl_sha256_accelerated(void) {
#ifdef TL_HAVE_SHA_NI
    return has_sha_ni();
#else
    return 0;
#endif
}

int tl_sha256_use_acceleration(int on) {
#ifdef TL_HAVE_SHA_NI
    use_ni = on != 0;
    return has_sha_ni();
#else
    (void)on;
    return 0;
#endif
}

void tl_sha256_init(tl_sha256_ctx *ctx) {
    static const uint32_t iv[8] = {0x6a09e667,0xbb67ae85,0x3c6ef372,0xa54ff53a,
                                   0x510e527f,0x9b05688c,0x1f83d9ab,0x5be0cd19};
    memcpy(ctx->state, iv, sizeof iv);
    ctx->length = 0;
    ctx->buffered = 0;
}

void tl_sha256_update(tl_sha256_ctx *ctx, const void *data, size_t len) {
    const uint8_t *p = data;
    ctx->length += len;
    if (ctx->buffered) {
        size_t take = 64 - ctx->buffered < len ? 64 - ctx->buffered : len;
        memcpy(ctx->buffer + ctx->buffered, p, take);
        ctx->buffered += take; p += take; len -= take;
        if (ctx->buffered < 64) return;
        compress_blocks(ctx->state, ctx->buffer, 1);
        ctx->buffered = 0;
    }
    if (len >= 64) { compress_blocks(ctx->state, p, len / 64); p += len / 64 * 64; len %= 64; }
    memcpy(ctx->buffer, p, len);
    ctx->buffered = len;
}

void tl_sha256_final(tl_sha256_ctx *ctx, uint8_t out[32]) {
    uint64_t bits = ctx->length * 8;
    uint8_t pad = 0x80;
    uint8_t zero = 0;
    uint64_t keep = ctx->length;
    tl_sha256_update(ctx, &pad, 1);
    while (ctx->buffered != 56) tl_sha256_update(ctx, &zero, 1);
    uint8_t len[8];
    for (int i = 0; i < 8; i++) len[i] = (uint8_t)(bits >> (56 - 8 * i));
    tl_sha256_update(ctx, len, 8);
    ctx->length = keep;
    for (int i = 0; i < 8; i++) {
        out[4*i] = (uint8_t)(ctx->state[i] >> 24); out[4*i+1] = (uint8_t)(ctx->state[i] >> 16);
        out[4*i+2] = (uint8_t)(ctx->state[i] >> 8); out[4*i+3] = (uint8_t)ctx->state[i];
    }
}

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
