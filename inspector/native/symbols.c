#include "native/symbols.h"

#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "native/maps.h"
#include "model/index.h"
#include "model/util.h"

/* From the C++ runtime (libstdc++), declared here to keep this file C. */
char *__cxa_demangle(const char *mangled, char *buf, size_t *len, int *status);

/* What a lookup yields, apart from where the module lies (strings owned). */
struct sym_result {
    char *function, *file;
    int line;
    int rc; /* 0: a symbol covers the address, -ENOENT: none */
};

/* One looked-up address: what hdx_symbolize fills in, kept so that the
 * same return address in many threads (64 threads parked in one wait share
 * nearly all their frames) costs one lookup per symbolizer, not one per
 * frame: libdwfl scans a module's whole symbol table on every lookup. */
struct sym_entry {
    uint64_t key;   /* lookup address + 1 (0: empty slot) */
    uint64_t base;  /* f->offset = f->pc - base, or UINT64_MAX: no module */
    char *module;
    struct sym_result r;
};

/* One binary of a shared cache, with a libdwfl session of its own. */
struct sym_file {
    unsigned char *id; /* 'B' + build id, or 'S' + struct file_stat */
    size_t id_len;
    Dwfl *dwfl;        /* NULL: the file could not be opened as this binary */
    Dwfl_Module *mod;
    GElf_Addr bias;    /* the module's load bias in that session */
};

/* Identity of a binary without a build id. */
struct file_stat {
    uint64_t dev, ino, size;
    int64_t mtime_sec, mtime_nsec;
};

/* A shared result: the address in a binary (less its load bias). */
struct shared_entry {
    uint64_t key; /* address in the binary + 1 */
    size_t file;  /* index in hdx_symcache.files */
    struct sym_result r;
};

struct hdx_symcache {
    int lines; /* look up file:line (DWARF), or function names only */
    struct sym_file *files;
    size_t n_files;
    struct shared_entry *tab; /* in the order looked up */
    size_t n_tab;
    hdx_index tab_index; /* key ^ file << 48 -> index in tab */
    size_t lookups;
};

/* What a module of one process maps to, kept in its Dwfl_Module's user data. */
struct proc_mod {
    struct proc_mod *next; /* all of a symbolizer's, to free them */
    int have_bias;
    GElf_Addr bias;
    long file; /* index in the shared cache's files, -1: resolved in the process's session */
};

struct hdx_symbolizer {
    int pid;
    int lines; /* the shared cache's setting; 1 without one */
    Dwfl *dwfl;
    hdx_symcache *shared; /* borrowed, or NULL */
    struct proc_mod *mods;
    struct sym_entry *cache; /* in the order looked up */
    size_t n_cache;
    hdx_index cache_index; /* key -> index in cache */
    hdx_map *maps;  /* the target's mappings, read when a module's file is first looked for */
    size_t n_maps;
    int maps_read;
};

/* libdwfl loads ELF files lazily, from inside lookups, and its find_elf
 * callback has no argument of ours: the symbolizer in use travels here. */
static _Thread_local hdx_symbolizer *cur_sym;

/* Default search path: the file's own directory, .debug/ beside it, then
 * /usr/lib/debug (by build id first: /usr/lib/debug/.build-id/xx/yyyy.debug). */
static char *debuginfo_path = NULL;

/* Open the module's file as the target maps it (hdx_map_file: its device and inode,
 * through /proc/PID/map_files, /proc/PID/root or the path as seen here), so that a
 * container's binaries and a chroot's resolve and a namesake on this host never stands
 * in; fall back to libdwfl's own lookup (which also handles the vDSO). */
