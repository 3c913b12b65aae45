/*
 * The pickle reader that runs nothing (formats/pickle.h) on bytes built here: the data it
 * reads, and every refusal with its opcode and offset. The opcodes' bytes are CPython's
 * (Lib/pickletools.py); the dumps it reads whole are in tests/fixtures/fr (fr.analyze).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "formats/pickle.h"

static int read_bytes(const char *b, size_t n, cJSON **out, hdx_pickle_error *e)
{
    return hdx_pickle_read((const unsigned char *)b, n, out, e);
}

#define READ(lit, out, e) read_bytes(lit, sizeof lit - 1, out, e)

/* {'version': '2.4', 'entries': [(1, True, None)], 'pg': {'0': 1.5}} at protocol 2, by hand:
 * PROTO 2, EMPTY_DICT, BINPUT 0, MARK, keys and values, SETITEMS, STOP; the tuple through
 * TUPLE3, a memo fetch (BINGET) of the string 'version' as a value. */
static void plain_data(void)
{
    /* (a string literal is split after each \x escape that a hex digit follows) */
    static const char p[] = "\x80\x02}q\x00(X\x07\x00\x00\x00" "versionq\x01X\x03\x00\x00\x00" "2.4q\x02"
                            "X\x07\x00\x00\x00" "entriesq\x03]q\x04K\x01\x88N\x87q\x05" "a"
                            "X\x02\x00\x00\x00" "pgq\x06}q\x07X\x01\x00\x00\x00" "0G?\xf8\x00\x00\x00\x00\x00\x00" "s"
                            "X\x05\x00\x00\x00" "againh\x01" "u.";
    cJSON *out = NULL;
    hdx_pickle_error e;
    int rc = READ(p, &out, &e);
    CHECK(rc == 0, "rc %d: %s at %zu", rc, e.what, e.offset);
    if (rc)
        return;
    CHECK(!strcmp(cJSON_GetObjectItem(out, "version")->valuestring, "2.4"));
    cJSON *entries = cJSON_GetObjectItem(out, "entries");
    CHECK(cJSON_GetArraySize(entries) == 1);
    cJSON *t = cJSON_GetArrayItem(entries, 0);
    CHECK(cJSON_GetArraySize(t) == 3 && cJSON_GetArrayItem(t, 0)->valuedouble == 1 &&
          cJSON_IsTrue(cJSON_GetArrayItem(t, 1)) && cJSON_IsNull(cJSON_GetArrayItem(t, 2)));
    CHECK(cJSON_GetObjectItem(cJSON_GetObjectItem(out, "pg"), "0")->valuedouble == 1.5);
    CHECK(!strcmp(cJSON_GetObjectItem(out, "again")->valuestring, "version"), "the memo fetch");
    cJSON_Delete(out);
}

/* Protocol 4's FRAME, SHORT_BINUNICODE, MEMOIZE, LONG1 (a time in ns beyond 2^32) and a
 * negative BININT. */
static void protocol4(void)
{
    static const char p[] = "\x80\x04\x95\x1b\x00\x00\x00\x00\x00\x00\x00}\x94(\x8c\x01t\x94\x8a\x08\x00\x00\x00\x00"
                            "\x00\x00\x01\x00\x8c\x01n\x94J\xfe\xff\xff\xffu.";
    cJSON *out = NULL;
    hdx_pickle_error e;
    int rc = READ(p, &out, &e);
    CHECK(rc == 0, "rc %d: %s at %zu", rc, e.what, e.offset);
    if (rc)
        return;
    CHECK(cJSON_GetObjectItem(out, "t")->valuedouble == 4294967296.0 * 65536);
    CHECK(cJSON_GetObjectItem(out, "n")->valuedouble == -2);
    cJSON_Delete(out);
}

/* Each opcode that would run code is refused with its name and offset. */
static void refused(void)
{
    static const struct {
        const char *bytes;
        size_t n;
        const char *name;
        size_t offset;
    } cases[] = {
#define CASE(lit, name, offset) {lit, sizeof lit - 1, name, offset}
        CASE("\x80\x02}q\x00X\x01\x00\x00\x00kccollections\nOrderedDict\n)Rs.", "GLOBAL", 11),
        CASE("\x80\x04\x8c\x0b" "collections\x8c\x0b" "OrderedDict\x93).", "STACK_GLOBAL", 28),
        CASE("\x80\x02N)R.", "REDUCE", 4),
        CASE("\x80\x02}N\x86" "b.", "BUILD", 5),
        CASE("\x80\x02N)\x81.", "NEWOBJ", 4),
        CASE("\x80\x02\x82\x01.", "EXT1", 2),
        CASE("\x80\x02NQ.", "BINPERSID", 3),
        CASE("\x80\x02(io\n", "INST", 3),
#undef CASE
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *out = (cJSON *)1;
        hdx_pickle_error e;
        int rc = read_bytes(cases[i].bytes, cases[i].n, &out, &e);
        CHECK(rc == -EPERM && e.unsafe == 1 && out == NULL, "%s: rc %d (%s)", cases[i].name, rc, e.what);
        CHECK(!strcmp(hdx_pickle_opcode_name(e.opcode), cases[i].name) && e.offset == cases[i].offset,
              "%s: opcode %s at %zu", cases[i].name, hdx_pickle_opcode_name(e.opcode), e.offset);
        CHECK(strstr(e.what, cases[i].name) != NULL, "%s: the message names it: %s", cases[i].name, e.what);
    }
}

