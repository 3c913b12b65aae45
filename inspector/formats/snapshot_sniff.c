/*
 * What kind of input a file is (snapshot.h, hdx_snapshot_sniff), from its first 4 KiB:
 * `hangdx analyze` sorts its arguments into snapshots, reports and everything else.
 */
#include "formats/snapshot.h"

#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "hangdx/report.h"

enum hdx_snapshot_kind hdx_snapshot_sniff(const char *path)
{
    char buf[4096];
    /* O_NONBLOCK: a FIFO among the files (a snapshot directory's) is not waited for */
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return HDX_INPUT_NOT_JSON;
    struct stat st;
    ssize_t n = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) ? read(fd, buf, sizeof buf - 1) : -1;
    close(fd);
    if (n <= 0)
        return HDX_INPUT_NOT_JSON;
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
