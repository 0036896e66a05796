// Shims for the FFmpeg macros that do not import into Swift.
// Only the Media module imports this target.
#ifndef THREADLINE_CFFMPEG_SHIM_H
#define THREADLINE_CFFMPEG_SHIM_H

#include <libavformat/avformat.h>
#include <libavformat/avio.h>
#include <libavcodec/avcodec.h>
#include <libavutil/avutil.h>
#include <libavutil/opt.h>
#include <libavutil/display.h>
#include <libavutil/channel_layout.h>
#include <libavutil/samplefmt.h>
#include <libavutil/imgutils.h>
#include <libavutil/dict.h>
#include <libavutil/error.h>
#include <libavutil/log.h>
#include <libavfilter/avfilter.h>
#include <libavfilter/buffersink.h>
#include <libavfilter/buffersrc.h>
#include <libswscale/swscale.h>
#include <libswresample/swresample.h>
#include <libavutil/audio_fifo.h>
#include <libavutil/cpu.h>

static inline int tl_averror(int e) { return AVERROR(e); }
static inline int tl_averror_eof(void) { return AVERROR_EOF; }
static inline int tl_averror_eagain(void) { return AVERROR(EAGAIN); }
static inline int tl_averror_invaliddata(void) { return AVERROR_INVALIDDATA; }
static inline int tl_averror_exit(void) { return AVERROR_EXIT; }
static inline int tl_averror_protocol_not_found(void) { return AVERROR_PROTOCOL_NOT_FOUND; }
static inline int64_t tl_nopts_value(void) { return AV_NOPTS_VALUE; }
static inline AVRational tl_time_base_q(void) { return AV_TIME_BASE_Q; }

/// av_err2str is a macro around a compound literal: give Swift a buffer-based form.
static inline void tl_err2str(int err, char *buf, size_t size) { av_strerror(err, buf, size); }

/// Stereo layout without the AV_CHANNEL_LAYOUT_STEREO compound-literal macro.
static inline void tl_layout_stereo(AVChannelLayout *layout) { av_channel_layout_default(layout, 2); }

/// Silence libav's own logging unless asked for.
static inline void tl_set_log_level(int level) { av_log_set_level(level); }

#include <time.h>

/// An AVIOInterruptCB whose opaque pointer is a CLOCK_MONOTONIC deadline in seconds (a double):
/// libavformat polls it inside blocking connects and reads, so an overall deadline holds even
/// while a server trickles bytes or never answers.
static inline int tl_deadline_passed(void *opaque) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9 > *(const double *)opaque;
}
static inline double tl_monotonic_now(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}
static inline AVIOInterruptCB tl_deadline_callback(double *deadline) {
    AVIOInterruptCB cb = { tl_deadline_passed, deadline };
    return cb;
}

#endif
