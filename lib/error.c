/* error.c — one message per thread, recorded where an error is found. */
#include "gimg.h"

#include <stdarg.h>
#include <stdio.h>

static _Thread_local char t_message[512];

gimg_status gimg_fail(gimg_status st, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t_message, sizeof t_message, fmt, ap);
    va_end(ap);
    return st;
}

const char *gimg_last_error(void)
{
    return t_message;
}

int gimg_exit_code(gimg_status st)
{
    return st == GIMG_OK ? 0 : st == GIMG_E_USAGE ? 2 : 1;
}
