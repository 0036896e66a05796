// libexif, for capture dates and Apple's Live Photo identifier in JPEG and HEIC EXIF blocks.
// Only the Media module imports it.
#ifndef THREADLINE_CEXIF_SHIM_H
#define THREADLINE_CEXIF_SHIM_H
#include <libexif/exif-data.h>
#include <libexif/exif-loader.h>
#include <libexif/exif-mnote-data.h>
#include <string.h>

/// EXIF from a JPEG file or from an "Exif\0\0"-prefixed block, loaded as written: no "fixing"
/// (libexif's FOLLOW_SPECIFICATION would add missing mandatory tags, DateTimeOriginal among them,
/// with the current time) and no dropping of tags it does not know.
static inline ExifData *tl_exif_load(const unsigned char *buf, unsigned int size) {
    ExifData *d = exif_data_new();
    if (!d) return NULL;
    exif_data_unset_option(d, EXIF_DATA_OPTION_FOLLOW_SPECIFICATION);
    exif_data_unset_option(d, EXIF_DATA_OPTION_IGNORE_UNKNOWN_TAGS);
    exif_data_load_data(d, buf, size);
    return d;
}

static inline ExifData *tl_exif_load_file(const char *path) {
    ExifLoader *l = exif_loader_new();
    if (!l) return NULL;
    exif_loader_write_file(l, path);
    const unsigned char *buf = NULL; unsigned int size = 0;
    exif_loader_get_buf(l, &buf, &size);
    ExifData *d = (buf && size) ? tl_exif_load(buf, size) : NULL;
    exif_loader_unref(l);
    return d;
}

/// The value of `tag` in IFD `ifd` as text (NULL when absent).
static inline const char *tl_exif_text(ExifData *d, int ifd, int tag, char *out, unsigned int size) {
    if (ifd < 0 || ifd >= EXIF_IFD_COUNT || !d->ifd[ifd]) return NULL;
    ExifEntry *e = exif_content_get_entry(d->ifd[ifd], (ExifTag)tag);
    if (!e) return NULL;
    if (e->format == EXIF_FORMAT_ASCII && e->data && e->size) {
        unsigned int n = e->size < size - 1 ? e->size : size - 1;
        memcpy(out, e->data, n); out[n] = 0;
        return out;
    }
    return exif_entry_get_value(e, out, size);
}

/// The raw bytes of `tag` in IFD `ifd` (NULL when absent); *size gets their length.
static inline const unsigned char *tl_exif_raw(ExifData *d, int ifd, int tag, unsigned int *size) {
    if (ifd < 0 || ifd >= EXIF_IFD_COUNT || !d->ifd[ifd]) return NULL;
    ExifEntry *e = exif_content_get_entry(d->ifd[ifd], (ExifTag)tag);
    if (!e || !e->data) return NULL;
    *size = e->size;
    return e->data;
}

#endif
