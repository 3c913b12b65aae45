/* Typed members of a parsed cJSON object (json_read.h). */
#include "model/json_read.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "model/util.h"

/* code, with the sentence in why when the caller asked for one. */
static int refuse(hdx_json_error *why, int code, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int refuse(hdx_json_error *why, int code, const char *fmt, ...)
{
    if (why) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(why->text, sizeof why->text, fmt, ap);
        va_end(ap);
    }
    return code;
}

const cJSON *hdx_json_member(const cJSON *o, const char *key)
{
    const cJSON *c = o && key ? cJSON_GetObjectItemCaseSensitive(o, key) : NULL;
    return c && !cJSON_IsNull(c) ? c : NULL;
}

int hdx_json_get_i64(const cJSON *o, const char *key, int64_t min, int64_t max, int64_t *out, hdx_json_error *why)
{
    return hdx_json_i64_value(hdx_json_member(o, key), key, min, max, out, why);
}

int hdx_json_i64_value(const cJSON *c, const char *key, int64_t min, int64_t max, int64_t *out, hdx_json_error *why)
{
    if (!c)
        return 0;
    double d = c->valuedouble;
    /* 2^63 is the first double past INT64_MAX: (double)INT64_MAX rounds up to it. */
    if (!cJSON_IsNumber(c) || !isfinite(d) || d != floor(d) || d < (double)min || d > (double)max ||
        d >= 9223372036854775808.0 || (int64_t)d < min || (int64_t)d > max)
        return refuse(why, -EINVAL, "\"%s\" should be an integer from %lld to %lld", key, (long long)min,
                      (long long)max);
    *out = (int64_t)d;
    return 1;
}

int hdx_json_get_int(const cJSON *o, const char *key, int min, int max, int *out, hdx_json_error *why)
{
    int64_t v = 0;
    int r = hdx_json_get_i64(o, key, min, max, &v, why);
    if (r == 1)
        *out = (int)v;
    return r;
}

int hdx_json_get_num(const cJSON *o, const char *key, double *out, hdx_json_error *why)
{
    return hdx_json_num_value(hdx_json_member(o, key), key, out, why);
}

int hdx_json_num_value(const cJSON *c, const char *key, double *out, hdx_json_error *why)
{
    if (!c)
        return 0;
    if (!cJSON_IsNumber(c) || !isfinite(c->valuedouble))
        return refuse(why, -EINVAL, "\"%s\" should be a number", key);
    *out = c->valuedouble;
    return 1;
}

int hdx_json_get_bool(const cJSON *o, const char *key, int *out, hdx_json_error *why)
{
    return hdx_json_bool_value(hdx_json_member(o, key), key, out, why);
}

int hdx_json_bool_value(const cJSON *c, const char *key, int *out, hdx_json_error *why)
{
    if (!c)
        return 0;
    if (!cJSON_IsBool(c))
        return refuse(why, -EINVAL, "\"%s\" should be true, false or null", key);
    *out = cJSON_IsTrue(c) ? 1 : 0;
    return 1;
}

int hdx_json_get_str(const cJSON *o, const char *key, const char **out, hdx_json_error *why)
{
    return hdx_json_str_value(hdx_json_member(o, key), key, out, why);
}

int hdx_json_str_value(const cJSON *c, const char *key, const char **out, hdx_json_error *why)
{
    if (!c)
        return 0;
    if (!cJSON_IsString(c) || !c->valuestring)
        return refuse(why, -EINVAL, "\"%s\" should be a string", key);
    *out = c->valuestring;
    return 1;
}

int hdx_json_get_strdup(const cJSON *o, const char *key, char **out, hdx_json_error *why)
{
    const char *s = NULL;
    int r = hdx_json_get_str(o, key, &s, why);
    if (r != 1)
        return r;
    char *copy = strdup(s);
    if (!copy)
        return refuse(why, -ENOMEM, "out of memory");
    *out = copy;
    return 1;
}

int hdx_json_get_strv(const cJSON *o, const char *key, char ***v, size_t *n, hdx_json_error *why)
{
    const cJSON *arr = hdx_json_member(o, key), *it;
    if (!arr)
        return 0;
    if (!cJSON_IsArray(arr))
        return refuse(why, -EINVAL, "\"%s\" should be an array of strings", key);
    cJSON_ArrayForEach(it, arr)
    {
        if (!cJSON_IsString(it) || !it->valuestring)
            return refuse(why, -EINVAL, "\"%s\" should be an array of strings", key);
    }
    size_t before = *n;
    cJSON_ArrayForEach(it, arr)
    {
        char *copy = strdup(it->valuestring);
        char **slot = copy ? hdx_append((void **)v, n, sizeof *slot) : NULL;
        if (!slot) {
            free(copy);
            while (*n > before)
                free((*v)[--*n]);
            return refuse(why, -ENOMEM, "out of memory");
        }
        *slot = copy;
    }
    return 1;
}

int hdx_json_get_object(const cJSON *o, const char *key, const cJSON **out, hdx_json_error *why)
{
    return hdx_json_object_value(hdx_json_member(o, key), key, out, why);
}

int hdx_json_object_value(const cJSON *c, const char *key, const cJSON **out, hdx_json_error *why)
{
    if (!c)
        return 0;
    if (!cJSON_IsObject(c))
        return refuse(why, -EINVAL, "\"%s\" should be an object", key);
    *out = c;
    return 1;
}

int hdx_json_get_array(const cJSON *o, const char *key, const cJSON **out, hdx_json_error *why)
{
    return hdx_json_array_value(hdx_json_member(o, key), key, out, why);
}

int hdx_json_array_value(const cJSON *c, const char *key, const cJSON **out, hdx_json_error *why)
{
    if (!c)
        return 0;
    if (!cJSON_IsArray(c))
        return refuse(why, -EINVAL, "\"%s\" should be an array", key);
    *out = c;
    return 1;
}
