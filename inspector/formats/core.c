/*
 * ELF core files → evidence (core.h). The core is mapped read-only and its
 * headers and notes are parsed here by hand (bounds-checked: a core is
 * untrusted input); libdwfl gets the same file for the native stacks.
 */
#include "formats/core.h"

#include <elf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwelf.h>
#include <elfutils/libdwfl.h>
#include <errno.h>
#include <fcntl.h>
#include <libelf.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "python/merge.h"
#include "python/python.h"
#include "formats/snapshot.h"
#include "native/symbols.h"
#include "model/util.h"

#define MAX_DEPTH 256
#define MAX_NOTE_ITEMS 65536
#define INITIAL_STACK_SCAN (4u << 20) /* bytes below AT_EXECFN searched for the auxv */
#define MAX_ARGS 4096

#ifndef NT_FILE
#define NT_FILE 0x46494c45
#endif

/* Offsets in the 64-bit Linux note payloads (the same on x86-64 and aarch64):
 * struct elf_prstatus: pr_pid after pr_info(12) pr_cursig(2+2) pr_sigpend(8)
 * pr_sighold(8); struct elf_prpsinfo: pr_sname, pr_pid, pr_ppid, pr_fname,
 * pr_psargs (linux/elfcore.h). */
#define PRSTATUS_PID 32
#define PRSTATUS_PPID 36
#define PRSTATUS_MIN 112
#define PRPSINFO_PID 24
#define PRPSINFO_PPID 28
#define PRPSINFO_FNAME 40
#define PRPSINFO_PSARGS 56
#define PRPSINFO_SIZE 136

struct seg {
    uint64_t vaddr, memsz, filesz, offset;
    uint32_t flags;
};

/* What the fallback may do with one mapped file. */
enum file_state { F_UNCHECKED = 0, F_MATCH, F_UNVERIFIED, F_MISMATCH, F_MISSING };

struct bfile {
    char *path;
    int fd;
    enum file_state state;
    int used;   /* a page the core lacks was needed from it */
    char why[160]; /* F_UNVERIFIED / F_MISMATCH: which build ids */
};

struct fmap {
    uint64_t start, end, off; /* off: file offset of start, bytes */
    size_t file;              /* index in files */
};

struct core {
    const char *name;
    unsigned char *img;
    size_t size;
    struct seg *segs; /* PT_LOAD, sorted by vaddr */
    size_t n_segs;
    struct fmap *fmaps;
    size_t n_fmaps;
    struct bfile *files;
    size_t n_files;
    int pid, ppid;
    char psargs[81];
    char fname[17];
    int *tids; /* NT_PRSTATUS order */
    size_t n_tids;
    const uint64_t *auxv; /* pairs, in img */
    size_t n_auxv;
};

/* ---------------------------------------------------------------- memory */

static const struct seg *seg_of(const struct core *c, uint64_t addr)
{
    size_t lo = 0, hi = c->n_segs;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        const struct seg *s = &c->segs[mid];
        if (addr < s->vaddr)
            hi = mid;
        else if (addr - s->vaddr >= s->memsz)
            lo = mid + 1;
        else
            return s;
    }
    return NULL;
}

/* Bytes of the core only (no fallback), for what must come from the dump. */
static int core_read(const struct core *c, uint64_t addr, void *buf, size_t len)
{
    unsigned char *out = buf;
    while (len) {
        const struct seg *s = seg_of(c, addr);
        if (!s || addr - s->vaddr >= s->filesz)
            return -EFAULT;
        size_t n = (size_t)(s->filesz - (addr - s->vaddr));
        if (n > len)
            n = len;
        memcpy(out, c->img + s->offset + (addr - s->vaddr), n);
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* The GNU build id of the ELF image whose first page the core holds at
 * start; 0 with *len, or -1. */
static int core_build_id(const struct core *c, uint64_t start, unsigned char *id, size_t *len)
{
    Elf64_Ehdr eh;
    if (core_read(c, start, &eh, sizeof eh) < 0 || memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum > 256)
        return -1;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        if (core_read(c, start + eh.e_phoff + i * sizeof ph, &ph, sizeof ph) < 0)
            return -1;
        if (ph.p_type != PT_NOTE || ph.p_filesz > 4096)
            continue;
        unsigned char notes[4096];
        if (core_read(c, start + ph.p_offset, notes, ph.p_filesz) < 0)
            continue;
        for (size_t o = 0; o + sizeof(Elf64_Nhdr) <= ph.p_filesz;) {
            Elf64_Nhdr nh;
            memcpy(&nh, notes + o, sizeof nh);
            size_t name_at = o + sizeof nh, desc_at = name_at + ((nh.n_namesz + 3u) & ~3u);
            if (nh.n_namesz > 4096 || nh.n_descsz > 4096 || desc_at + nh.n_descsz > ph.p_filesz)
                break;
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && !memcmp(notes + name_at, "GNU", 4) &&
                nh.n_descsz <= 64) {
                memcpy(id, notes + desc_at, nh.n_descsz);
                *len = nh.n_descsz;
                return 0;
            }
            o = desc_at + ((nh.n_descsz + 3u) & ~3u);
        }
    }
    return -1;
}

