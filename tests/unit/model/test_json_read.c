/* Unit tests of the typed JSON reader (json_read.h): present, absent, null, wrong type, out of
 * range, nested objects and arrays, and the sentence each refusal leaves. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/json_read.h"
#include "model/util.h"

#include "check.h"

static cJSON *doc(const char *text)
{
    cJSON *o = cJSON_Parse(text);
    if (!o) {
        fprintf(stderr, "test document does not parse: %s\n", text);
        exit(2);
    }
    return o;
}

static void test_int(void)
{
    cJSON *o = doc("{\"pid\": 4123, \"rank\": 3, \"half\": 1.5, \"name\": \"42\", \"gone\": null,"
                   " \"big\": 9007199254740992, \"huge\": 1e19, \"neg\": -1e19, \"top\": 9223372036854775807}");
    hdx_json_error why;
    int v = -7;
    int64_t w = -7;

    /* present, in range */
    strcpy(why.text, "untouched");
    CHECK(hdx_json_get_int(o, "pid", 1, 1 << 22, &v, &why) == 1);
    CHECK(v == 4123);
    CHECK(!strcmp(why.text, "untouched"));
    CHECK(hdx_json_get_int(o, "rank", 3, 3, &v, NULL) == 1 && v == 3); /* both bounds inclusive */

    /* out of range: refused, *out untouched, the snapshot reader's sentence */
    v = -7;
    CHECK(hdx_json_get_int(o, "rank", 0, 2, &v, &why) == -EINVAL);
    CHECK(v == -7);
    CHECK(!strcmp(why.text, "\"rank\" should be an integer from 0 to 2"));
    CHECK(hdx_json_get_int(o, "rank", 4, 10, &v, NULL) == -EINVAL && v == -7);

    /* a fraction, a string: another type */
    CHECK(hdx_json_get_int(o, "half", 0, 10, &v, &why) == -EINVAL && v == -7);
    CHECK(!strcmp(why.text, "\"half\" should be an integer from 0 to 10"));
    CHECK(hdx_json_get_int(o, "name", 0, 100, &v, &why) == -EINVAL && v == -7);
    CHECK(!strcmp(why.text, "\"name\" should be an integer from 0 to 100"));

    /* absent, null, no object: 0, *out and why untouched */
    strcpy(why.text, "untouched");
    CHECK(hdx_json_get_int(o, "tid", 0, 10, &v, &why) == 0 && v == -7);
    CHECK(hdx_json_get_int(o, "gone", 0, 10, &v, &why) == 0 && v == -7);
    CHECK(hdx_json_get_int(NULL, "pid", 0, 10, &v, &why) == 0 && v == -7);
    CHECK(hdx_json_get_int(o, "Pid", 0, 1 << 22, &v, &why) == 0); /* keys are case-sensitive */
    CHECK(!strcmp(why.text, "untouched"));

    /* 64 bits: exact to 2^53; beyond int64 refused, never a wrapped value */
    CHECK(hdx_json_get_i64(o, "big", 0, INT64_MAX, &w, NULL) == 1 && w == 9007199254740992LL);
    w = -7;
    CHECK(hdx_json_get_i64(o, "huge", 0, INT64_MAX, &w, &why) == -EINVAL && w == -7);
    CHECK(!strcmp(why.text, "\"huge\" should be an integer from 0 to 9223372036854775807"));
    CHECK(hdx_json_get_i64(o, "neg", INT64_MIN, INT64_MAX, &w, NULL) == -EINVAL && w == -7);
    CHECK(hdx_json_get_i64(o, "top", 0, INT64_MAX, &w, NULL) == -EINVAL && w == -7); /* 2^63 as a double */
    CHECK(hdx_json_get_int(o, "big", INT32_MIN, INT32_MAX, &v, NULL) == -EINVAL && v == -7);
    cJSON_Delete(o);
}

static void test_num_bool(void)
{
    cJSON *o = doc("{\"cpu_ms\": 12.5, \"inf\": 1e999, \"alive\": true, \"dead\": false, \"one\": 1, \"s\": \"x\"}");
    hdx_json_error why;
    double d = -1;
    int b = -1;
    CHECK(hdx_json_get_num(o, "cpu_ms", &d, &why) == 1 && d == 12.5);
    CHECK(hdx_json_get_num(o, "one", &d, NULL) == 1 && d == 1.0);
    d = -1;
    CHECK(hdx_json_get_num(o, "inf", &d, &why) == -EINVAL && d == -1); /* not finite */
    CHECK(!strcmp(why.text, "\"inf\" should be a number"));
    CHECK(hdx_json_get_num(o, "s", &d, &why) == -EINVAL && d == -1);
    CHECK(hdx_json_get_num(o, "nothing", &d, &why) == 0 && d == -1);

    CHECK(hdx_json_get_bool(o, "alive", &b, &why) == 1 && b == 1);
    CHECK(hdx_json_get_bool(o, "dead", &b, &why) == 1 && b == 0);
    b = -1;
    CHECK(hdx_json_get_bool(o, "one", &b, &why) == -EINVAL && b == -1); /* 1 is not true */
    CHECK(!strcmp(why.text, "\"one\" should be true, false or null"));
    CHECK(hdx_json_get_bool(o, "nothing", &b, &why) == 0 && b == -1);
    cJSON_Delete(o);
}

