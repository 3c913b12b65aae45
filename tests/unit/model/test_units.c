/*
 * Unit tests of small shared pieces, one per argument:
 *   stat   hdx_stat_parse (model/procstat.h) on stat lines whose comm holds spaces and parentheses.
 *   index  the hash index (model/index.h): insert, find, collisions, growth, missing keys.
 *   prefix hdx_launcher_prefix (model/util.h): torch's, torchrun's and Slurm's prefixes, and
 *          lines that only look like one; hdx_runtime_stamp: a container runtime's time stamps
 *          (docker logs -t, kubectl logs --timestamps) and time stamps that are not one.
 *   parallel hdx_parallel_for (model/util.h): every index once, on one thread or several, and
 *          the first error returned with the rest of the blocks left undone.
 *   json_array  hdx_json_array and hdx_json_ranges (model/jsonout.h): the same text as
 *          hdx_json_print of the same values as cJSON items, formatted and not (compact), for
 *          integers, unknowns, strings in runs and changing, strings to escape or of invalid
 *          UTF-8, an empty array, and ranges.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/jsonout.h"
#include "model/procstat.h"
#include "model/index.h"
#include "model/util.h"
#include "check.h"

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

/* Every slot that hash has in x, sorted, into out (at most max); how many. */
static size_t all_slots(const hdx_index *x, uint64_t hash, size_t *out, size_t max)
{
    size_t n = 0, cur = 0, s;
    while ((s = hdx_index_find(x, hash, &cur)) != HDX_INDEX_NONE && n < max) {
        size_t i = n++;
        for (; i > 0 && out[i - 1] > s; i--)
            out[i] = out[i - 1];
        out[i] = s;
    }
    return n;
}

static void test_index(void)
{
    hdx_index x = {0};
    size_t cur = 0, got[8];

    /* Empty: nothing found, no memory. */
    CHECK(hdx_index_find(&x, 42, &cur) == HDX_INDEX_NONE);
    CHECK(x.cap == 0 && x.count == 0);

    /* Insert and find; a missing key. */
    CHECK(hdx_index_insert(&x, 42, 7) == 0);
    CHECK(hdx_index_insert(&x, 0, 0) == 0); /* hash 0 and slot 0 are ordinary values */
    cur = 0;
    CHECK(hdx_index_find(&x, 42, &cur) == 7);
    CHECK(hdx_index_find(&x, 42, &cur) == HDX_INDEX_NONE);
    CHECK(hdx_index_find(&x, 42, &cur) == HDX_INDEX_NONE); /* stays ended */
    cur = 0;
    CHECK(hdx_index_find(&x, 0, &cur) == 0);
    cur = 0;
    CHECK(hdx_index_find(&x, 43, &cur) == HDX_INDEX_NONE);
    CHECK(hdx_index_insert(&x, 1, HDX_INDEX_NONE) == -EINVAL && x.count == 2);

    /* Collisions: one hash, three slots, each found once. */
    CHECK(hdx_index_insert(&x, 99, 1) == 0 && hdx_index_insert(&x, 99, 2) == 0 && hdx_index_insert(&x, 99, 3) == 0);
    CHECK(all_slots(&x, 99, got, 8) == 3 && got[0] == 1 && got[1] == 2 && got[2] == 3);
    CHECK(all_slots(&x, 42, got, 8) == 1 && got[0] == 7);

    /* Clear: nothing left, the memory kept. */
    size_t cap = x.cap;
    hdx_index_clear(&x);
    CHECK(x.count == 0 && x.cap == cap && all_slots(&x, 99, got, 8) == 0);

    /* Growth past 1e5 entries: hashes that differ only in high bits (the index mixes them),
     * every one found at its slot after many rehashes; the ones never inserted are not. */
    const size_t n = 150000;
    int ok = 1;
    for (size_t i = 0; i < n && ok; i++)
        ok = hdx_index_insert(&x, (uint64_t)i << 40, i) == 0;
    CHECK(ok && x.count == n && x.cap >= 2 * n, "count %zu cap %zu", x.count, x.cap);
    size_t wrong = 0;
    for (size_t i = 0; i < n; i++) {
        cur = 0;
        if (hdx_index_find(&x, (uint64_t)i << 40, &cur) != i || hdx_index_find(&x, (uint64_t)i << 40, &cur) != HDX_INDEX_NONE)
            wrong++;
        cur = 0;
        if (hdx_index_find(&x, ((uint64_t)i << 40) | 1, &cur) != HDX_INDEX_NONE)
            wrong++;
    }
    CHECK(wrong == 0, "%zu of %zu lookups wrong", wrong, 2 * n);

    /* Reserve: inserts up to n allocate nothing more. */
    hdx_index y = {0};
    CHECK(hdx_index_reserve(&y, 1000) == 0);
    uint64_t *before = y.hashes;
    for (size_t i = 0; i < 1000; i++)
        hdx_index_insert(&y, i * 7919, i);
    CHECK(y.hashes == before && y.count == 1000);
    CHECK(all_slots(&y, 7919 * 500, got, 8) == 1 && got[0] == 500);

    hdx_index_free(&x);
    hdx_index_free(&y);
    CHECK(x.cap == 0 && x.hashes == NULL && hdx_index_find(&x, 0, &cur) == HDX_INDEX_NONE);
    hdx_index_free(NULL);
    hdx_index_clear(NULL);
}