static void hex(const unsigned char *b, size_t n, char *out, size_t size)
{
    size_t k = 0;
    for (size_t i = 0; i < n && k + 3 <= size; i++)
        k += (size_t)snprintf(out + k, size - k, "%02x", b[i]);
    if (k < size)
        out[k] = 0;
}

/* Decide once whether pages of file f may be read from this machine. */
static void check_file(struct core *c, struct bfile *f)
{
    f->fd = open(f->path, O_RDONLY | O_CLOEXEC);
    if (f->fd < 0) {
        f->state = F_MISSING;
        return;
    }
    unsigned char cid[64];
    size_t clen = 0;
    int have_core = 0;
    for (size_t i = 0; i < c->n_fmaps && !have_core; i++)
        if (&c->files[c->fmaps[i].file] == f && c->fmaps[i].off == 0)
            have_core = core_build_id(c, c->fmaps[i].start, cid, &clen) == 0;
    const void *did = NULL;
    ssize_t dlen = -1;
    Elf *e = elf_begin(f->fd, ELF_C_READ_MMAP, NULL);
    if (e)
        dlen = dwelf_elf_gnu_build_id(e, &did);
    char a[132] = "", b[132] = "";
    if (have_core)
        hex(cid, clen, a, sizeof a);
    if (dlen > 0)
        hex(did, (size_t)dlen, b, sizeof b);
    if (have_core && dlen > 0) {
        f->state = (size_t)dlen == clen && !memcmp(did, cid, clen) ? F_MATCH : F_MISMATCH;
        snprintf(f->why, sizeof f->why, "build id %.40s in the core, %.40s on disk", a, b);
    } else {
        f->state = F_UNVERIFIED;
        snprintf(f->why, sizeof f->why, "%s", have_core ? "the file on disk has no build id"
                                                        : "the core holds no build id for it");
    }
    if (e)
        elf_end(e);
}

static int core_mem_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
    struct core *c = ctx;
    unsigned char *out = buf;
    if (!addr)
        return -EFAULT;
    while (len) {
        const struct seg *s = seg_of(c, addr);
        size_t n;
        if (s && addr - s->vaddr < s->filesz) {
            n = (size_t)(s->filesz - (addr - s->vaddr));
            if (n > len)
                n = len;
            memcpy(out, c->img + s->offset + (addr - s->vaddr), n);
        } else {
            /* Not in the core: the page of the file it was mapped from. */
            const struct fmap *m = NULL;
            for (size_t i = 0; i < c->n_fmaps && !m; i++)
                if (addr >= c->fmaps[i].start && addr < c->fmaps[i].end)
                    m = &c->fmaps[i];
            if (!m)
                return -EFAULT;
            struct bfile *f = &c->files[m->file];
            if (f->state == F_UNCHECKED)
                check_file(c, f);
            f->used = 1;
            if (f->state == F_MISSING || f->state == F_MISMATCH)
                return -EFAULT;
            n = (size_t)(m->end - addr);
            if (s && s->vaddr + s->memsz - addr < n)
                n = (size_t)(s->vaddr + s->memsz - addr);
            if (n > len)
                n = len;
            if (pread(f->fd, out, n, (off_t)(m->off + (addr - m->start))) != (ssize_t)n)
                return -EFAULT;
        }
        out += n;
        addr += n;
        len -= n;
    }
    return 0;
}

/* The core outlives every reader that borrows it: nothing to close. */
static void core_mem_close(void *ctx)
{
    (void)ctx;
}

static const hdx_pymem_ops core_mem_ops = {core_mem_read, core_mem_close};

/* A NUL-terminated string of at most max-1 bytes at addr; heap, or NULL. */
static char *read_cstr(struct core *c, uint64_t addr, size_t max)
{
    char *s = malloc(max);
    if (!s)
        return NULL;
    size_t n = 0;
    while (n + 1 < max) {
        char ch;
        if (core_mem_read(c, addr + n, &ch, 1) < 0)
            break;
        if (!ch) {
            s[n] = 0;
            return s;
        }
        s[n++] = ch;
    }
    free(s);
    return NULL;
}

/* ------------------------------------------------------------- parsing */

static int cmp_seg(const void *a, const void *b)
{
    const struct seg *x = a, *y = b;
    return x->vaddr < y->vaddr ? -1 : x->vaddr > y->vaddr;
}

static size_t file_index(struct core *c, const char *path)
{
    for (size_t i = 0; i < c->n_files; i++)
        if (!strcmp(c->files[i].path, path))
            return i;
    struct bfile *f = hdx_append((void **)&c->files, &c->n_files, sizeof *f);
    if (!f)
        return SIZE_MAX;
    f->fd = -1;
    if (!(f->path = strdup(path))) {
        c->n_files--;
        return SIZE_MAX;
    }
    return c->n_files - 1;
}

