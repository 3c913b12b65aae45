/*
 * The check of the C unit tests: CHECK(cond) prints file:line and the condition when it is
 * false, and counts it in `failures`, which the test's main() turns into its exit status.
 * One copy per test program (static), included once by its .c file.
 */
#ifndef HDX_TESTS_CHECK_H
#define HDX_TESTS_CHECK_H

#include <stdio.h>

static int failures;
#define CHECK(cond)                                                                                 \
    do {                                                                                            \
        if (!(cond)) {                                                                              \
            fprintf(stderr, "%s:%d: check failed: %s\n", __FILE__, __LINE__, #cond);                \
            failures++;                                                                             \
        }                                                                                           \
    } while (0)

#endif
