#include "symbols.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From the C++ runtime (libstdc++), declared here to keep this file C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* One looked-up address: what hdx_symbolize fills in, kept so that the
 * same return address in many threads (64 threads parked in one wait share
 * nearly all their frames) costs one libdwfl lookup per sample, not one per
 * frame: libdwfl scans a module's whole symbol table on every lookup. */
struct sym_entry {
    uint64_t key;   /* lookup address + 1 (0: empty slot) */
    uint64_t base;  /* f->offset = f->pc - base, or UINT64_MAX: no module */
    char *module, *function, *file;
    int line;
    int rc;
};

struct hdx_symbolizer {
    int pid;
    Dwfl *dwfl;
    struct sym_entry *cache; /* open addressing, cap a power of two */
    size_t n_cache, cap_cache;
};

/* libdwfl loads ELF files lazily, from inside lookups, and its find_elf
 * callback has no argument of ours: the symbolizer in use travels here. */
static _Thread_local hdx_symbolizer *cur_sym;

/* Default search path: the file's own directory, .debug/ beside it, then
 * /usr/lib/debug (by build id first: /usr/lib/debug/.build-id/xx/yyyy.debug). */
static char *debuginfo_path = NULL;

/* Open the module's file through /proc/PID/root, so a process in another
 * mount namespace (a container) gets its own binaries; fall back to
 * libdwfl's own lookup (which also handles the vDSO). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    hdx_symbolizer *s = cur_sym;
    if (s && name && name[0] == '/') {
        char path[PATH_MAX + 32];
        int n = snprintf(path, sizeof path, "/proc/%d/root%s", s->pid, name);
        if (n > 0 && (size_t)n < sizeof path) {
            int fd = open(path, O_RDONLY | O_CLOEXEC);
            if (fd >= 0) {
                *file_name = strdup(path);
                *elfp = NULL;
                return fd;
            }
        }
    }
    return dwfl_linux_proc_find_elf(mod, userdata, name, base, file_name, elfp);
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

hdx_symbolizer *hdx_symbolizer_new(int pid)
{
    hdx_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pid = pid;
    s->dwfl = dwfl_begin(&callbacks);
    if (!s->dwfl) {
        free(s);
        errno = ENOMEM;
        return NULL;
    }
    cur_sym = s;
    int r = dwfl_linux_proc_report(s->dwfl, pid);
    if (r == 0 && dwfl_report_end(s->dwfl, NULL, NULL) != 0)
        r = -1;
    cur_sym = NULL;
    if (r != 0) {
        dwfl_end(s->dwfl);
        free(s);
        /* r > 0 is an errno from reading /proc/PID/maps; -1 a libdwfl error */
        errno = r > 0 ? (r == ENOENT ? ESRCH : r) : EIO;
        return NULL;
    }
    return s;
}

/* The name a person (and classify) expects: demangled, without the symbol
 * version ("clock_nanosleep@GLIBC_2.2.5") or GCC's LTO privatization suffix
 * ("time_sleep.lto_priv.0"). Other clone suffixes (.constprop, .isra, .cold)
 * stay: they tell a different body. */
static char *clean_name(const char *name)
{
    size_t len = strcspn(name, "@");
    const char *lto = strstr(name, ".lto_priv.");
    if (lto && (size_t)(lto - name) < len)
        len = (size_t)(lto - name);
    char *base = strndup(name, len);
    if (!base)
        return NULL;
    char *d = hdx_demangle(base);
    free(base);
    return d;
}

/* The libdwfl lookup of addr, into e (strings owned by e). */
static void lookup(hdx_symbolizer *s, Dwarf_Addr addr, struct sym_entry *e)
{
    e->rc = -ENOENT;
    e->base = UINT64_MAX;
    cur_sym = s;
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        goto out;
    Dwarf_Addr start = 0;
    const char *mname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    e->module = mname ? strdup(mname) : NULL;
    GElf_Addr bias = 0;
    e->base = dwfl_module_getelf(mod, &bias) ? bias : start;

    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name && *name) {
        e->function = clean_name(name);
        e->rc = 0;
    }
    Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
    if (line) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (src) {
            e->file = strdup(src);
            e->line = lineno > 0 ? lineno : 0;
        }
    }
out:
    cur_sym = NULL;
}

static void entry_clear(struct sym_entry *e)
{
    free(e->module);
    free(e->function);
    free(e->file);
    memset(e, 0, sizeof *e);
}

static size_t slot_of(uint64_t key, size_t cap)
{
    return (size_t)((key * 0x9E3779B97F4A7C15ull) >> 17) & (cap - 1);
}

/* The cache slot for addr: found, or a free one to fill; NULL when the
 * cache cannot grow (the lookup then goes uncached). */
static struct sym_entry *cache_slot(hdx_symbolizer *s, uint64_t key)
{
    if ((s->n_cache + 1) * 2 > s->cap_cache) {
        size_t cap = s->cap_cache ? s->cap_cache * 2 : 256;
        struct sym_entry *c = calloc(cap, sizeof *c);
        if (!c)
            return NULL;
        for (size_t i = 0; i < s->cap_cache; i++) {
            if (!s->cache[i].key)
                continue;
            size_t j = slot_of(s->cache[i].key, cap);
            while (c[j].key)
                j = (j + 1) & (cap - 1);
            c[j] = s->cache[i];
        }
        free(s->cache);
        s->cache = c;
        s->cap_cache = cap;
    }
    size_t j = slot_of(key, s->cap_cache);
    while (s->cache[j].key && s->cache[j].key != key)
        j = (j + 1) & (s->cap_cache - 1);
    return &s->cache[j];
}

int hdx_symbolize(hdx_symbolizer *s, hdx_frame *f, int is_return)
{
    if (!s || !f->pc)
        return -ENOENT;
    Dwarf_Addr addr = is_return ? f->pc - 1 : f->pc;
    struct sym_entry tmp = {0}, *e = cache_slot(s, addr + 1);
    if (!e) {
        e = &tmp;
    } else if (!e->key) {
        lookup(s, addr, e);
        e->key = addr + 1;
        s->n_cache++;
    }
    if (e == &tmp)
        lookup(s, addr, e);
    if (e->base != UINT64_MAX)
        f->offset = f->pc - e->base;
    if (e->module && !f->module)
        f->module = strdup(e->module);
    if (e->function) {
        free(f->function);
        f->function = strdup(e->function);
    }
    if (e->file) {
        free(f->file);
        f->file = strdup(e->file);
        f->line = e->line;
    }
    int rc = e->rc;
    if (e == &tmp)
        entry_clear(&tmp);
    return rc;
}

void hdx_symbolizer_free(hdx_symbolizer *s)
{
    if (!s)
        return;
    dwfl_end(s->dwfl);
    for (size_t i = 0; i < s->cap_cache; i++)
        entry_clear(&s->cache[i]);
    free(s->cache);
    free(s);
}

char *hdx_demangle(const char *name)
{
    if (!name)
        return NULL;
    if (name[0] == '_' && name[1] == 'Z') {
        int status = 0;
        char *d = __cxa_demangle(name, NULL, NULL, &status);
        if (d && status == 0)
            return d;
        free(d);
    }
    return strdup(name);
}
