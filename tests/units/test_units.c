/*
 * Unit tests of small shared pieces, one per argument:
 *   stat   hdx_stat_parse (gather/proc.h) on stat lines whose comm holds spaces and parentheses.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "gather/proc.h"
#include "../check.h"

static void test_stat(void)
{
    hdx_stat st;
    /* A comm of "a) b (c": the fields start after the last ')'. */
    const char *line = "4123 (a) b (c) S 17 4123 4123 0 -1 4194560 5 0 0 0 12 34 -5 0 20 0 3 0 987654 "
                       "123 456 18446744073709551615 1 2 140737488346112 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0 "
                       "0 0 0 0 0 0 0 0 9\n";
    CHECK(hdx_stat_parse(line, &st) == 0);
    CHECK(strcmp(st.comm, "a) b (c") == 0, "comm %s", st.comm);
    CHECK(st.state == 'S', "state %c", st.state);
    CHECK(st.f[4] == 17);        /* ppid */
    CHECK(st.f[9] == 4194560);   /* flags */
    CHECK(st.f[14] == 12 && st.f[15] == 34);
    CHECK(st.f[16] == (unsigned long long)-5); /* as strtoull reads a negative field */
    CHECK(st.f[22] == 987654);   /* starttime */
    CHECK(st.f[28] == 140737488346112ULL); /* startstack */
    CHECK(st.f[52] == 9);        /* exit_code, the last field */
    CHECK(st.last == 52, "last %d", st.last);

    /* A short line: absent fields read 0. */
    CHECK(hdx_stat_parse("1 ((sd-pam)) Z 1\n", &st) == 0);
    CHECK(strcmp(st.comm, "(sd-pam)") == 0 && st.state == 'Z' && st.f[4] == 1 && st.f[22] == 0 && st.last == 4);

    /* No stat line at all. */
    CHECK(hdx_stat_parse("", &st) == -EIO);
    CHECK(hdx_stat_parse("12 (x", &st) == -EIO);
    CHECK(hdx_stat_parse("12 (x)S", &st) == -EIO);

    /* A comm longer than the buffer is cut, the fields still read. */
    char longline[256];
    snprintf(longline, sizeof longline, "7 (%0100d) R 3\n", 0);
    CHECK(hdx_stat_parse(longline, &st) == 0 && strlen(st.comm) == sizeof st.comm - 1 && st.f[4] == 3);

    /* This process, read from /proc: its own pid and parent. */
    CHECK(hdx_stat_read("/proc/self/stat", &st) == 0);
    CHECK(st.f[4] == (unsigned long long)getppid() && st.state == 'R');
    CHECK(hdx_stat_read("/proc/0/stat", &st) == -ENOENT);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (!strcmp(which, "stat"))
        test_stat();
    else {
        fprintf(stderr, "usage: test_units stat\n");
        return 2;
    }
    return failures ? 1 : 0;
}