/* Malformed and oversized inputs: refused as malformed, with no claim taken on trust. */
static void malformed(void)
{
    cJSON *out;
    hdx_pickle_error e;
    /* a string that claims 4 GiB with 3 bytes there */
    CHECK(READ("\x80\x02X\xff\xff\xff\xff" "abc.", &out, &e) == -EBADMSG && e.offset == 2 && !e.unsafe,
          "%s", e.what);
    CHECK(strstr(e.what, "cut short") != NULL, "%s", e.what);
    /* BINUNICODE8 claiming 2^63 */
    CHECK(READ("\x80\x04\x8d\x00\x00\x00\x00\x00\x00\x00\x80.", &out, &e) == -EBADMSG);
    /* no STOP */
    CHECK(READ("\x80\x02}", &out, &e) == -EBADMSG && e.opcode == -1);
    /* not a pickle of protocol 2 or later */
    CHECK(READ("(dp0\n.", &out, &e) == -EBADMSG);
    CHECK(READ("\x80\x06}.", &out, &e) == -EBADMSG && strstr(e.what, "protocol 6"));
    /* a text opcode of protocol 0 */
    CHECK(READ("\x80\x02I01\n.", &out, &e) == -EBADMSG && strstr(e.what, "text opcode"));
    /* a byte that is no opcode */
    CHECK(READ("\x80\x02\xff.", &out, &e) == -EBADMSG && e.offset == 2);
    /* APPEND with no list under it; SETITEMS with an odd count; two items left at STOP */
    CHECK(READ("\x80\x02NNa.", &out, &e) == -EBADMSG);
    CHECK(READ("\x80\x02}(NNNu.", &out, &e) == -EBADMSG);
    /* ... where the slot above the last key held an item POP took away (fuzz_pickle: it was
     * kept a second time) */
    CHECK(READ("\x80\x02}(NNNN0u.", &out, &e) == -EBADMSG);
    CHECK(READ("\x80\x02NN.", &out, &e) == -EBADMSG);
    /* a memo id out of order, a fetch of an id never put */
    CHECK(READ("\x80\x02Nq\x05.", &out, &e) == -EBADMSG && strstr(e.what, "out of order"));
    CHECK(READ("\x80\x02h\x00.", &out, &e) == -EBADMSG);
    /* a dict key that is a list */
    CHECK(READ("\x80\x02}]Ns.", &out, &e) == -EBADMSG);
}

/* Lists nested 65 deep are refused; 64 are read. */
static void depth(void)
{
    for (int levels = 64; levels <= 65; levels++) {
        char b[512];
        size_t n = 0;
        b[n++] = (char)0x80;
        b[n++] = 2;
        for (int i = 0; i < levels; i++)
            b[n++] = ']';
        b[n++] = 'N';
        for (int i = 0; i < levels; i++)
            b[n++] = 'a';
        b[n++] = '.';
        cJSON *out = NULL;
        hdx_pickle_error e;
        int rc = read_bytes(b, n, &out, &e);
        if (levels == 64)
            CHECK(rc == 0, "64 levels: %s", e.what);
        else
            CHECK(rc == -EBADMSG && strstr(e.what, "deeper"), "65 levels: rc %d", rc);
        cJSON_Delete(out);
    }
}

/* Memo fetches that double a list each time would make 2^40 items from a few hundred bytes:
 * the budget stops them. */
static void blowup(void)
{
    char b[1024];
    size_t n = 0;
    b[n++] = (char)0x80;
    b[n++] = 2;
    b[n++] = ']'; /* [] as memo 0 */
    b[n++] = 'q';
    b[n++] = 0;
    for (int i = 1; i <= 40; i++) { /* x_i = [x_{i-1}, x_{i-1}] as memo i */
        b[n++] = ']';
        b[n++] = 'h';
        b[n++] = (char)(i - 1);
        b[n++] = 'h';
        b[n++] = (char)(i - 1);
        b[n++] = (char)0x86; /* TUPLE2 */
        b[n++] = 'a';
        b[n++] = 'q';
        b[n++] = (char)i;
    }
    b[n++] = '.';
    cJSON *out = NULL;
    hdx_pickle_error e;
    int rc = read_bytes(b, n, &out, &e);
    CHECK(rc == -EBADMSG && strstr(e.what, "more than"), "rc %d: %s", rc, e.what);
    cJSON_Delete(out);
}

int main(void)
{
    plain_data();
    protocol4();
    refused();
    malformed();
    depth();
    blowup();
    if (!failures)
        printf("pickle: all checks passed\n");
    return failures ? 1 : 0;
}
