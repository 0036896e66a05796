// FreeType, to ask a font which characters it has (the text FFmpeg's drawtext draws with it),
// and its name and heights (libass sizes fonts by them).
// Only the Media module imports it.
#ifndef THREADLINE_CFREETYPE_SHIM_H
#define THREADLINE_CFREETYPE_SHIM_H
#include <ft2build.h>
#include FT_FREETYPE_H
#include FT_TRUETYPE_TABLES_H
#endif
