// FreeType, to ask a font which characters it has (the text FFmpeg's drawtext draws with it).
// Only the Media module imports it.
#ifndef THREADLINE_CFREETYPE_SHIM_H
#define THREADLINE_CFREETYPE_SHIM_H
#include <ft2build.h>
#include FT_FREETYPE_H
#endif
