// LittleCMS 2, for ICC colour profiles (Display P3 HEICs and JPEGs). Only the Media module imports it.
#ifndef THREADLINE_CLCMS_SHIM_H
#define THREADLINE_CLCMS_SHIM_H
#include <lcms2.h>
/// TYPE_RGB_8 is a macro built from other macros: give Swift the value.
static inline cmsUInt32Number tl_type_rgb_8(void) { return TYPE_RGB_8; }
#endif