static int parse_nt_file(struct core *c, const unsigned char *d, size_t len)
{
    uint64_t count, page;
    if (len < 16)
        return -EBADMSG;
    memcpy(&count, d, 8);
    memcpy(&page, d + 8, 8);
    if (count > MAX_NOTE_ITEMS || 16 + count * 24 > len)
        return -EBADMSG;
    const char *names = (const char *)d + 16 + count * 24, *end = (const char *)d + len;
    for (uint64_t i = 0; i < count; i++) {
        const char *nul = memchr(names, 0, (size_t)(end - names));
        if (!nul)
            return -EBADMSG;
        uint64_t v[3];
        memcpy(v, d + 16 + i * 24, sizeof v);
        size_t fi = file_index(c, names);
        struct fmap *m = fi == SIZE_MAX ? NULL : hdx_append((void **)&c->fmaps, &c->n_fmaps, sizeof *m);
        if (!m)
            return -ENOMEM;
        m->start = v[0];
        m->end = v[1];
        m->off = v[2] * page;
        m->file = fi;
        names = nul + 1;
    }
    return 0;
}

static int parse_notes(struct core *c, const unsigned char *d, size_t len)
{
    for (size_t o = 0; o + sizeof(Elf64_Nhdr) <= len;) {
        Elf64_Nhdr nh;
        memcpy(&nh, d + o, sizeof nh);
        size_t name_at = o + sizeof nh;
        size_t desc_at = name_at + (((size_t)nh.n_namesz + 3) & ~(size_t)3);
        if (desc_at > len || nh.n_descsz > len - desc_at)
            return -EBADMSG;
        const unsigned char *desc = d + desc_at;
        int core = nh.n_namesz == 5 && !memcmp(d + name_at, "CORE", 5);
        if (core && nh.n_type == NT_PRSTATUS && nh.n_descsz >= PRSTATUS_MIN) {
            int32_t tid, ppid;
            memcpy(&tid, desc + PRSTATUS_PID, 4);
            memcpy(&ppid, desc + PRSTATUS_PPID, 4);
            int *slot = hdx_append((void **)&c->tids, &c->n_tids, sizeof *slot);
            if (!slot)
                return -ENOMEM;
            *slot = tid;
            if (c->pid <= 0) {
                c->pid = tid;
                c->ppid = ppid;
            }
        } else if (core && nh.n_type == NT_PRPSINFO && nh.n_descsz >= PRPSINFO_SIZE) {
            int32_t pid, ppid;
            memcpy(&pid, desc + PRPSINFO_PID, 4);
            memcpy(&ppid, desc + PRPSINFO_PPID, 4);
            c->pid = pid; /* the thread group leader: wins over a thread's pr_pid */
            c->ppid = ppid;
            memcpy(c->fname, desc + PRPSINFO_FNAME, 16);
            memcpy(c->psargs, desc + PRPSINFO_PSARGS, 80);
        } else if (core && nh.n_type == NT_AUXV && ((uintptr_t)desc & 7) == 0) {
            c->auxv = (const uint64_t *)(const void *)desc;
            c->n_auxv = nh.n_descsz / 16;
        } else if (core && nh.n_type == NT_FILE) {
            int r = parse_nt_file(c, desc, nh.n_descsz);
            if (r < 0)
                return r;
        }
        o = desc_at + (((size_t)nh.n_descsz + 3) & ~(size_t)3);
    }
    return 0;
}

static uint64_t auxv_get(const struct core *c, uint64_t type)
{
    for (size_t i = 0; i < c->n_auxv; i++)
        if (c->auxv[2 * i] == type)
            return c->auxv[2 * i + 1];
    return 0;
}

