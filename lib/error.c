/* error.c — one message per thread, recorded where an error is found. */
#include "gimg.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char t_message[512];

/* The arguments may include gimg_last_error() itself (a message built on
 * the one below it), so the new one is formatted apart, then copied. */
gimg_status gimg_fail(gimg_status st, const char *fmt, ...)
{
    char message[sizeof t_message];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(message, sizeof message, fmt, ap);
    va_end(ap);
    memcpy(t_message, message, sizeof message);
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
