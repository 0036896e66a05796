// libheif, for HEIC/HEIF stills (FFmpeg 5.1 cannot read them). Only the Media module imports it.
#ifndef THREADLINE_CHEIF_SHIM_H
#define THREADLINE_CHEIF_SHIM_H
#include <libheif/heif.h>
#endif