/* Headers, segments and notes. 0, or -errno with *err. */
static int parse_core(struct core *c, char **err)
{
    const unsigned char *img = c->img;
    if (c->size < EI_NIDENT || memcmp(img, ELFMAG, SELFMAG) != 0) {
        *err = hdx_asprintf("%s: not an ELF file, so not a core file", c->name);
        return -ENOEXEC;
    }
    if (img[EI_CLASS] != ELFCLASS64 || img[EI_DATA] != ELFDATA2LSB) {
        *err = hdx_asprintf("%s: a 32-bit or big-endian ELF file: only 64-bit little-endian cores "
                            "(x86-64, aarch64) are read", c->name);
        return -ENOTSUP;
    }
    Elf64_Ehdr eh;
    if (c->size < sizeof eh) {
        *err = hdx_asprintf("%s: truncated: %zu bytes, shorter than an ELF header", c->name, c->size);
        return -EBADMSG;
    }
    memcpy(&eh, img, sizeof eh);
    if (eh.e_type != ET_CORE) {
        *err = hdx_asprintf("%s: an ELF %s, not a core file; give the core of the hung process "
                            "(gcore PID, or the file the kernel wrote on a crash)",
                            c->name, eh.e_type == ET_EXEC ? "executable" : eh.e_type == ET_DYN ? "shared object or PIE executable"
                                                       : eh.e_type == ET_REL ? "object file" : "file");
        return -ENOEXEC;
    }
    if (eh.e_machine != EM_X86_64 && eh.e_machine != EM_AARCH64) {
        *err = hdx_asprintf("%s: a core of machine %u: only x86-64 and aarch64 cores are read", c->name, eh.e_machine);
        return -ENOTSUP;
    }
    uint64_t need = (uint64_t)eh.e_phoff + (uint64_t)eh.e_phnum * sizeof(Elf64_Phdr);
    if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0 || eh.e_phnum == PN_XNUM) {
        *err = hdx_asprintf("%s: malformed core: no usable program headers", c->name);
        return -EBADMSG;
    }
    if (eh.e_phoff > c->size || need > c->size) { /* e_phoff near 2^64 wraps need: test it alone too */
        *err = hdx_asprintf("%s: truncated core: its program headers end at byte %llu, the file has %zu "
                            "(the dump was cut short: disk full, or a core size limit such as 'ulimit -c')",
                            c->name, (unsigned long long)need, c->size);
        return -EBADMSG;
    }
    uint64_t promised = 0;
    int r;
    for (unsigned i = 0; i < eh.e_phnum; i++) {
        Elf64_Phdr ph;
        memcpy(&ph, img + eh.e_phoff + i * sizeof ph, sizeof ph);
        if (ph.p_filesz && ph.p_offset + ph.p_filesz > promised)
            promised = ph.p_offset + ph.p_filesz;
        if (ph.p_offset > c->size || ph.p_filesz > c->size - ph.p_offset)
            continue; /* checked as a whole below */
        if (ph.p_type == PT_LOAD) {
            struct seg *s = hdx_append((void **)&c->segs, &c->n_segs, sizeof *s);
            if (!s)
                return -ENOMEM;
            *s = (struct seg){ph.p_vaddr, ph.p_memsz, ph.p_filesz < ph.p_memsz ? ph.p_filesz : ph.p_memsz,
                              ph.p_offset, ph.p_flags};
        } else if (ph.p_type == PT_NOTE && (r = parse_notes(c, img + ph.p_offset, ph.p_filesz)) < 0) {
            if (r == -ENOMEM)
                return r;
            *err = hdx_asprintf("%s: malformed core: its notes (threads, mapped files) cannot be parsed", c->name);
            return r;
        }
    }
    if (promised > c->size) {
        *err = hdx_asprintf("%s: truncated core: the headers promise %llu bytes, the file has %zu (the dump was "
                            "cut short: disk full, or a core size limit such as 'ulimit -c'); take it again "
                            "with enough room",
                            c->name, (unsigned long long)promised, c->size);
        return -EBADMSG;
    }
    if (c->n_tids == 0) {
        *err = hdx_asprintf("%s: malformed core: no thread (NT_PRSTATUS) in its notes", c->name);
        return -EBADMSG;
    }
    if (c->n_segs == 0) {
        *err = hdx_asprintf("%s: malformed core: no memory (PT_LOAD segment) in it, so no stack to read", c->name);
        return -EBADMSG;
    }
    qsort(c->segs, c->n_segs, sizeof *c->segs, cmp_seg);
    return 0;
}

/* ------------------------------------------------- process description */

/* argv and envp of the initial stack: the auxv sits right above envp's NULL,
 * envp above argv's NULL, argc below argv[0] (the ELF ABI). */
static int read_initial_stack(struct core *c, hdx_process *p)
{
    uint64_t execfn = auxv_get(c, AT_EXECFN);
    const struct seg *s = execfn ? seg_of(c, execfn) : NULL;
    if (!s || c->n_auxv < 2 || execfn - s->vaddr >= s->filesz)
        return -ENOENT;
    uint64_t lo = execfn - s->vaddr > INITIAL_STACK_SCAN ? execfn - INITIAL_STACK_SCAN : s->vaddr;
    lo = (lo + 7) & ~(uint64_t)7;
    const unsigned char *base = c->img + s->offset + (lo - s->vaddr);
    size_t span = (size_t)(execfn - lo);
    uint64_t at = 0;
    for (size_t o = 0; o + 32 <= span; o += 8)
        if (!memcmp(base + o, c->auxv, 32)) {
            at = lo + o;
            break;
        }
    if (!at)
        return -ENOENT;
    uint64_t q = at - 16, v = 0; /* at - 8: envp's NULL */
    size_t n_env = 0;
    while (n_env < MAX_ARGS && q >= lo && core_read(c, q, &v, 8) == 0 && v != 0) {
        q -= 8;
        n_env++;
    }
    if (v != 0)
        return -ENOENT;
    uint64_t argv_null = q, env0 = q + 8;
    size_t argc = 0;
    q -= 8;
    while (argc < MAX_ARGS && q >= lo && core_read(c, q, &v, 8) == 0 && v >= 4096) {
        q -= 8;
        argc++;
    }
    if (v != argc || argc == 0)
        return -ENOENT;
    (void)argv_null;
    for (size_t i = 0; i < n_env; i++) {
        if (core_read(c, env0 + i * 8, &v, 8) < 0)
            continue;
        char *e = read_cstr(c, v, 32768);
        char *eq = e ? strchr(e, '=') : NULL;
        int r = 0;
        if (eq) {
            *eq = 0;
            r = hdx_process_set_env(p, e, eq + 1);
        }
        free(e);
        if (r < 0)
            return r;
    }
    char **argv = calloc(argc, sizeof *argv);
    if (!argv)
        return -ENOMEM;
    for (size_t i = 0; i < argc; i++) {
        if (core_read(c, q + 8 + i * 8, &v, 8) < 0 || !(argv[i] = read_cstr(c, v, 131072))) {
            for (size_t k = 0; k < i; k++)
                free(argv[k]);
            free(argv);
            return -ENOENT;
        }
    }
    p->cmdline = argv;
    p->n_cmdline = argc;
    return 0;
}