static void test_strings(void)
{
    cJSON *o = doc("{\"host\": \"node-7\", \"empty\": \"\", \"pid\": 5, \"gone\": null,"
                   " \"argv\": [\"python3\", \"train.py\"], \"mixed\": [\"a\", 1], \"notv\": \"a\"}");
    hdx_json_error why;
    const char *s = "unset";
    /* borrowed: the tree's own text */
    CHECK(hdx_json_get_str(o, "host", &s, &why) == 1);
    CHECK(s == cJSON_GetObjectItemCaseSensitive(o, "host")->valuestring && !strcmp(s, "node-7"));
    CHECK(hdx_json_get_str(o, "empty", &s, NULL) == 1 && !strcmp(s, ""));
    s = "unset";
    CHECK(hdx_json_get_str(o, "pid", &s, &why) == -EINVAL && !strcmp(s, "unset"));
    CHECK(!strcmp(why.text, "\"pid\" should be a string"));
    CHECK(hdx_json_get_str(o, "gone", &s, &why) == 0 && !strcmp(s, "unset"));

    /* copied: the caller's heap string */
    char *c = NULL;
    CHECK(hdx_json_get_strdup(o, "host", &c, &why) == 1);
    CHECK(c && !strcmp(c, "node-7") && c != cJSON_GetObjectItemCaseSensitive(o, "host")->valuestring);
    free(c);
    c = NULL;
    CHECK(hdx_json_get_strdup(o, "pid", &c, &why) == -EINVAL && c == NULL);
    CHECK(hdx_json_get_strdup(o, "absent", &c, &why) == 0 && c == NULL);

    /* a string array, appended to what the caller has */
    char **v = NULL;
    size_t n = 0;
    char **first = hdx_append((void **)&v, &n, sizeof *v); /* the array is hdx_append's */
    if (!first || !(*first = strdup("env")))
        exit(2);
    CHECK(hdx_json_get_strv(o, "argv", &v, &n, &why) == 1);
    CHECK(n == 3 && !strcmp(v[0], "env") && !strcmp(v[1], "python3") && !strcmp(v[2], "train.py"));
    CHECK(hdx_json_get_strv(o, "mixed", &v, &n, &why) == -EINVAL && n == 3); /* nothing appended */
    CHECK(!strcmp(why.text, "\"mixed\" should be an array of strings"));
    CHECK(hdx_json_get_strv(o, "notv", &v, &n, &why) == -EINVAL && n == 3);
    CHECK(hdx_json_get_strv(o, "gone", &v, &n, &why) == 0 && n == 3);
    for (size_t i = 0; i < n; i++)
        free(v[i]);
    free(v);
    cJSON_Delete(o);
}

static void test_nested(void)
{
    cJSON *o = doc("{\"created_by\": {\"pid\": 77, \"host\": \"n1\", \"alive\": null},"
                   " \"waiters\": [{\"tid\": 9}], \"gone\": null}");
    hdx_json_error why;
    const cJSON *c = NULL, *a = NULL;
    int v = -1;
    const char *s = NULL;
    CHECK(hdx_json_get_object(o, "created_by", &c, &why) == 1);
    CHECK(c == cJSON_GetObjectItemCaseSensitive(o, "created_by"));
    CHECK(hdx_json_get_int(c, "pid", 0, INT32_MAX, &v, &why) == 1 && v == 77);
    CHECK(hdx_json_get_str(c, "host", &s, &why) == 1 && !strcmp(s, "n1"));
    CHECK(hdx_json_member(c, "alive") == NULL); /* null: absent */
    CHECK(hdx_json_member(c, "pid") == cJSON_GetObjectItemCaseSensitive(c, "pid"));
    /* a member of the outer object is not one of the inner */
    CHECK(hdx_json_get_object(c, "created_by", &a, &why) == 0 && a == NULL);

    CHECK(hdx_json_get_array(o, "waiters", &a, &why) == 1 && cJSON_GetArraySize(a) == 1);
    CHECK(hdx_json_get_int(cJSON_GetArrayItem(a, 0), "tid", 0, 100, &v, &why) == 1 && v == 9);
    /* an array has no members */
    CHECK(hdx_json_get_int(a, "tid", 0, 100, &v, &why) == 0);

    a = NULL;
    CHECK(hdx_json_get_array(o, "created_by", &a, &why) == -EINVAL && a == NULL);
    CHECK(!strcmp(why.text, "\"created_by\" should be an array"));
    CHECK(hdx_json_get_object(o, "waiters", &a, &why) == -EINVAL && a == NULL);
    CHECK(!strcmp(why.text, "\"waiters\" should be an object"));
    CHECK(hdx_json_get_object(o, "gone", &a, &why) == 0 && a == NULL);
    cJSON_Delete(o);
}

/* A key longer than the sentence's room is cut, never written past it. */
static void test_long_key(void)
{
    char key[400], text[480];
    memset(key, 'k', sizeof key - 1);
    key[sizeof key - 1] = 0;
    snprintf(text, sizeof text, "{\"%s\": \"x\"}", key);
    cJSON *o = doc(text);
    hdx_json_error why;
    int v = 0;
    CHECK(hdx_json_get_int(o, key, 0, 1, &v, &why) == -EINVAL);
    CHECK(strlen(why.text) == sizeof why.text - 1 && !strncmp(why.text, "\"kkk", 4));
    cJSON_Delete(o);
}

int main(void)
{
    test_int();
    test_num_bool();
    test_strings();
    test_nested();
    test_long_key();
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("json_read: all checks passed\n");
    return 0;
}
