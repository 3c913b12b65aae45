/*
 * Finding CPython's _PyRuntime in the target's mapped ELF files with libelf
 * (docs/python-frames.md "Where _PyRuntime is", "Load bias"), and the version helpers that need no target
 * memory (docs/python-frames.md "The version").
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python/pyimpl.h"

static const char *base_name(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

typedef struct elf_hit {
    int found;
    uint64_t runtime;    /* st_value or sh_addr, unrelocated */
    uint64_t py_version_vaddr;
    uint32_t py_version;
    uint64_t first_load; /* p_vaddr of the first PT_LOAD, aligned down */
} elf_hit;

/* The 4 low bytes at vaddr in the file image (a PROGBITS section), or 0. */
static uint32_t read_file_u32(Elf *e, uint64_t vaddr)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type == SHT_NOBITS || !(sh.sh_flags & SHF_ALLOC))
            continue;
        if (vaddr < sh.sh_addr || vaddr + 4 > sh.sh_addr + sh.sh_size)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d || !d->d_buf || vaddr - sh.sh_addr + 4 > d->d_size)
            return 0;
        uint32_t v;
        memcpy(&v, (const char *)d->d_buf + (vaddr - sh.sh_addr), 4);
        return v;
    }
    return 0;
}

/* Look for name (defined) in the symbol tables of one type. */
static int find_sym(Elf *e, Elf64_Word type, const char *name, uint64_t *value)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != type || !sh.sh_entsize)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        if (!d)
            continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < n; i++) {
            GElf_Sym sym;
            if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF)
                continue;
            const char *s = elf_strptr(e, sh.sh_link, sym.st_name);
            if (s && !strcmp(s, name)) {
                *value = sym.st_value;
                return 1;
            }
        }
    }
    return 0;
}

static int analyze_elf(const char *file, elf_hit *h)
{
    memset(h, 0, sizeof *h);
    int fd = open(file, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    int rc = 0;
    Elf *e = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!e || elf_kind(e) != ELF_K_ELF || gelf_getclass(e) != ELFCLASS64) {
        rc = -ENOEXEC;
        goto out;
    }
    size_t nph = 0;
    if (elf_getphdrnum(e, &nph))
        nph = 0;
    int have_load = 0;
    for (size_t i = 0; i < nph; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_LOAD) {
            uint64_t align = ph.p_align ? ph.p_align : 1;
            h->first_load = ph.p_vaddr - ph.p_vaddr % align;
            have_load = 1;
            break;
        }
    }
    if (!have_load) {
        rc = -ENOEXEC;
        goto out;
    }
    /* _PyRuntime: .dynsym, then .symtab, then the .PyRuntime section. */
    if (find_sym(e, SHT_DYNSYM, "_PyRuntime", &h->runtime) ||
        find_sym(e, SHT_SYMTAB, "_PyRuntime", &h->runtime)) {
        h->found = 1;
    } else {
        size_t shstrndx;
        if (!elf_getshdrstrndx(e, &shstrndx)) {
            Elf_Scn *scn = NULL;
            while ((scn = elf_nextscn(e, scn))) {
                GElf_Shdr sh;
                const char *nm;
                if (gelf_getshdr(scn, &sh) && (nm = elf_strptr(e, shstrndx, sh.sh_name)) &&
                    !strcmp(nm, ".PyRuntime") && sh.sh_addr) {
                    h->runtime = sh.sh_addr;
                    h->found = 1;
                    break;
                }
            }
        }
    }
    if (h->found && (find_sym(e, SHT_DYNSYM, "Py_Version", &h->py_version_vaddr) ||
                     find_sym(e, SHT_SYMTAB, "Py_Version", &h->py_version_vaddr)))
        h->py_version = read_file_u32(e, h->py_version_vaddr);
out:
    if (e)
        elf_end(e);
    close(fd);
    return rc;
}

int hdx_pyfind_runtime(const hdx_map *maps, size_t n, int pid, const char *root, hdx_pyfound *f)
{
    memset(f, 0, sizeof *f);
    if (elf_version(EV_CURRENT) == EV_NONE)
        return -ENOEXEC;
    for (size_t i = 0; i < n; i++) {
        const hdx_map *m = &maps[i];
        if (!m->path || m->path[0] != '/' || m->offset != 0 || !strstr(base_name(m->path), "python"))
            continue;
        /* Only the first offset-0 mapping of each file. */
        int seen = 0;
        for (size_t j = 0; j < i && !seen; j++)
            seen = maps[j].path && maps[j].offset == 0 && !strcmp(maps[j].path, m->path);
        if (seen)
            continue;
        char path[PATH_MAX];
        if (hdx_map_file(pid, root, m, path, sizeof path))
            continue;
        elf_hit h;
        if (analyze_elf(path, &h) || !h.found)
            continue;
        f->path = strdup(m->path);
        if (!f->path)
            return -ENOMEM;
        f->bias = m->start - h.first_load;
        f->runtime = h.runtime + f->bias;
        f->py_version_addr = h.py_version_vaddr ? h.py_version_vaddr + f->bias : 0;
        f->py_version = h.py_version;
        return 0;
    }
    return -ENOENT;
}

int hdx_pyversion_from_name(const char *path)
{
    if (!path)
        return 0;
    const char *b = base_name(path);
    const char *p = strstr(b, "python3.");
    if (!p)
        return 0;
    p += strlen("python3.");
    int minor = 0, digits = 0;
    while (*p >= '0' && *p <= '9' && digits < 3) {
        minor = minor * 10 + (*p++ - '0');
        digits++;
    }
    if (!digits || (*p >= '0' && *p <= '9'))
        return 0;
    return 0x0300 | minor;
}

int hdx_pyversion_from_text(const uint8_t *buf, size_t len)
{
    /* "3.<minor>.<micro>[suffix] (" at the start of a string, e.g. Py_GetVersion()'s
     * "3.8.18 (default, May  9 2026, 07:33:04) \n[GCC 12.2.0]". */
    for (size_t i = 0; i + 8 < len; i++) {
        if (buf[i] != '3' || buf[i + 1] != '.' ||
            (i > 0 && ((buf[i - 1] >= '0' && buf[i - 1] <= '9') || buf[i - 1] == '.')))
            continue;
        size_t j = i + 2;
        int minor = 0, d = 0;
        while (j < len && buf[j] >= '0' && buf[j] <= '9' && d < 3)
            minor = minor * 10 + (buf[j++] - '0'), d++;
        if (!d || j >= len || buf[j] != '.')
            continue;
        j++;
        d = 0;
        while (j < len && buf[j] >= '0' && buf[j] <= '9' && d < 3)
            j++, d++;
        if (!d)
            continue;
        /* a release suffix: a1, b2, rc1, +, ... */
        int s = 0;
        while (j < len && s < 8 && ((buf[j] >= 'a' && buf[j] <= 'z') || (buf[j] >= '0' && buf[j] <= '9') || buf[j] == '+'))
            j++, s++;
        if (j + 1 < len && buf[j] == ' ' && buf[j + 1] == '(')
            return 0x0300 | minor;
    }
    return 0;
}
