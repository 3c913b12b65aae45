#include "model/util.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

void *hdx_grow(void **arr, size_t *n, size_t *cap, size_t elsize)
{
    if (*n >= *cap) {
        size_t ncap = *cap ? *cap * 2 : 4;
        void *p = realloc(*arr, ncap * elsize);
        if (!p)
            return NULL;
        *arr = p;
        *cap = ncap;
    }
    char *e = (char *)*arr + *n * elsize;
    memset(e, 0, elsize);
    (*n)++;
    return e;
}

int hdx_reserve(char **buf, size_t *cap, size_t need)
{
    if (need <= *cap)
        return 0;
    size_t ncap = *cap > SIZE_MAX / 2 ? need : *cap * 2 > need ? *cap * 2 : need;
    char *p = realloc(*buf, ncap);
    if (!p)
        return -ENOMEM;
    *buf = p;
    *cap = ncap;
    return 0;
}

void *hdx_append(void **arr, size_t *n, size_t elsize)
{
    /* capacity is implied: 0, 4, 8, 16, ... */
    size_t cap = 0;
    if (*n) {
        cap = 4;
        while (cap < *n)
            cap *= 2;
    }
    return hdx_grow(arr, n, &cap, elsize);
}

char *hdx_strdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

char *hdx_asprintf(const char *fmt, ...)
{
    va_list ap;
    char *s = NULL;
    va_start(ap, fmt);
    int r = vasprintf(&s, fmt, ap);
    va_end(ap);
    return r < 0 ? NULL : s;
}

ssize_t hdx_read_head(const char *path, void *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
    if (fd < 0)
        return -1;
    struct stat st;
    ssize_t n = fstat(fd, &st) < 0 ? -1 : !S_ISREG(st.st_mode) ? (errno = EINVAL, -1) : 0;
    while (n >= 0 && (size_t)n < size) { /* a file system may return less than asked (FUSE, NFS) */
        ssize_t got = read(fd, (char *)buf + n, size - (size_t)n);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            n = got < 0 ? -1 : n;
            break;
        }
        n += got;
    }
    int e = errno;
    close(fd);
    errno = e;
    return n;
}

const char *hdx_file_kind(unsigned mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "a regular file";
    case S_IFDIR:
        return "a directory";
    case S_IFIFO:
        return "a FIFO (named pipe)";
    case S_IFSOCK:
        return "a socket";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    case S_IFLNK:
        return "a symbolic link";
    default:
        return "not a regular file";
    }
}

