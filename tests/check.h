/*
 * The check of the C unit tests. CHECK(cond) or CHECK(cond, "format", args...): when cond is
 * false it prints file:line, the function, the condition and the optional message to stderr,
 * and counts it in `failures`, which the test's main() turns into its exit status.
 * The message, when given, must start with a string literal (it is pasted after "").
 * One copy per test program (static), included by its .c file (or by a header of its tests).
 */
#ifndef HDX_TESTS_CHECK_H
#define HDX_TESTS_CHECK_H

#include <stdarg.h>
#include <stdio.h>

static int failures;

/* CHECK(cond) passes "" as the message: not a mistake, so no warning for it. */
#pragma GCC diagnostic ignored "-Wformat-zero-length"

__attribute__((format(printf, 5, 6), unused)) static void hdx_check_failed(const char *file, int line,
                                                                          const char *func, const char *cond,
                                                                          const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "%s:%d: %s: check failed: %s", file, line, func, cond);
    if (*fmt) {
        fputs(": ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
    }
    fputc('\n', stderr);
    failures++;
}

#define CHECK(cond, ...)                                                                            \
    do {                                                                                            \
        if (!(cond))                                                                                \
            hdx_check_failed(__FILE__, __LINE__, __func__, #cond, "" __VA_ARGS__);                  \
    } while (0)

#endif
