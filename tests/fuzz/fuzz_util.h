/*
 * What the libFuzzer targets share: after a parser has filled an evidence,
 * classify it and render the report, since the classifier and the report
 * must survive whatever a parser lets through; and a memfd holding the input
 * for the loaders that only take a path; a C string of the input for those
 * that take one.
 */
#ifndef HDX_FUZZ_UTIL_H
#define HDX_FUZZ_UTIL_H

#include <cjson/cJSON.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "classify/classify.h"
#include "model/evidence.h"
#include "report/report.h"

/* Classify ev and render its report; everything made here is freed here. */
static inline void hdx_fuzz_classify(hdx_evidence *ev)
{
    hdx_verdict v = { 0 };
    if (hdx_evidence_label(ev) == 0 && hdx_classify(ev, &v) == 0)
        cJSON_Delete(hdx_report_json(ev, &v));
    hdx_verdict_clear(&v);
}

/* data[0..size) as a NUL-terminated heap string, for parsers of /proc text that take a C
 * string; NULL on ENOMEM. The caller frees it. */
static inline char *hdx_fuzz_cstring(const uint8_t *data, size_t size)
{
    char *text = malloc(size + 1);
    if (text) {
        memcpy(text, data, size);
        text[size] = 0;
    }
    return text;
}

/*
 * A memfd holding data[0..size); its path (/proc/self/fd/N) goes into path.
 * Returns the fd (the caller closes it) or -1.
 */
static inline int hdx_fuzz_memfd(const uint8_t *data, size_t size, char *path, size_t path_len)
{
    int fd = memfd_create("hdx-fuzz", MFD_CLOEXEC);
    if (fd < 0)
        return -1;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) {
            close(fd);
            return -1;
        }
        off += (size_t)w;
    }
    snprintf(path, path_len, "/proc/self/fd/%d", fd);
    return fd;
}

#endif