/* pr_psargs split at spaces: argv as far as the kernel kept it (80 bytes). */
static int cmdline_from_psargs(struct core *c, hdx_process *p)
{
    char *save = NULL;
    for (char *w = strtok_r(c->psargs, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
        char **slot = hdx_append((void **)&p->cmdline, &p->n_cmdline, sizeof *slot);
        if (!slot || !(*slot = strdup(w)))
            return -ENOMEM;
    }
    return 0;
}

/* --------------------------------------------------------- native stacks */

static char *debuginfo_path = NULL;
static const Dwfl_Callbacks core_callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .debuginfo_path = &debuginfo_path,
};

struct raw_stack {
    uint64_t pc[MAX_DEPTH];
    unsigned char exact[MAX_DEPTH]; /* innermost or interrupted by a signal: pc itself */
    int n;
};

static int frame_cb(Dwfl_Frame *state, void *arg)
{
    struct raw_stack *r = arg;
    Dwarf_Addr pc;
    bool act = false;
    if (!dwfl_frame_pc(state, &pc, &act) || pc == 0)
        return DWARF_CB_ABORT;
    r->pc[r->n] = pc;
    r->exact[r->n] = act;
    return ++r->n >= MAX_DEPTH ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* The module of a frame is the path of its mapping, as /proc/PID/maps names
 * it live (libdwfl may name it by its soname). */
static const char *mapped_path(const struct core *c, uint64_t pc)
{
    for (size_t i = 0; i < c->n_fmaps; i++)
        if (pc >= c->fmaps[i].start && pc < c->fmaps[i].end)
            return c->files[c->fmaps[i].file].path;
    return NULL;
}

static int symbolize(const struct core *c, Dwfl *d, hdx_frame *f, int exact)
{
    Dwarf_Addr addr = exact ? f->pc : f->pc - 1;
    Dwfl_Module *mod = dwfl_addrmodule(d, addr);
    if (!mod)
        return 0;
    Dwarf_Addr start = 0;
    const char *mname = dwfl_module_info(mod, NULL, &start, NULL, NULL, NULL, NULL, NULL);
    const char *mapped = mapped_path(c, f->pc);
    if (mapped)
        mname = mapped;
    if (mname && !(f->module = strdup(mname)))
        return -ENOMEM;
    GElf_Addr bias = 0;
    f->offset = f->pc - (dwfl_module_getelf(mod, &bias) ? bias : start);
    GElf_Off off = 0;
    GElf_Sym sym;
    const char *name = dwfl_module_addrinfo(mod, addr, &off, &sym, NULL, NULL, NULL);
    if (name && *name && !(f->function = hdx_symbol_clean_name(name)))
        return -ENOMEM;
    Dwfl_Line *line = dwfl_module_getsrc(mod, addr);
    int lineno = 0;
    const char *src = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    if (src) {
        if (!(f->file = strdup(src)))
            return -ENOMEM;
        f->line = lineno > 0 ? lineno : 0;
    }
    return 0;
}

struct missing {
    char *list;
    size_t len;
    int n;
};

static int module_cb(Dwfl_Module *mod, void **ud, const char *name, Dwarf_Addr start, void *arg)
{
    (void)ud;
    (void)start;
    struct missing *m = arg;
    GElf_Addr bias;
    if (dwfl_module_getelf(mod, &bias) || !name || name[0] != '/')
        return DWARF_CB_OK;
    m->n++;
    if (m->len < 600) {
        char *s = hdx_asprintf("%s%s", m->list ? m->list : "", name);
        char *t = s ? hdx_asprintf("%s, ", s) : NULL;
        free(s);
        if (t) {
            free(m->list);
            m->list = t;
            m->len = strlen(t);
        }
    }
    return DWARF_CB_OK;
}

static hdx_thread *thread_of(hdx_process *p, int tid)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    return NULL;
}

struct walk {
    struct core *c;
    Dwfl *d;
    hdx_process *p;
    int rc;
};

