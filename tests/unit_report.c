/*
 * unit_report — tests of lib/report.c (channel lists, JSON and CSV text)
 * and of gimg_channel_name.
 */
#include "check.h"
#include "report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* What fn printed, in a static buffer. */
#define PRINTED(call)                                                              \
    ({                                                                             \
        static char buf_[256];                                                     \
        FILE *f = fmemopen(buf_, sizeof buf_, "w");                                \
        call;                                                                      \
        fclose(f);                                                                 \
        buf_;                                                                      \
    })

static const char *const k_names[] = {"gray", "red", "green", "blue", "alpha", "luma", NULL};

static void test_name_list(void)
{
    unsigned m = 0;
    CHECK(gimg_parse_name_list("-c", "red", k_names, &m) == GIMG_OK && m == 2u);
    CHECK(gimg_parse_name_list("-c", "alpha,red,luma", k_names, &m) == GIMG_OK &&
          m == (2u | 16u | 32u));
    CHECK(gimg_parse_name_list("-c", "red,red", k_names, &m) == GIMG_OK && m == 2u);
    m = 7;
    CHECK(gimg_parse_name_list("-c", "reds", k_names, &m) == GIMG_E_USAGE && m == 7);
    CHECK(strstr(gimg_last_error(), "unknown name 'reds'") &&
          strstr(gimg_last_error(), "gray, red, green, blue, alpha, luma"));
    CHECK(gimg_parse_name_list("-c", "", k_names, &m) == GIMG_E_USAGE);
    CHECK(gimg_parse_name_list("-c", "red,", k_names, &m) == GIMG_E_USAGE);
    CHECK(gimg_parse_name_list("-c", ",red", k_names, &m) == GIMG_E_USAGE);
    CHECK(gimg_parse_name_list("-c", "red,,blue", k_names, &m) == GIMG_E_USAGE);
    CHECK(strstr(gimg_last_error(), "empty name"));
}

static void test_json(void)
{
    CHECK(!strcmp(PRINTED(gimg_json_string(f, "a\"b\\c\n\t\x01ü")),
                  "\"a\\\"b\\\\c\\n\\t\\u0001ü\""));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, 0.1)), "0.1"));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, 255)), "255"));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, 1.0 / 3)), "0.3333333333333333"));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, 18446744073709551615.0)), "1.8446744073709552e+19"));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, INFINITY)), "null"));
    CHECK(!strcmp(PRINTED(gimg_json_number(f, NAN)), "null"));
    /* Every printed number reads back exactly. */
    unsigned long long x = 0x9E3779B97F4A7C15ull;
    int exact = 1;
    for (int i = 0; i < 10000; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        double v;
        memcpy(&v, &x, sizeof v);
        if (!isfinite(v))
            continue;
        exact &= strtod(PRINTED(gimg_json_number(f, v)), NULL) == v;
    }
    CHECK(exact);
}

static void test_csv(void)
{
    CHECK(!strcmp(PRINTED(gimg_csv_field(f, "plain.png")), "plain.png"));
    CHECK(!strcmp(PRINTED(gimg_csv_field(f, "a,b.png")), "\"a,b.png\""));
    CHECK(!strcmp(PRINTED(gimg_csv_field(f, "say \"hi\".png")), "\"say \"\"hi\"\".png\""));
    CHECK(!strcmp(PRINTED(gimg_csv_field(f, "two\nlines")), "\"two\nlines\""));
}

static void test_channel_names(void)
{
    CHECK(!strcmp(gimg_channel_name(1, 0), "gray"));
    CHECK(!strcmp(gimg_channel_name(2, 1), "alpha"));
    CHECK(!strcmp(gimg_channel_name(3, 2), "blue"));
    CHECK(!strcmp(gimg_channel_name(4, 3), "alpha"));
    CHECK(gimg_channel_name(3, 3) == NULL && gimg_channel_name(5, 0) == NULL &&
          gimg_channel_name(1, -1) == NULL);
}

int main(void)
{
    RUN(test_name_list);
    RUN(test_json);
    RUN(test_csv);
    RUN(test_channel_names);
    return check_summary();
}