char *hdx_read_file(const char *path, size_t max, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    size_t cap = 4096 < max ? 4096 : max, n = 0;
    char *buf = malloc(cap + 1);
    if (!buf)
        goto fail;
    for (;;) {
        if (n == cap) {
            if (cap >= max)
                break;
            size_t ncap = cap * 2 < max ? cap * 2 : max;
            char *nb = realloc(buf, ncap + 1);
            if (!nb)
                goto fail;
            buf = nb;
            cap = ncap;
        }
        ssize_t r = read(fd, buf + n, cap - n);
        if (r < 0) {
            if (errno == EINTR)
                continue;
            goto fail;
        }
        if (r == 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = 0;
    if (len)
        *len = n;
    return buf;
fail: {
    int e = errno;
    free(buf);
    close(fd);
    errno = e;
    return NULL;
}
}

static int64_t clock_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

int64_t hdx_now_ns(void) { return clock_ns(CLOCK_REALTIME); }
int64_t hdx_mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

void hdx_format_time(int64_t ns, char *buf, size_t size)
{
    time_t s = (time_t)(ns / 1000000000);
    struct tm tm;
    gmtime_r(&s, &tm);
    strftime(buf, size, "%Y-%m-%dT%H:%M:%SZ", &tm);
}

const char *hdx_hostname(void)
{
    static char host[256];
    if (!host[0] && gethostname(host, sizeof host - 1) != 0)
        strcpy(host, "localhost");
    return host;
}

void hdx_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

int hdx_cmp_int(const void *a, const void *b)
{
    int x = *(const int *)a, y = *(const int *)b;
    return (x > y) - (x < y);
}

void hdx_format_ranges(int *vals, size_t n, char *buf, size_t size)
{
    size_t used = 0;
    if (size)
        buf[0] = 0;
    if (!n)
        return;
    qsort(vals, n, sizeof *vals, hdx_cmp_int);
    for (size_t i = 0; i < n;) {
        size_t j = i;
        while (j + 1 < n && (vals[j + 1] == vals[j] || vals[j + 1] == vals[j] + 1))
            j++;
        char part[32];
        if (vals[j] == vals[i])
            snprintf(part, sizeof part, "%s%d", used ? "," : "", vals[i]);
        else
            snprintf(part, sizeof part, "%s%d-%d", used ? "," : "", vals[i], vals[j]);
        size_t len = strlen(part);
        if (used + len + 4 >= size) {
            if (used + 4 < size)
                strcpy(buf + used, "...");
            return;
        }
        memcpy(buf + used, part, len + 1);
        used += len;
        i = j + 1;
    }
}

void hdx_format_ranges_of(const int *vals, size_t n, char *buf, size_t size)
{
    int *copy = malloc((n ? n : 1) * sizeof *copy);
    if (!copy) {
        snprintf(buf, size, "?");
        return;
    }
    if (n)
        memcpy(copy, vals, n * sizeof *copy);
    hdx_format_ranges(copy, n, buf, size);
    free(copy);
}

/* torch's and torchrun's "[word digits]:" at s: its length, with its word and digits as
 * hdx_launcher_prefix gives them; 0 (nothing set) when s does not start with one. */
static size_t bracket_prefix(const char *s, size_t *word_len, size_t *digits_at, size_t *n_digits)
{
    size_t w = 0, d = 0;
    if (s[0] != '[')
        return 0;
    while (isalpha((unsigned char)s[1 + w]) || s[1 + w] == '_')
        w++;
    while (isdigit((unsigned char)s[1 + w + d]))
        d++;
    if (!w || !d || s[1 + w + d] != ']' || s[2 + w + d] != ':')
        return 0;
    *word_len = w;
    *digits_at = 1 + w;
    *n_digits = d;
    return 3 + w + d;
}

/* Slurm's srun --label at s: blanks, digits, ':' and a blank ("  3: "). Its length up to the
 * ':', with its digits; 0 when s does not start with one. */
static size_t slurm_label(const char *s, size_t *digits_at, size_t *n_digits)
{
    size_t at = 0, d = 0;
    while (s[at] == ' ')
        at++;
    while (isdigit((unsigned char)s[at + d]))
        d++;
    if (!d || s[at + d] != ':' || s[at + d + 1] != ' ')
        return 0;
    *digits_at = at;
    *n_digits = d;
    return at + d + 1;
}

/* pdsh's host label at s ("worker-0: ", DeepSpeed's multi-node launcher): a host name (letters,
 * digits, '.', '-', '_'; not digits only: that is Slurm's label) and ": ". Its length with the
 * blank, 0 when s does not start with one. */
static size_t pdsh_label(const char *s)
{
    size_t n = 0;
    int letter = 0;
    while (n < 64 && (isalnum((unsigned char)s[n]) || s[n] == '.' || s[n] == '-' || s[n] == '_'))
        letter |= !isdigit((unsigned char)s[n++]);
    return n && letter && s[n] == ':' && s[n + 1] == ' ' ? n + 2 : 0;
}

size_t hdx_launcher_prefix(const char *s, size_t *word_len, size_t *digits_at, size_t *n_digits)
{
    size_t len = bracket_prefix(s, word_len, digits_at, n_digits);
    if (len)
        return len;
    size_t at, d, slurm = slurm_label(s, &at, &d);
    /* a launcher's label before a bracket prefix (srun around torchrun, "0: [rank3]:"; pdsh,
     * "worker-0: [rank3]:"): one prefix, whose bracket names the rank */
    size_t label = slurm ? slurm + 1 : pdsh_label(s);
    if (label && (len = bracket_prefix(s + label, word_len, digits_at, n_digits))) {
        *digits_at += label;
        return label + len;
    }
    if (!slurm)
        return 0;
    *word_len = 0;
    *digits_at = at;
    *n_digits = d;
    return slurm;
}

/* 1 when s starts with n digits. */
static int digits(const char *s, int n)
{
    for (int i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return 0;
    return 1;
}

size_t hdx_runtime_stamp(const char *s)
{
    /* YYYY-MM-DDTHH:MM:SS */
    if (!digits(s, 4) || s[4] != '-' || !digits(s + 5, 2) || s[7] != '-' || !digits(s + 8, 2) || s[10] != 'T' ||
        !digits(s + 11, 2) || s[13] != ':' || !digits(s + 14, 2) || s[16] != ':' || !digits(s + 17, 2))
        return 0;
    size_t n = 19;
    if (s[n] == '.' && isdigit((unsigned char)s[n + 1]))
        for (n++; isdigit((unsigned char)s[n]); n++)
            ;
    if (s[n] == 'Z')
        n++;
    else if ((s[n] == '+' || s[n] == '-') && digits(s + n + 1, 2) && s[n + 3] == ':' && digits(s + n + 4, 2))
        n += 6;
    else
        return 0;
    return s[n] == ' ' ? n + 1 : 0;
}

int hdx_str_same(const char *a, const char *b)
{
    return a == b || (a && b && !strcmp(a, b));
}

int hdx_parse_long(const char *s, long min, long max, long *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max)
        return -1;
    *out = v;
    return 0;
}

int hdx_utf8_next(const char *s, uint32_t *cp)
{
    const unsigned char *u = (const unsigned char *)s;
    int n = u[0] < 0x80 ? 1 : u[0] >= 0xc2 && u[0] <= 0xdf ? 2 : u[0] >= 0xe0 && u[0] <= 0xef ? 3
                            : u[0] >= 0xf0 && u[0] <= 0xf4 ? 4 : 0;
    if (n == 1)
        *cp = u[0];
    if (n <= 1)
        return n;
    uint32_t c = u[0] & (0xff >> (n + 1));
    for (int i = 1; i < n; i++) {
        if ((u[i] & 0xc0) != 0x80)
            return 0;
        c = c << 6 | (u[i] & 0x3f);
    }
    static const uint32_t least[] = {0, 0, 0x80, 0x800, 0x10000};
    if (c < least[n] || (c >= 0xd800 && c <= 0xdfff) || c > 0x10ffff)
        return 0;
    *cp = c;
    return n;
}

/* Code points a terminal acts on: the C1 controls, and the marks that reorder text
 * (Unicode bidirectional formatting: a right-to-left override hides what follows). */
static int acting_code_point(uint32_t cp)
{
    return (cp >= 0x80 && cp <= 0x9f) || cp == 0x61c || cp == 0x200e || cp == 0x200f ||
           (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

void hdx_put_text(FILE *f, const char *s)
{
    while (*s) {
        size_t plain = 0; /* printable ASCII, written as it is in one call: a 25 MB report was
                             40 % fputc of a byte each */
        while ((unsigned char)s[plain] >= 0x20 && (unsigned char)s[plain] < 0x7f)
            plain++;
        if (plain) {
            fwrite(s, 1, plain, f);
            s += plain;
            continue;
        }
        unsigned char c = (unsigned char)*s;
        uint32_t cp = 0;
        int n = c >= 0x80 ? hdx_utf8_next(s, &cp) : 1;
        if (c == '\n')
            fputs("\\n", f);
        else if (c == '\t')
            fputs("\\t", f);
        else if (c == '\r')
            fputs("\\r", f);
        else if (c < 0x80 || n == 0)
            fprintf(f, "\\x%02x", c); /* a control byte, or no valid UTF-8 */
        else if (acting_code_point(cp))
            fprintf(f, "\\u%04x", (unsigned)cp);
        else
            fwrite(s, 1, (size_t)n, f);
        s += n ? n : 1;
    }
}

void hdx_vsay(FILE *f, const char *fmt, va_list ap)
{
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0) {
        fputs(fmt, f);
        return;
    }
    size_t n = strlen(s), end = n;
    while (end > 0 && s[end - 1] == '\n')
        end--;
    s[end] = 0;
    hdx_put_text(f, s);
    for (; end < n; end++)
        fputc('\n', f);
    free(s);
}

void hdx_say(FILE *f, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    hdx_vsay(f, fmt, ap);
    va_end(ap);
}

const char *hdx_self_exe(void)
{
    static char exe[PATH_MAX];
    if (!exe[0]) {
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) {
            exe[0] = 0;
            return NULL;
        }
        exe[n] = 0;
    }
    return exe;
}

const char *hdx_self_dir(void)
{
    static char dir[PATH_MAX];
    if (!dir[0]) {
        const char *exe = hdx_self_exe();
        const char *slash = exe ? strrchr(exe, '/') : NULL;
        if (slash && slash > exe)
            snprintf(dir, sizeof dir, "%.*s", (int)(slash - exe), exe);
        else
            strcpy(dir, slash ? "/" : ".");
    }
    return dir;
}

int hdx_cpus(int threads)
{
    long cpus = threads > 0 ? threads : sysconf(_SC_NPROCESSORS_ONLN);
    if (threads <= 0 && cpus > 8)
        cpus = 8;
    return cpus < 1 ? 1 : (int)cpus;
}

struct parallel {
    size_t n, block;
    atomic_size_t next; /* the first index no thread has taken */
    atomic_int rc;      /* the first non-zero result */
    int (*fn)(void *, size_t);
    void *arg;
};

static void *parallel_worker(void *arg)
{
    struct parallel *p = arg;
    for (;;) {
        size_t from = atomic_fetch_add(&p->next, p->block);
        if (from >= p->n || atomic_load(&p->rc))
            break;
        size_t to = p->n - from < p->block ? p->n : from + p->block;
        for (size_t i = from; i < to; i++) {
            int r = p->fn(p->arg, i);
            int none = 0;
            if (r) {
                atomic_compare_exchange_strong(&p->rc, &none, r);
                return NULL;
            }
        }
    }
    return NULL;
}

int hdx_parallel_for(size_t n, size_t block, int threads, int (*fn)(void *arg, size_t i), void *arg)
{
    struct parallel p = {.n = n, .block = block ? block : 1, .fn = fn, .arg = arg};
    atomic_init(&p.next, 0);
    atomic_init(&p.rc, 0);
    pthread_t tids[7]; /* and the caller's: 8 */
    size_t want = (size_t)hdx_cpus(threads) - 1, started = 0;
    if (want > n / p.block)
        want = n / p.block;
    if (want > sizeof tids / sizeof tids[0])
        want = sizeof tids / sizeof tids[0];
    while (started < want && pthread_create(&tids[started], NULL, parallel_worker, &p) == 0)
        started++;
    parallel_worker(&p);
    for (size_t i = 0; i < started; i++)
        pthread_join(tids[i], NULL);
    return atomic_load(&p.rc);
}
