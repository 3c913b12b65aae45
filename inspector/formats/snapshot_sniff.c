/*
 * What kind of input a file is (snapshot.h, hdx_snapshot_sniff), from its first 4 KiB:
 * `hangdx analyze` sorts its arguments into snapshots, reports and everything else.
 */
#include "formats/snapshot.h"

#include <string.h>

#include "hangdx/report.h"
#include "model/util.h"

#define SNIFF_BYTES 4095

enum hdx_snapshot_kind hdx_snapshot_sniff(const char *path)
{
    char head[SNIFF_BYTES];
    ssize_t n = hdx_read_head(path, head, sizeof head); /* a FIFO among a directory's files is not waited for */
    return n > 0 ? hdx_snapshot_sniff_head(head, (size_t)n) : HDX_INPUT_NOT_JSON;
}

enum hdx_snapshot_kind hdx_snapshot_sniff_head(const char *head, size_t n)
{
    char buf[SNIFF_BYTES + 1];
    if (n > SNIFF_BYTES)
        n = SNIFF_BYTES;
    memcpy(buf, head, n);
    buf[n] = 0;
    const char *p = buf;
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r')
        p++;
    if (*p != '{')
        return HDX_INPUT_NOT_JSON;
    /* Both writers put "schema" first; a hand-written file may not, so look for it
     * anywhere in the first block. */
    const char *s = strstr(p, "\"schema\"");
    if (!s)
        return HDX_INPUT_OTHER_SCHEMA; /* an object: the loader says what it lacks */
    s += 8;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    if (*s++ != ':')
        return HDX_INPUT_NOT_JSON;
    while (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r')
        s++;
    if (*s != '"')
        return HDX_INPUT_NOT_JSON;
    s++;
    size_t ls = strlen(HDX_SNAPSHOT_SCHEMA), lr = strlen(HDX_REPORT_SCHEMA); /* the names of a kind are as long */
    if ((!strncmp(s, HDX_SNAPSHOT_SCHEMA, ls) && s[ls] == '"') || (!strncmp(s, HDX_SNAPSHOT_SCHEMA_V1, ls) && s[ls] == '"') ||
        (!strncmp(s, HDX_SNAPSHOT_SCHEMA_REDUCED, ls) && s[ls] == '"'))
        return HDX_INPUT_SNAPSHOT;
    if ((!strncmp(s, HDX_REPORT_SCHEMA, lr) && s[lr] == '"') ||
        (!strncmp(s, HDX_REPORT_SCHEMA_V1, lr) && s[lr] == '"'))
        return HDX_INPUT_REPORT;
    return HDX_INPUT_OTHER_SCHEMA;
}
