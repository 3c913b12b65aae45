#include "symbols.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* From the C++ runtime (libstdc++), declared here to keep this file C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

struct hdx_symbolizer {
    int pid;
    Dwfl *dwfl;
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

int hdx_symbolize(hdx_symbolizer *s, hdx_frame *f, int is_return)
{
    if (!s || !f->pc)
        return -ENOENT;
    Dwarf_Addr addr = is_return ? f->pc - 1 : f->pc;
    cur_sym = s;
    int rc = -ENOENT;
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        goto out;
    Dwarf_Addr start = 0;
    const char *mname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    if (mname && !f->module)
        f->module = strdup(mname);
    GElf_Addr bias = 0;
    if (dwfl_module_getelf(mod, &bias))
        f->offset = f->pc - bias;
    else
        f->offset = f->pc - start;

    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name && *name) {
        free(f->function);
        f->function = clean_name(name);
        rc = 0;
    }
    Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
    if (line) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (src) {
            free(f->file);
            f->file = strdup(src);
            f->line = lineno > 0 ? lineno : 0;
        }
    }
out:
    cur_sym = NULL;
    return rc;
}

void hdx_symbolizer_free(hdx_symbolizer *s)
{
    if (!s)
        return;
    dwfl_end(s->dwfl);
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