static int thread_cb(Dwfl_Thread *th, void *arg)
{
    struct walk *w = arg;
    hdx_thread *t = thread_of(w->p, (int)dwfl_thread_tid(th));
    struct raw_stack *raw = malloc(sizeof *raw);
    if (!raw) {
        w->rc = -ENOMEM;
        return DWARF_CB_ABORT;
    }
    raw->n = 0;
    if (t && dwfl_thread_getframes(th, frame_cb, raw) != 0 && raw->n == 0)
        t->stack_error = -EIO;
    for (int k = 0; t && k < raw->n; k++) {
        hdx_frame *f = hdx_thread_add_frame(t);
        if (!f || (f->kind = HDX_FRAME_NATIVE, f->pc = raw->pc[k], symbolize(w->c, w->d, f, raw->exact[k])) < 0) {
            w->rc = -ENOMEM;
            break;
        }
    }
    free(raw);
    return w->rc ? DWARF_CB_ABORT : DWARF_CB_OK;
}

/* The executable comes from NT_FILE (libdwfl checks its build id). */
static int native_stacks(struct core *c, int fd, hdx_process *p, hdx_evidence *ev)
{
    int rc = 0;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    Dwfl *d = elf ? dwfl_begin(&core_callbacks) : NULL;
    struct missing miss = {0};
    if (!elf || !d) {
        rc = elf && d ? -ENOMEM : 0;
        hdx_evidence_note(ev, "%s: no native stacks: %s", c->name, elf ? dwfl_errmsg(-1) : elf_errmsg(-1));
        goto out;
    }
    if (dwfl_core_file_report(d, elf, NULL) < 0 || dwfl_report_end(d, NULL, NULL) != 0) {
        hdx_evidence_note(ev, "%s: no native stacks: libdwfl cannot read the core's modules: %s", c->name,
                          dwfl_errmsg(-1));
        goto out;
    }
    int attached = dwfl_core_file_attach(d, elf) >= 0;
    if (!attached)
        hdx_evidence_note(ev, "%s: no native stacks: libdwfl cannot read the core's threads: %s", c->name,
                          dwfl_errmsg(-1));
    dwfl_getmodules(d, module_cb, &miss, 0);
    if (miss.n) {
        if (miss.len >= 2)
            miss.list[miss.len - 2] = 0;
        hdx_evidence_note(ev, "%s: %d file%s mapped by the process %s not on this machine, or not the same "
                              "build: %s%s; native frames in %s have no names and stacks may stop early — "
                              "analyze where the job's files are (same image), or copy them here",
                          c->name, miss.n, miss.n == 1 ? "" : "s", miss.n == 1 ? "is" : "are", miss.list,
                          miss.len >= 600 ? ", ..." : "", miss.n == 1 ? "it" : "them");
    }
    /* dwfl_getthreads, as eu-stack does: elfutils 0.188's dwfl_getthread_frames
     * leaks a little per thread. */
    struct walk w = {c, d, p, 0};
    if (attached && dwfl_getthreads(d, thread_cb, &w) != 0 && w.rc == 0 && dwfl_errno() != 0)
        hdx_evidence_note(ev, "%s: the native stacks stop early: %s", c->name, dwfl_errmsg(-1));
    rc = w.rc;
out:
    free(miss.list);
    if (d)
        dwfl_end(d);
    if (elf)
        elf_end(elf);
    return rc;
}

/* -------------------------------------------------------- Python frames */