static void test_prefix(void)
{
    static const struct {
        const char *line;
        size_t len, word, at, digits;
    } cases[] = {
        {"[rank3]: x", 8, 4, 5, 1},  {"[default12]:x", 12, 7, 8, 2}, {"3: x", 2, 0, 0, 1},
        {"  12: x", 5, 0, 2, 2},      {"3:x", 0, 0, 0, 0},            {"12:30:01 step", 0, 0, 0, 0},
        {"[3]: x", 0, 0, 0, 0},       {"[rank]: x", 0, 0, 0, 0},      {"[rank3] x", 0, 0, 0, 0},
        {": x", 0, 0, 0, 0},          {"", 0, 0, 0, 0},               {"   ", 0, 0, 0, 0},
        {"0: [rank3]:x", 11, 4, 8, 1}, {" 1: [default12]: x", 16, 7, 12, 2}, {"0: 3: x", 2, 0, 0, 1},
        {"0: [3]: x", 2, 0, 0, 1},       {"worker-0: [rank3]:x", 18, 4, 15, 1},
        {"node7.c: [default1]: x", 20, 7, 17, 1}, {"worker-0: x", 0, 0, 0, 0}, {"INFO: x", 0, 0, 0, 0},
        {"worker-0: [3]: x", 0, 0, 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        size_t word = 99, at = 99, digits = 99;
        size_t len = hdx_launcher_prefix(cases[i].line, &word, &at, &digits);
        CHECK(len == cases[i].len, "\"%s\": length %zu, expected %zu", cases[i].line, len, cases[i].len);
        if (len)
            CHECK(word == cases[i].word && at == cases[i].at && digits == cases[i].digits,
                  "\"%s\": word %zu at %zu digits %zu", cases[i].line, word, at, digits);
    }
    static const struct {
        const char *line;
        size_t len;
    } stamps[] = {
        {"2023-09-14T05:12:47.917781119Z > compiling", 31}, {"2023-09-14T05:12:48.3861007Z x", 29},
        {"2024-01-02T03:04:05Z [rank0]:x", 21},             {"2024-01-02T03:04:05+02:00 x", 26},
        {"2024-01-02T03:04:05.5-07:00 x", 28},              {"2024-01-02T03:04:05Zx", 0},
        {"2024-01-02 03:04:05,730 INFO x", 0},              {"2024-01-02T03:04:05 x", 0},
        {"2024-01-02T03:04:05.Z x", 0},                     {"2024-01-02T03:04", 0},
        {"", 0},
    };
    for (size_t i = 0; i < sizeof stamps / sizeof stamps[0]; i++) {
        size_t len = hdx_runtime_stamp(stamps[i].line);
        CHECK(len == stamps[i].len, "stamp \"%s\": length %zu, expected %zu", stamps[i].line, len, stamps[i].len);
    }
}

struct counts {
    atomic_int *calls;  /* per index: how many times fn ran for it */
    atomic_int others;  /* calls made in another thread than the caller's */
    pthread_t caller;
    size_t fail_at;     /* the index whose call fails (-EIO), or (size_t)-1 */
};

static int count_call(void *arg, size_t i)
{
    struct counts *c = arg;
    atomic_fetch_add(&c->calls[i], 1);
    if (!pthread_equal(pthread_self(), c->caller))
        atomic_fetch_add(&c->others, 1);
    return i == c->fail_at ? -EIO : 0;
}

/* hdx_parallel_for over n indexes in blocks of block on threads; how many indexes ran once
 * (*twice: how many more than once), and what it returned. */
static int run_parallel(size_t n, size_t block, int threads, size_t fail_at, size_t *once, size_t *twice, int *others)
{
    static atomic_int calls[10000];
    struct counts c = {.calls = calls, .caller = pthread_self(), .fail_at = fail_at};
    for (size_t i = 0; i < n; i++)
        atomic_init(&calls[i], 0);
    atomic_init(&c.others, 0);
    int rc = hdx_parallel_for(n, block, threads, count_call, &c);
    *once = *twice = 0;
    for (size_t i = 0; i < n; i++) {
        *once += atomic_load(&calls[i]) == 1;
        *twice += atomic_load(&calls[i]) > 1;
    }
    *others = atomic_load(&c.others);
    return rc;
}

static void test_parallel(void)
{
    size_t once, twice;
    int others;
    CHECK(run_parallel(10000, 7, 3, (size_t)-1, &once, &twice, &others) == 0 && once == 10000 && twice == 0,
          "3 threads: %zu indexes once, %zu more often", once, twice);
    CHECK(run_parallel(10000, 7, 1, (size_t)-1, &once, &twice, &others) == 0 && once == 10000 && others == 0,
          "1 thread: %zu indexes once, %d calls in another thread", once, others);
    CHECK(run_parallel(5, 256, 4, (size_t)-1, &once, &twice, &others) == 0 && once == 5 && others == 0,
          "fewer indexes than a block: %zu once, %d calls in another thread", once, others);
    CHECK(run_parallel(0, 256, 4, (size_t)-1, &once, &twice, &others) == 0 && once == 0, "no index");
    /* An error in the first block: it is returned, and the blocks after it are not started. */
    int rc = run_parallel(10000, 10, 1, 3, &once, &twice, &others);
    CHECK(rc == -EIO && once == 4 && twice == 0, "an error at index 3 on one thread: rc %d, %zu ran", rc, once);
    rc = run_parallel(10000, 10, 3, 3, &once, &twice, &others);
    CHECK(rc == -EIO && once < 10000 && twice == 0, "an error at index 3 on 3 threads: rc %d, %zu ran", rc, once);
}

/* The text of raw (an hdx_json_array's end) in an object, against that of the same object
 * holding want (cJSON items) instead, both printed by hdx_json_print (formatted or not); both
 * freed. */
static void same_print(const char *what, cJSON *raw, cJSON *want, int formatted)
{
    cJSON *a = cJSON_CreateObject(), *b = cJSON_CreateObject();
    CHECK(raw && want && a && b, "%s: out of memory", what);
    if (!raw || !want || !a || !b)
        return;
    cJSON_AddItemToObject(a, "v", raw);
    cJSON_AddItemToObject(b, "v", want);
    char *sa = hdx_json_print(a, formatted), *sb = hdx_json_print(b, formatted);
    CHECK(sa && sb && !strcmp(sa, sb), "%s: %s, cJSON's %s", what, sa ? sa : "(null)", sb ? sb : "(null)");
    cJSON_free(sa);
    cJSON_free(sb);
    cJSON_Delete(a);
    cJSON_Delete(b);
}

/* The same values as an hdx_json_array (compact or not) and as cJSON items: the same print. */
static void same_values(const char *what, const long long *ints, size_t n_ints, const char *const *strs, size_t n_strs,
                        int formatted)
{
    hdx_json_array a = {.compact = !formatted};
    cJSON *want = cJSON_CreateArray();
    for (size_t i = 0; i < n_ints; i++) {
        hdx_json_array_int(&a, ints[i]);
        cJSON_AddItemToArray(want, hdx_json_int(ints[i]));
    }
    for (size_t i = 0; i < n_strs; i++) {
        hdx_json_array_str(&a, strs[i]);
        cJSON_AddItemToArray(want, hdx_json_str(strs[i]));
    }
    same_print(what, hdx_json_array_end(&a), want, formatted);
    CHECK(a.text == NULL && a.last == NULL && a.len == 0 && a.compact == !formatted,
          "%s: the array's memory is not released", what);
}

static void test_json_array(void)
{
    static const long long ints[] = {0, 7, -3, HDX_UNKNOWN, 2147483647, -2147483648LL, 9007199254740992LL, 42};
    /* A run of equal strings in different buffers, a change back and forth, NULL between, a
     * string to escape and one whose bytes are no UTF-8 (\u00XX, as hdx_json_print writes). */
    char s1[] = "S", s2[] = "S", s3[] = "R";
    const char *strs[] = {s1, s2, s3, NULL, s1, "", "tab\there \"quoted\" back\\slash\n", "caf\xe9", "caf\xe9", NULL};
    size_t ni = sizeof ints / sizeof ints[0], ns = sizeof strs / sizeof strs[0];
    for (int formatted = 0; formatted < 2; formatted++) {
        same_values(formatted ? "integers" : "integers, compact", ints, ni, NULL, 0, formatted);
        same_values(formatted ? "strings" : "strings, compact", NULL, 0, strs, ns, formatted);
        same_values(formatted ? "both" : "both, compact", ints, ni, strs, ns, formatted);
        same_values(formatted ? "an empty array" : "an empty array, compact", NULL, 0, NULL, 0, formatted);
        int vals[] = {9, 3, 4, 3, 5, 11, 0, -2, -1};
        static const int pairs[][2] = {{-2, 0}, {3, 5}, {9, 9}, {11, 11}};
        cJSON *want = cJSON_CreateArray();
        for (size_t i = 0; i < sizeof pairs / sizeof pairs[0]; i++)
            cJSON_AddItemToArray(want, cJSON_CreateIntArray(pairs[i], 2));
        same_print(formatted ? "ranges" : "ranges, compact", hdx_json_ranges(vals, sizeof vals / sizeof vals[0], formatted),
                   want, formatted);
        same_print("no ranges", hdx_json_ranges(NULL, 0, formatted), cJSON_CreateArray(), formatted);
    }
    /* A string changed in place after it was added is written as it was. */
    hdx_json_array a = {0};
    hdx_json_array_str(&a, s1);
    s1[0] = 'D';
    hdx_json_array_str(&a, s1);
    cJSON *want = cJSON_CreateArray();
    cJSON_AddItemToArray(want, cJSON_CreateString("S"));
    cJSON_AddItemToArray(want, cJSON_CreateString("D"));
    same_print("a string changed in place", hdx_json_array_end(&a), want, 1);
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "";
    if (!strcmp(which, "stat"))
        test_stat();
    else if (!strcmp(which, "index"))
        test_index();
    else if (!strcmp(which, "prefix"))
        test_prefix();
    else if (!strcmp(which, "json_array"))
        test_json_array();
    else if (!strcmp(which, "parallel"))
        test_parallel();
    else {
        fprintf(stderr, "usage: test_units stat|index|prefix|json_array|parallel\n");
        return 2;
    }
    return failures ? 1 : 0;
}
