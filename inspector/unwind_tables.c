#include "unwind_tables.h"

#include <dwarf.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libunwind-ptrace.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "python.h"
#include "util.h"

/* libunwind's binary search of an .eh_frame_hdr table (src/dwarf/Gfind_proc_info-lsb.c),
 * exported by libunwind-x86_64 (the library behind -lunwind-generic) but not declared in
 * its public headers; _UPT_find_proc_info calls it with the same unw_dyn_info_t. */
#define hdx_dwarf_search_unwind_table UNW_OBJ(dwarf_search_unwind_table)
extern int hdx_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip, unw_dyn_info_t *di,
                                         unw_proc_info_t *pi, int need_unwind_info, void *arg);

/* One ELF image of the process: where it lies and its search table. */
struct image {
    const char *path;  /* borrowed from the maps */
    unw_dyn_info_t di; /* start_ip/end_ip: the image's PT_LOAD range; format -1: no usable table */
};

struct hdx_unwind_tables {
    int pid;
    const hdx_pymap *maps; /* borrowed; sorted by address, as /proc lists them */
    size_t n_maps;
    struct image *images;
    size_t n_images;
    size_t fallbacks;
};

hdx_unwind_tables *hdx_unwind_tables_new(int pid, const hdx_pymap *maps, size_t n_maps)
{
    hdx_unwind_tables *t = calloc(1, sizeof *t);
    if (!t)
        return NULL;
    t->pid = pid;
    t->maps = maps;
    t->n_maps = n_maps;
    if (elf_version(EV_CURRENT) == EV_NONE) {
        hdx_unwind_tables_free(t);
        errno = EIO;
        return NULL;
    }
    return t;
}

void hdx_unwind_tables_free(hdx_unwind_tables *t)
{
    if (!t)
        return;
    free(t->images);
    free(t);
}

size_t hdx_unwind_tables_fallbacks(const hdx_unwind_tables *t)
{
    return t ? t->fallbacks : 0;
}

size_t hdx_unwind_tables_images(const hdx_unwind_tables *t)
{
    return t ? t->n_images : 0;
}

static const hdx_pymap *map_of(const hdx_unwind_tables *t, uint64_t ip)
{
    size_t lo = 0, hi = t->n_maps;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (ip < t->maps[mid].start)
            hi = mid;
        else if (ip >= t->maps[mid].end)
            lo = mid + 1;
        else
            return &t->maps[mid];
    }
    return NULL;
}

/* Bytes of a value in DWARF pointer encoding enc (its format, low nibble); 0 for omit or
 * an encoding of no fixed size (LEB128), which the caller does not handle. */
static size_t enc_size(unsigned enc)
{
    if (enc == DW_EH_PE_omit)
        return 0;
    switch (enc & 0x0f) {
    case DW_EH_PE_absptr: return 8;
    case DW_EH_PE_udata2: case DW_EH_PE_sdata2: return 2;
    case DW_EH_PE_udata4: case DW_EH_PE_sdata4: return 4;
    case DW_EH_PE_udata8: case DW_EH_PE_sdata8: return 8;
    default: return 0;
    }
}

