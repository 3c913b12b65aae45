#include "jsonout.h"

#include <cjson/cJSON.h>
#include <stdio.h>
#include <time.h>

#include "evidence.h"

cJSON *hdx_json_str(const char *s)
{
    return s ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *hdx_json_int(long long v)
{
    return v == HDX_UNKNOWN ? cJSON_CreateNull() : cJSON_CreateNumber((double)v);
}

cJSON *hdx_json_bool(int v)
{
    return v == HDX_UNKNOWN ? cJSON_CreateNull() : cJSON_CreateBool(v != 0);
}

cJSON *hdx_json_char(char c)
{
    char s[2] = {c, 0};
    return c ? cJSON_CreateString(s) : cJSON_CreateNull();
}

cJSON *hdx_json_hex(uint64_t v)
{
    char buf[24];
    snprintf(buf, sizeof buf, "0x%llx", (unsigned long long)v);
    return cJSON_CreateString(buf);
}

cJSON *hdx_json_time(int64_t ns, int nanos)
{
    if (ns == HDX_UNKNOWN)
        return cJSON_CreateNull();
    int64_t s = ns / 1000000000, frac = ns % 1000000000;
    if (frac < 0) {
        frac += 1000000000;
        s--;
    }
    time_t t = (time_t)s;
    struct tm tm;
    char date[40], buf[64];
    if (!gmtime_r(&t, &tm) || !strftime(date, sizeof date, "%Y-%m-%dT%H:%M:%S", &tm))
        return cJSON_CreateNull();
    if (nanos)
        snprintf(buf, sizeof buf, "%s.%09lldZ", date, (long long)frac);
    else
        snprintf(buf, sizeof buf, "%sZ", date);
    return cJSON_CreateString(buf);
}
