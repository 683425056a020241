/*
 * report.h — what the report tools (gstats, ghist) share: channel lists on
 * the command line, and the text of JSON and CSV output.
 *
 * Nothing here allocates; the printers write to a FILE the caller owns and
 * leave error checking to its final fclose (gimg_cli_close_stdout).
 */
#ifndef GIMG_REPORT_H
#define GIMG_REPORT_H

#include "gimg.h"

#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Parses a comma-separated list of names ("red,alpha") for the option
 * `what`: sets bit i of *mask for each item equal to names[i] (names ends
 * with NULL; at most 32). An empty list or item, or an unknown name, is
 * GIMG_E_USAGE with a message listing the accepted names. */
gimg_status gimg_parse_name_list(const char *what, const char *list,
                                 const char *const *names, unsigned *mask);

/* s as a JSON string, quoted, with control characters, quotes and
 * backslashes escaped (bytes >= 0x80 pass through: file names are UTF-8
 * or opaque). */
void gimg_json_string(FILE *f, const char *s);
/* v as a JSON number with the fewest digits that read back as v; JSON has no
 * infinities or NaN, so those print as null. */
void gimg_json_number(FILE *f, double v);
/* s as one CSV field (RFC 4180): quoted, with quotes doubled, when it holds a
 * comma, a quote, a CR or a LF. */
void gimg_csv_field(FILE *f, const char *s);

#ifdef __cplusplus
}
#endif
#endif /* GIMG_REPORT_H */
