#define _GNU_SOURCE
#include "CSupport.h"
#include <locale.h>
#include <pthread.h>
#include <sys/ioctl.h>
#include <wchar.h>

static locale_t utf8_table;
static pthread_once_t utf8_once = PTHREAD_ONCE_INIT;
static void load_utf8_table(void) { utf8_table = newlocale(LC_CTYPE_MASK, "C.UTF-8", (locale_t)0); }

int tl_column_width(uint32_t code_point) {
    pthread_once(&utf8_once, load_utf8_table);
    if (!utf8_table) return -1;
    // The process keeps the C locale it started in; only this thread, only for this call, reads
    // glibc's UTF-8 table.
    locale_t previous = uselocale(utf8_table);
    int w = wcwidth((wchar_t)code_point);
    uselocale(previous);
    return w;
}

int tl_terminal_columns(int fd) {
    struct winsize size;
    if (ioctl(fd, TIOCGWINSZ, &size) != 0 || size.ws_col == 0) return 0;
    return size.ws_col;
}
