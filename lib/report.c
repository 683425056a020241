/* report.c — channel lists, JSON and CSV text for the report tools. */
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

gimg_status gimg_parse_name_list(const char *what, const char *list,
                                 const char *const *names, unsigned *mask)
{
    char accepted[256] = "";
    for (int i = 0; names[i]; i++)
        snprintf(accepted + strlen(accepted), sizeof accepted - strlen(accepted), "%s%s",
                 i ? ", " : "", names[i]);
    unsigned m = 0;
    const char *p = list;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0)
            return gimg_fail(GIMG_E_USAGE, "%s: empty name in '%s' (names: %s)", what, list,
                             accepted);
        int i = 0;
        while (names[i] && !(strlen(names[i]) == n && memcmp(names[i], p, n) == 0))
            i++;
        if (!names[i] || i >= 32)
            return gimg_fail(GIMG_E_USAGE, "%s: unknown name '%.*s' (names: %s)", what, (int)n,
                             p, accepted);
        m |= 1u << i;
        if (!p[n])
            break;
        p += n + 1;
    }
    *mask = m;
    return GIMG_OK;
}

void gimg_json_string(FILE *f, const char *s)
{
    putc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        switch (*p) {
        case '"': fputs("\\\"", f); break;
        case '\\': fputs("\\\\", f); break;
        case '\n': fputs("\\n", f); break;
        case '\r': fputs("\\r", f); break;
        case '\t': fputs("\\t", f); break;
        default:
            if (*p < 0x20)
                fprintf(f, "\\u%04x", *p);
            else
                putc(*p, f);
        }
    }
    putc('"', f);
}

void gimg_json_number(FILE *f, double v)
{
    if (!isfinite(v)) {
        fputs("null", f);
        return;
    }
    char buf[40];
    for (int digits = 1; digits <= 17; digits++) {
        snprintf(buf, sizeof buf, "%.*g", digits, v);
        if (strtod(buf, NULL) == v)
            break;
    }
    fputs(buf, f);
}

void gimg_csv_field(FILE *f, const char *s)
{
    if (!strpbrk(s, ",\"\r\n")) {
        fputs(s, f);
        return;
    }
    putc('"', f);
    for (; *s; s++) {
        if (*s == '"')
            putc('"', f);
        putc(*s, f);
    }
    putc('"', f);
}