static int python_frames(struct core *c, hdx_process *p, hdx_evidence *ev)
{
    hdx_map *maps = NULL;
    size_t n = 0;
    int rc = 0;
    /* Every segment, with the path and offset of the file it maps. */
    for (size_t i = 0; i < c->n_segs; i++) {
        const struct seg *s = &c->segs[i];
        hdx_map *m = hdx_append((void **)&maps, &n, sizeof *m);
        if (!m) {
            rc = -ENOMEM;
            goto out;
        }
        m->start = s->vaddr;
        m->end = s->vaddr + s->memsz;
        snprintf(m->perms, sizeof m->perms, "%c%c%cp", s->flags & PF_R ? 'r' : '-', s->flags & PF_W ? 'w' : '-',
                 s->flags & PF_X ? 'x' : '-');
        for (size_t k = 0; k < c->n_fmaps; k++) {
            const struct fmap *f = &c->fmaps[k];
            if (s->vaddr >= f->start && s->vaddr < f->end) {
                m->offset = f->off + (s->vaddr - f->start);
                if (!(m->path = strdup(c->files[f->file].path))) {
                    rc = -ENOMEM;
                    goto out;
                }
                break;
            }
        }
    }
    hdx_pymem mem = {&core_mem_ops, c};
    char *perr = NULL;
    hdx_pyproc *py = hdx_py_attach_mem(0, &mem, maps, n, "", &perr);
    if (!py) {
        int e = errno;
        const char *gone = NULL;
        for (size_t i = 0; i < c->n_files && !gone; i++) {
            const char *b = strrchr(c->files[i].path, '/');
            if (strstr(b ? b + 1 : c->files[i].path, "python") && access(c->files[i].path, R_OK) != 0)
                gone = c->files[i].path;
        }
        if (gone)
            hdx_evidence_note(ev, "%s: Python frames not read: %s is not on this machine — analyze where the "
                                  "job's interpreter is",
                              c->name, gone);
        else if (e != ENOENT)
            hdx_evidence_note(ev, "%s: Python frames not read: %s", c->name, perr ? perr : strerror(e));
        free(perr);
        rc = e == ENOMEM ? -ENOMEM : 0;
        goto out;
    }
    int v = hdx_py_version(py);
    p->python = hdx_asprintf("%d.%d %s", v >> 8, v & 0xff, hdx_py_binary(py));
    hdx_py_sample s = {0};
    int r = hdx_py_read(py, HDX_PY_LOCALS, &s);
    if (r < 0 && r != -ENOMEM)
        hdx_evidence_note(ev, "%s: Python frames not read: the interpreter's state is not in the core (%s)",
                          c->name, strerror(-r));
    if (r == 0 && s.partial)
        hdx_evidence_note(ev, "%s: some Python thread lists are cut short", c->name);
    for (size_t i = 0; r == 0 && i < s.n_threads; i++) {
        hdx_py_thread *pt = &s.threads[i];
        if (pt->partial)
            hdx_evidence_note(ev, "%s: the Python stack of thread %d is partial (%s)", c->name, pt->tid,
                              strerror(-pt->partial));
        hdx_thread *t = pt->tid >= 0 ? thread_of(p, pt->tid) : NULL;
        if (!t) {
            if (!(t = hdx_process_add_thread(p))) {
                r = -ENOMEM;
                break;
            }
            t->tid = pt->tid;
        }
        r = hdx_merge_stacks(t, pt->frames, pt->n_frames, pt->is_entry);
        pt->frames = NULL;
        pt->n_frames = 0;
    }
    if (r == 0)
        r = hdx_sample_pgroups(py, p, ev);
    hdx_py_sample_clear(&s);
    hdx_py_detach(py);
    rc = r == -ENOMEM || !p->python ? -ENOMEM : 0;
out:
    hdx_maps_free(maps, n);
    return rc;
}

/* A FileBaton wait under cpp_extension._jit_compile: its lock, as locks.c
 * finds it live (which skips processes that are gone). */
static int baton_locks(hdx_process *p, hdx_evidence *ev)
{
    for (size_t i = 0; i < p->n_threads; i++) {
        hdx_thread *t = &p->threads[i];
        size_t at = 0;
        if (!hdx_thread_find_python(t, HDX_FILEBATON_WAIT, HDX_FILEBATON_FILE, &at))
            continue;
        const hdx_frame *jit = hdx_thread_find_python(t, HDX_FILEBATON_CALLER, HDX_FILEBATON_CALLER_FILE, &at);
        const hdx_local *dir = hdx_frame_local(jit, "build_directory");
        if (!dir || dir->kind != HDX_VAL_STR || !dir->s || dir->s[0] != '/')
            continue; /* no cwd in a core: only an absolute build directory names the lock */
        char *path = hdx_asprintf("%s/lock", dir->s);
        if (!path)
            return -ENOMEM;
        hdx_lock *l = hdx_evidence_find_lock(ev, path);
        if (!l && (l = hdx_evidence_add_lock(ev)) && !(l->path = path, path = NULL, l->source = strdup("Python frame")))
            l = NULL;
        free(path);
        if (!l)
            return -ENOMEM;
        l->kind = HDX_LOCK_BATON;
        hdx_waiter *w = hdx_lock_add_waiter(l);
        if (!w || !(w->how = strdup(HDX_FILEBATON_WAIT)))
            return -ENOMEM;
        w->pid = p->pid;
        w->tid = t->tid;
        w->rank = p->rank;
    }
    return 0;
}

/* ---------------------------------------------------------------- load */

int hdx_core_sniff(const void *head, size_t n)
{
    const unsigned char *h = head;
    if (n < 4 || memcmp(h, ELFMAG, SELFMAG) != 0)
        return 0;
    if (n < EI_NIDENT + 2)
        return 2;
    uint16_t type = h[EI_DATA] == ELFDATA2MSB ? (uint16_t)(h[16] << 8 | h[17]) : (uint16_t)(h[16] | h[17] << 8);
    return type == ET_CORE ? 1 : 2;
}

static int cmp_tid(const void *a, const void *b)
{
    const hdx_thread *x = a, *y = b;
    return (x->tid > y->tid) - (x->tid < y->tid);
}