static int find_elf(Dwfl_Module *mod, void **userdata, const char *name, Dwarf_Addr base,
                    char **file_name, Elf **elfp)
{
    hdx_symbolizer *s = cur_sym;
    if (s && name && name[0] == '/') {
        if (!s->maps_read) {
            s->maps_read = 1;
            hdx_maps_read(s->pid, &s->maps, &s->n_maps);
        }
        const hdx_map *m = NULL;
        for (size_t i = 0; i < s->n_maps && !m; i++)
            if (s->maps[i].path && !strcmp(s->maps[i].path, name) && s->maps[i].start == base)
                m = &s->maps[i];
        for (size_t i = 0; i < s->n_maps && !m; i++)
            if (s->maps[i].path && !strcmp(s->maps[i].path, name))
                m = &s->maps[i];
        char root[64], path[PATH_MAX + 64];
        snprintf(root, sizeof root, "/proc/%d/root", s->pid);
        hdx_map guess = {.start = base, .path = (char *)name};
        if (hdx_map_file(s->pid, root, m ? m : &guess, path, sizeof path) == 0) {
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

/* A shared cache's sessions name their file in dwfl_report_elf: find_elf is never called. */
static const Dwfl_Callbacks file_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

hdx_symcache *hdx_symcache_new(int lines)
{
    hdx_symcache *c = calloc(1, sizeof *c);
    if (c)
        c->lines = lines;
    return c;
}

size_t hdx_symcache_lookups(const hdx_symcache *c)
{
    return c ? c->lookups : 0;
}

size_t hdx_symcache_binaries(const hdx_symcache *c)
{
    size_t n = 0;
    for (size_t i = 0; c && i < c->n_files; i++)
        n += c->files[i].dwfl != NULL;
    return n;
}

static void result_clear(struct sym_result *r)
{
    free(r->function);
    free(r->file);
    memset(r, 0, sizeof *r);
}

void hdx_symcache_free(hdx_symcache *c)
{
    if (!c)
        return;
    for (size_t i = 0; i < c->n_files; i++) {
        dwfl_end(c->files[i].dwfl);
        free(c->files[i].id);
    }
    free(c->files);
    for (size_t i = 0; i < c->n_tab; i++)
        result_clear(&c->tab[i].r);
    free(c->tab);
    hdx_index_free(&c->tab_index);
    free(c);
}

hdx_symbolizer *hdx_symbolizer_new_shared(int pid, hdx_symcache *shared)
{
    hdx_symbolizer *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->pid = pid;
    s->shared = shared;
    s->lines = shared ? shared->lines : 1;
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

hdx_symbolizer *hdx_symbolizer_new(int pid)
{
    return hdx_symbolizer_new_shared(pid, NULL);
}

char *hdx_symbol_clean_name(const char *name)
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

/* Function, and with lines file and line, of addr in mod (an address of mod's
 * session), into r: the one place that asks libdwfl, and where a module's
 * symbol table and (with lines) DWARF get read. */
static void resolve(Dwfl_Module *mod, Dwarf_Addr addr, int lines, struct sym_result *r)
{
    r->rc = -ENOENT;
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name && *name) {
        r->function = hdx_symbol_clean_name(name);
        r->rc = 0;
    }
    Dwfl_Line *line = lines ? dwfl_module_getsrc(mod, addr) : NULL;
    if (line) {
        int lineno = 0;
        const char *src = dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL);
        if (src) {
            r->file = strdup(src);
            r->line = lineno > 0 ? lineno : 0;
        }
    }
}

/* The identity of a process's module (its main ELF loaded): 'B' + build
 * id, else 'S' + device, inode, size and mtime of mainfile. Heap bytes, or
 * NULL when it has neither. */
static unsigned char *module_identity(Dwfl_Module *mod, const char *mainfile, size_t *len)
{
    const unsigned char *bits = NULL;
    GElf_Addr vaddr = 0;
    int n = dwfl_module_build_id(mod, &bits, &vaddr);
    unsigned char *id = NULL;
    if (n > 0 && bits) {
        if ((id = malloc((size_t)n + 1))) {
            id[0] = 'B';
            memcpy(id + 1, bits, (size_t)n);
            *len = (size_t)n + 1;
        }
        return id;
    }
    struct stat st;
    if (!mainfile || stat(mainfile, &st) != 0 || !S_ISREG(st.st_mode))
        return NULL;
    struct file_stat fs = {.dev = st.st_dev, .ino = st.st_ino, .size = (uint64_t)st.st_size,
                           .mtime_sec = st.st_mtim.tv_sec, .mtime_nsec = st.st_mtim.tv_nsec};
    if ((id = malloc(sizeof fs + 1))) {
        id[0] = 'S';
        memcpy(id + 1, &fs, sizeof fs);
        *len = sizeof fs + 1;
    }
    return id;
}

/* Open mainfile in a session of its own for the shared cache, and check
 * that it is the binary the process maps (same identity). 0 or -1. */
static int file_open(struct sym_file *f, const char *name, const char *mainfile)
{
    f->dwfl = dwfl_begin(&file_callbacks);
    if (!f->dwfl)
        return -1;
    /* base 0 relative to the phdrs' p_vaddr: a bias of 0 for ET_DYN, as for ET_EXEC */
    f->mod = dwfl_report_elf(f->dwfl, name, mainfile, -1, 0, true);
    if (dwfl_report_end(f->dwfl, NULL, NULL) != 0 || !f->mod || !dwfl_module_getelf(f->mod, &f->bias))
        goto fail;
    size_t len = 0;
    unsigned char *id = module_identity(f->mod, mainfile, &len);
    int same = id && len == f->id_len && memcmp(id, f->id, len) == 0;
    free(id);
    if (same)
        return 0;
fail:
    dwfl_end(f->dwfl);
    f->dwfl = NULL;
    f->mod = NULL;
    return -1;
}

/* The shared cache's index of the binary with identity id (owned by the
 * cache afterwards, freed here otherwise), opened from mainfile the first
 * time; -1 when it cannot be used. */
static long file_index(hdx_symcache *c, unsigned char *id, size_t len, const char *name,
                       const char *mainfile)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (c->files[i].id_len == len && memcmp(c->files[i].id, id, len) == 0) {
            free(id);
            return c->files[i].dwfl ? (long)i : -1;
        }
    struct sym_file *f = hdx_append((void **)&c->files, &c->n_files, sizeof *c->files);
    if (!f) {
        free(id);
        return -1;
    }
    f->id = id;
    f->id_len = len;
    /* a failed open is kept too: the next process does not try again */
    return file_open(f, name, mainfile) == 0 ? (long)(f - c->files) : -1;
}

/* What mod (of s's process) maps to: its load bias and its binary in the
 * shared cache. Looked up once per module; NULL on ENOMEM. */
static struct proc_mod *module_of(hdx_symbolizer *s, Dwfl_Module *mod, void **userdata)
{
    if (*userdata)
        return *userdata;
    struct proc_mod *pm = calloc(1, sizeof *pm);
    if (!pm)
        return NULL;
    pm->file = -1;
    pm->next = s->mods;
    s->mods = pm;
    *userdata = pm;
    /* the main ELF only (program headers, build id note): no symbol table, no DWARF */
    if (!dwfl_module_getelf(mod, &pm->bias))
        return pm;
    pm->have_bias = 1;
    const char *mainfile = NULL;
    const char *name = dwfl_module_info(mod, NULL, NULL, NULL, NULL, NULL, &mainfile, NULL);
    if (!s->shared || !mainfile || mainfile[0] != '/')
        return pm; /* the vDSO, or no sharing */
    size_t len = 0;
    unsigned char *id = module_identity(mod, mainfile, &len);
    if (id)
        pm->file = file_index(s->shared, id, len, name, mainfile);
    return pm;
}

/* The shared entry for (file, key), or NULL. */
static struct shared_entry *shared_find(hdx_symcache *c, size_t file, uint64_t key)
{
    size_t cur = 0, at;
    while ((at = hdx_index_find(&c->tab_index, key ^ ((uint64_t)file << 48), &cur)) != HDX_INDEX_NONE)
        if (c->tab[at].key == key && c->tab[at].file == file)
            return &c->tab[at];
    return NULL;
}

static int result_copy(struct sym_result *to, const struct sym_result *from)
{
    to->rc = from->rc;
    to->line = from->line;
    to->function = from->function ? strdup(from->function) : NULL;
    to->file = from->file ? strdup(from->file) : NULL;
    return (from->function && !to->function) || (from->file && !to->file) ? -ENOMEM : 0;
}

/* Resolve the address faddr of binary file through the shared cache, into r. */
static void resolve_shared(hdx_symcache *c, size_t file, uint64_t faddr, struct sym_result *r)
{
    struct shared_entry *e = shared_find(c, file, faddr + 1);
    if (e) {
        result_copy(r, &e->r);
        return;
    }
    const struct sym_file *f = &c->files[file];
    c->lookups++;
    resolve(f->mod, faddr + f->bias, c->lines, r);
    /* Kept when there is memory for it (the index reserved first: its insert cannot fail). */
    struct shared_entry ne = {.key = faddr + 1, .file = file};
    if (result_copy(&ne.r, r) < 0 || hdx_index_reserve(&c->tab_index, c->n_tab + 1) < 0 ||
        !(e = hdx_append((void **)&c->tab, &c->n_tab, sizeof *e))) {
        result_clear(&ne.r);
        return;
    }
    *e = ne;
    hdx_index_insert(&c->tab_index, ne.key ^ ((uint64_t)file << 48), c->n_tab - 1);
}

/* The lookup of addr in s's process, into e (strings owned by e). */
static void lookup(hdx_symbolizer *s, Dwarf_Addr addr, struct sym_entry *e)
{
    e->r.rc = -ENOENT;
    e->base = UINT64_MAX;
    cur_sym = s;
    Dwfl_Module *mod = dwfl_addrmodule(s->dwfl, addr);
    if (!mod)
        goto out;
    Dwarf_Addr start = 0;
    void **userdata = NULL;
    const char *mname = dwfl_module_info(mod, &userdata, &start, NULL, NULL, NULL, NULL, NULL);
    e->module = mname ? strdup(mname) : NULL;
    struct proc_mod *pm = module_of(s, mod, userdata);
    e->base = pm && pm->have_bias ? pm->bias : start;
    if (pm && pm->file >= 0)
        resolve_shared(s->shared, (size_t)pm->file, addr - pm->bias, &e->r);
    else
        resolve(mod, addr, s->lines, &e->r);
out:
    cur_sym = NULL;
}

static void entry_clear(struct sym_entry *e)
{
    free(e->module);
    result_clear(&e->r);
    memset(e, 0, sizeof *e);
}

/* The cache entry for key: found, or a new one (key 0) to fill; NULL when the cache cannot
 * grow (the lookup then goes uncached). A new entry must be filled before the next call. */
static struct sym_entry *cache_slot(hdx_symbolizer *s, uint64_t key)
{
    size_t cur = 0, at;
    while ((at = hdx_index_find(&s->cache_index, key, &cur)) != HDX_INDEX_NONE)
        if (s->cache[at].key == key)
            return &s->cache[at];
    struct sym_entry *e;
    if (hdx_index_reserve(&s->cache_index, s->n_cache + 1) < 0 ||
        !(e = hdx_append((void **)&s->cache, &s->n_cache, sizeof *e)))
        return NULL;
    hdx_index_insert(&s->cache_index, key, s->n_cache - 1); /* reserved: cannot fail */
    return e;
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
    }
    if (e == &tmp)
        lookup(s, addr, e);
    if (e->base != UINT64_MAX)
        f->offset = f->pc - e->base;
    if (e->module && !f->module)
        f->module = strdup(e->module);
    if (e->r.function) {
        free(f->function);
        f->function = strdup(e->r.function);
    }
    if (e->r.file) {
        free(f->file);
        f->file = strdup(e->r.file);
        f->line = e->r.line;
    }
    int rc = e->r.rc;
    if (e == &tmp)
        entry_clear(&tmp);
    return rc;
}

void hdx_symbolizer_free(hdx_symbolizer *s)
{
    if (!s)
        return;
    dwfl_end(s->dwfl);
    hdx_maps_free(s->maps, s->n_maps);
    while (s->mods) {
        struct proc_mod *next = s->mods->next;
        free(s->mods);
        s->mods = next;
    }
    for (size_t i = 0; i < s->n_cache; i++)
        entry_clear(&s->cache[i]);
    free(s->cache);
    hdx_index_free(&s->cache_index);
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