int hdx_unwind_table_locate(Elf *elf, uint64_t map_start, uint64_t map_offset, uint64_t ip, unw_dyn_info_t *di)
{
    size_t phnum = 0;
    GElf_Ehdr eh;
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64 ||
        elf_getphdrnum(elf, &phnum) != 0 || ip < map_start)
        return -ENOENT;
    /* the load bias from the segment that holds ip's file offset */
    uint64_t foff = map_offset + (ip - map_start), lo = UINT64_MAX, hi = 0, bias = 0;
    int have_bias = 0;
    GElf_Phdr eh_frame = {0};
    for (size_t i = 0; i < phnum && i <= INT_MAX; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph))
            return -ENOENT;
        if (ph.p_type == PT_GNU_EH_FRAME)
            eh_frame = ph;
        if (ph.p_type != PT_LOAD || ph.p_vaddr + ph.p_memsz < ph.p_vaddr)
            continue;
        if (ph.p_vaddr < lo)
            lo = ph.p_vaddr;
        if (ph.p_vaddr + ph.p_memsz > hi)
            hi = ph.p_vaddr + ph.p_memsz;
        if (!have_bias && foff >= ph.p_offset && foff - ph.p_offset < ph.p_filesz) {
            bias = ip - (ph.p_vaddr + (foff - ph.p_offset)); /* modulo 2^64, as addresses are */
            have_bias = 1;
        }
    }
    if (!have_bias || eh_frame.p_type != PT_GNU_EH_FRAME || lo >= hi)
        return -ENOENT;
    /* version, eh_frame_ptr_enc, fde_count_enc, table_enc, then eh_frame_ptr and fde_count */
    Elf_Data *d = elf_getdata_rawchunk(elf, (int64_t)eh_frame.p_offset,
                                       eh_frame.p_filesz < 20 ? eh_frame.p_filesz : 20, ELF_T_BYTE);
    if (!d || d->d_size < 4)
        return -ENOENT;
    const unsigned char *h = d->d_buf;
    size_t ptr_size = enc_size(h[1]), count_size = enc_size(h[2]);
    /* libunwind searches only a table of (sdata4, sdata4) pairs relative to the header */
    if (h[0] != 1 || h[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4) || (h[1] != DW_EH_PE_omit && !ptr_size) ||
        !count_size || (h[2] & 0x70) != DW_EH_PE_absptr || 4 + ptr_size + count_size > d->d_size)
        return -ENOENT;
    uint64_t fde_count = 0;
    const unsigned char *c = h + 4 + ptr_size;
    switch (count_size) {
    case 2: { uint16_t v; memcpy(&v, c, 2); fde_count = v; break; }
    case 4: { uint32_t v; memcpy(&v, c, 4); fde_count = v; break; }
    default: memcpy(&fde_count, c, 8); break;
    }
    /* the table (8 bytes an FDE) must lie inside the segment */
    if (fde_count == 0 || fde_count > eh_frame.p_memsz / 8 ||
        4 + ptr_size + count_size + fde_count * 8 > eh_frame.p_memsz)
        return -ENOENT;
    memset(di, 0, sizeof *di);
    di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
    di->start_ip = lo + bias;
    di->end_ip = hi + bias;
    /* gp (DT_PLTGOT) only serves DW_EH_PE_datarel pointers in FDEs, which x86-64 never has */
    di->gp = 0;
    di->u.rti.name_ptr = 0;
    di->u.rti.segbase = eh_frame.p_vaddr + bias;
    di->u.rti.table_data = di->u.rti.segbase + 4 + ptr_size + count_size;
    di->u.rti.table_len = fde_count * 8 / sizeof(unw_word_t);
    return 0;
}

/* The table of the image that m maps (ip inside it), from its file read through
 * /proc/PID/root. 0 or -ENOENT. */
static int locate_table(const hdx_unwind_tables *t, const hdx_pymap *m, uint64_t ip, unw_dyn_info_t *di)
{
    char path[PATH_MAX + 32];
    int n = snprintf(path, sizeof path, "/proc/%d/root%s", t->pid, m->path);
    if (n <= 0 || (size_t)n >= sizeof path)
        return -ENOENT;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -ENOENT;
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    int rc = hdx_unwind_table_locate(elf, m->start, m->offset, ip, di);
    elf_end(elf);
    close(fd);
    return rc;
}

/* The image of m that holds ip, located the first time; NULL on ENOMEM. */
static const struct image *image_of(hdx_unwind_tables *t, const hdx_pymap *m, uint64_t ip)
{
    for (size_t i = 0; i < t->n_images; i++) {
        const struct image *im = &t->images[i];
        if ((im->path == m->path || strcmp(im->path, m->path) == 0) && ip >= im->di.start_ip &&
            ip < im->di.end_ip)
            return im;
    }
    struct image *im = hdx_append((void **)&t->images, &t->n_images, sizeof *t->images);
    if (!im)
        return NULL;
    im->path = m->path;
    if (locate_table(t, m, ip, &im->di) < 0) {
        /* remember the miss for this mapping only: the fallback handles it */
        memset(&im->di, 0, sizeof im->di);
        im->di.format = -1;
        im->di.start_ip = m->start;
        im->di.end_ip = m->end;
    }
    return im;
}

int hdx_unwind_tables_find(hdx_unwind_tables *t, unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                           int need_unwind_info, void *upt)
{
    const hdx_pymap *m = t ? map_of(t, ip) : NULL;
    if (m && !m->path)
        return -UNW_ENOINFO; /* anonymous memory: no ELF image, as _UPT_find_proc_info finds */
    const struct image *im = NULL;
    if (m && m->path[0] == '/' && !strstr(m->path, " (deleted)"))
        im = image_of(t, m, ip);
    if (!im || im->di.format == -1 || ip < im->di.start_ip || ip >= im->di.end_ip) {
        if (t)
            t->fallbacks++;
        return _UPT_find_proc_info(as, ip, pi, need_unwind_info, upt);
    }
    unw_dyn_info_t di = im->di; /* libunwind takes it non-const */
    return hdx_dwarf_search_unwind_table(as, ip, &di, pi, need_unwind_info, upt);
}