int hdx_core_load(const char *path, hdx_evidence *ev, char **err)
{
    struct core c = {.name = path, .pid = HDX_UNKNOWN, .ppid = HDX_UNKNOWN};
    hdx_evidence *one = NULL;
    char *merr = NULL;
    int fd = -1, r;
    struct stat st;
    *err = NULL;
    elf_version(EV_CURRENT);
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0 || fstat(fd, &st) < 0) {
        r = -errno;
        *err = hdx_asprintf("%s: cannot read: %s", path, strerror(-r));
        goto out;
    }
    c.size = (size_t)st.st_size;
    if (c.size < EI_NIDENT) {
        r = -ENOEXEC;
        *err = hdx_asprintf("%s: not an ELF file, so not a core file", path);
        goto out;
    }
    c.img = mmap(NULL, c.size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (c.img == MAP_FAILED) {
        c.img = NULL;
        r = -errno;
        *err = hdx_asprintf("%s: cannot map: %s", path, strerror(-r));
        goto out;
    }
    if ((r = parse_core(&c, err)) < 0)
        goto out;

    r = -ENOMEM;
    if (!(one = hdx_evidence_new()))
        goto out;
    one->live = 0;
    one->samples = 0;
    hdx_process *p = hdx_evidence_add_process(one);
    if (!p)
        goto out;
    p->pid = c.pid;
    p->ppid = c.ppid;
    p->alive = HDX_UNKNOWN; /* it was alive when dumped (gcore), or died with this core: the classifier judges its stacks either way */
    p->state = 0;
    for (size_t i = 0; i < c.n_tids; i++) {
        if (thread_of(p, c.tids[i]))
            continue;
        hdx_thread *t = hdx_process_add_thread(p);
        if (!t)
            goto out;
        t->tid = c.tids[i];
        t->syscall = HDX_SYSCALL_UNKNOWN;
    }
    /* The main thread first, then by TID, as /proc/PID/task lists them. */
    qsort(p->threads, p->n_threads, sizeof *p->threads, cmp_tid);
    for (size_t i = 1; i < p->n_threads; i++)
        if (p->threads[i].tid == p->pid) {
            hdx_thread main_t = p->threads[i];
            memmove(&p->threads[1], &p->threads[0], i * sizeof *p->threads);
            p->threads[0] = main_t;
        }
    /* The file mapped at the entry point is what /proc/PID/exe names live
     * (symbolic links resolved); AT_EXECFN is the name given to execve. */
    uint64_t entry = auxv_get(&c, AT_ENTRY), execfn = auxv_get(&c, AT_EXECFN);
    for (size_t i = 0; entry && i < c.n_fmaps && !p->exe; i++)
        if (entry >= c.fmaps[i].start && entry < c.fmaps[i].end && !(p->exe = strdup(c.files[c.fmaps[i].file].path)))
            goto out;
    if (!p->exe && execfn)
        p->exe = read_cstr(&c, execfn, 4096);
    if (!p->exe && c.n_fmaps && !(p->exe = strdup(c.files[c.fmaps[0].file].path)))
        goto out;
    int stack_r = read_initial_stack(&c, p);
    if ((r = stack_r) == -ENOMEM || (r == -ENOENT && (r = cmdline_from_psargs(&c, p)) < 0))
        goto out;
    if (stack_r < 0)
        hdx_evidence_note(one, "%s: the environment of pid %d could not be read from its initial stack: its "
                               "rank is unknown",
                          path, p->pid);
    hdx_evidence_note(one, "%s: a core file does not say which host it was taken on (host unknown); its "
                           "threads' states, CPU time and lock files are not in it",
                      path);

    if ((r = native_stacks(&c, fd, p, one)) < 0 || (r = python_frames(&c, p, one)) < 0 ||
        (r = baton_locks(p, one)) < 0)
        goto out;
    for (size_t i = 0; i < c.n_files; i++) {
        const struct bfile *f = &c.files[i];
        if (!f->used)
            continue;
        if (f->state == F_MISMATCH)
            hdx_evidence_note(one, "%s: pages the core lacks were not read from %s: this machine's file is another "
                                   "build (%s) — Python frames may be missing; analyze with the job's files",
                              path, f->path, f->why);
        else if (f->state == F_MISSING)
            hdx_evidence_note(one, "%s: pages the core lacks could not be read from %s: not on this machine",
                              path, f->path);
        else if (f->state == F_MATCH)
            hdx_evidence_note(one, "%s: pages the core lacks were read from %s on this machine (same build id)",
                              path, f->path);
        else if (f->state == F_UNVERIFIED)
            hdx_evidence_note(one, "%s: pages the core lacks were read from %s without a build id check (%s)",
                              path, f->path, f->why);
    }
    if ((r = hdx_evidence_merge(ev, one, &merr)) < 0)
        *err = hdx_asprintf("%s: %s", path, merr ? merr : strerror(-r));
out:
    if (r == -ENOMEM && !*err)
        *err = hdx_asprintf("%s: out of memory", path);
    free(merr);
    hdx_evidence_free(one);
    for (size_t i = 0; i < c.n_files; i++) {
        if (c.files[i].fd >= 0)
            close(c.files[i].fd);
        free(c.files[i].path);
    }
    free(c.files);
    free(c.fmaps);
    free(c.segs);
    free(c.tids);
    if (c.img)
        munmap(c.img, c.size);
    if (fd >= 0)
        close(fd);
    return r;
}
