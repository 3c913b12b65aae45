#include "native/unwind_tables.h"

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

#include "native/maps.h"
#include "model/util.h"

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
    const hdx_map *maps; /* borrowed; sorted by address, as /proc lists them */
    size_t n_maps;
    struct image *images;
    size_t n_images;
    size_t fallbacks;
};

hdx_unwind_tables *hdx_unwind_tables_new(int pid, const hdx_map *maps, size_t n_maps)
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

static const hdx_map *map_of(const hdx_unwind_tables *t, uint64_t ip)
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

/* The table of the image that m maps (ip inside it), from its file as hdx_map_file finds
 * it (a container's through /proc/PID/root, a chroot's by the path the maps show). 0 or -ENOENT. */
static int locate_table(const hdx_unwind_tables *t, const hdx_map *m, uint64_t ip, unw_dyn_info_t *di)
{
    char path[PATH_MAX + 64], root[64];
    snprintf(root, sizeof root, "/proc/%d/root", t->pid);
    if (hdx_map_file(t->pid, root, m, path, sizeof path))
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
static const struct image *image_of(hdx_unwind_tables *t, const hdx_map *m, uint64_t ip)
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
    const hdx_map *m = t ? map_of(t, ip) : NULL;
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

/* ---- the frame of a frame-pointer function, from its first instructions ---------------- */

/* The bytes of a ModRM operand (the ModRM byte, SIB and displacement) at m[0..left), 0 when
 * they do not fit. */
static size_t modrm_len(const unsigned char *m, size_t left)
{
    if (left < 1)
        return 0;
    unsigned mod = m[0] >> 6, rm = m[0] & 7;
    size_t n = 1;
    if (mod != 3 && rm == 4) { /* SIB */
        if (left < 2)
            return 0;
        n = 2;
        if (mod == 0 && (m[1] & 7) == 5)
            n += 4;
    } else if (mod == 0 && rm == 5) {
        n += 4; /* rip-relative */
    }
    if (mod == 1)
        n += 1;
    else if (mod == 2)
        n += 4;
    return n <= left ? n : 0;
}

/* A little-endian signed immediate of n bytes (1 or 4). */
static long imm_at(const unsigned char *b, size_t n)
{
    if (n == 1)
        return (signed char)b[0];
    return (int32_t)((uint32_t)b[0] | (uint32_t)b[1] << 8 | (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24);
}

long hdx_x86_fp_frame_size(const unsigned char *code, size_t len)
{
    size_t i = 0;
    int moved = 0;
    long below = 0; /* bytes rsp went down after mov %rsp,%rbp */
    while (i < len) {
        const unsigned char *c = code + i;
        size_t left = len - i, p = 0;
        int opsize16 = 0;
        while (p < left && (c[p] == 0x66 || c[p] == 0xf2 || c[p] == 0xf3 || c[p] == 0xf0 || c[p] == 0x2e ||
                            c[p] == 0x3e || c[p] == 0x64 || c[p] == 0x65)) {
            opsize16 |= c[p] == 0x66;
            p++;
        }
        unsigned rex = p < left && (c[p] & 0xf0) == 0x40 ? c[p++] : 0;
        if (p >= left)
            return -1;
        unsigned op = c[p++];
        int w = (rex & 8) != 0, r_ext = (rex & 4) != 0, b_ext = (rex & 1) != 0;
        size_t iz = opsize16 ? 2 : 4; /* an operand-size immediate */
        /* Control transfers: after the mov they end the prologue (call, jmp, jcc, ret, int3,
         * syscall); before it they are the early exits of a shrink-wrapped function, read
         * through (rsp and rbp before the mov do not matter: rbp is rsp there). */
        size_t rel = op == 0xe8 || op == 0xe9 ? 4 : op == 0xeb || (op >= 0x70 && op <= 0x7f) ? 1 : 0;
        if (op == 0x0f && p < left && c[p] >= 0x80 && c[p] <= 0x8f)
            rel = 5; /* jcc rel32, after its second opcode byte */
        if (rel || op == 0xc3 || op == 0xcc || (op == 0x0f && p < left && c[p] == 0x05)) {
            if (moved)
                return below;
            i += p + (rel ? rel : op == 0x0f ? 1 : 0);
            continue;
        }
        if (op == 0xff && p < left && ((c[p] >> 3) & 7) >= 2 && ((c[p] >> 3) & 7) <= 5) {
            size_t m = modrm_len(c + p, left - p); /* indirect call or jmp */
            if (moved || !m)
                return moved ? below : -1;
            i += p + m;
            continue;
        }
        if ((op >= 0x50 && op <= 0x57) || op == 0x6a || op == 0x68) { /* push */
            if (moved)
                below += 8;
            i += p + (op == 0x6a ? 1 : op == 0x68 ? 4 : 0);
            continue;
        }
        if (op >= 0x58 && op <= 0x5f && !moved) { /* pop, on an early exit */
            i += p;
            continue;
        }
        if (op == 0x0f && p + 1 < left && c[p] == 0x1e && c[p + 1] == 0xfa) {
            i += p + 2; /* endbr64 (its f3 read as a prefix) */
            continue;
        }
        if (w && !r_ext && !b_ext && p < left &&
            ((op == 0x89 && c[p] == 0xe5) || (op == 0x8b && c[p] == 0xec))) { /* mov %rsp,%rbp */
            if (moved)
                return -1;
            moved = 1;
            i += p + 1;
            continue;
        }
        if ((op == 0x81 || op == 0x83) && w && !b_ext && p < left && (c[p] == 0xec || c[p] == 0xc4)) {
            /* sub/add $imm, %rsp: after the mov, that sets the frame (what follows is the body,
             * where a push is a call's) */
            size_t n = op == 0x83 ? 1 : 4;
            if (!moved || p + 1 + n > left)
                return -1;
            long v = imm_at(c + p + 1, n);
            below += c[p] == 0xec ? v : -v;
            return below >= 0 ? below : -1;
        }
        size_t imm = 0;
        int has_modrm = 1, writes_reg = 0, writes_rm = 0;
        if (op == 0x0f) {
            if (p >= left)
                return -1;
            unsigned op2 = c[p++];
            if (op2 == 0x1f || op2 == 0x18) {
                /* nop r/m, prefetch */
            } else if ((op2 >= 0x10 && op2 <= 0x17) || (op2 >= 0x28 && op2 <= 0x2f) ||
                       (op2 >= 0x50 && op2 <= 0x7f && op2 != 0x77) || (op2 >= 0xd0 && op2 <= 0xfe) ||
                       op2 == 0xc2 || op2 == 0xc6) {
                /* SSE: an xmm register and r/m; those that may write r/m (a store, movd/movq to a
                 * general register) count as writing it */
                writes_rm = op2 == 0x11 || op2 == 0x13 || op2 == 0x17 || op2 == 0x29 || op2 == 0x2b ||
                            op2 == 0x7e || op2 == 0x7f || op2 == 0xd6 || op2 == 0xe7;
                imm = op2 == 0xc2 || op2 == 0xc6 || (op2 >= 0x70 && op2 <= 0x73) ? 1 : 0;
            } else if ((op2 >= 0x40 && op2 <= 0x4f) || op2 == 0xaf || op2 == 0xb6 || op2 == 0xb7 ||
                       op2 == 0xbe || op2 == 0xbf) {
                writes_reg = 1; /* cmov, imul, movzx, movsx */
            } else if (op2 >= 0x90 && op2 <= 0x9f) {
                writes_rm = 1; /* setcc */
            } else {
                return -1;
            }
        } else if (op < 0x40 && (op & 7) < 4) { /* add, or, adc, sbb, and, sub, xor, cmp */
            int cmp = (op & 0x38) == 0x38;
            writes_rm = !cmp && (op & 2) == 0;
            writes_reg = !cmp && (op & 2) != 0;
        } else if (op < 0x40 && ((op & 7) == 4 || (op & 7) == 5)) { /* the same on al/eax, imm */
            has_modrm = 0;
            imm = (op & 7) == 4 ? 1 : iz;
        } else if (op == 0x63 || op == 0x8d || op == 0x8a || op == 0x8b) {
            writes_reg = 1; /* movsxd, lea, mov r/m to reg */
        } else if (op == 0x69 || op == 0x6b) {
            writes_reg = 1; /* imul */
            imm = op == 0x6b ? 1 : iz;
        } else if (op == 0x84 || op == 0x85) {
            /* test */
        } else if (op == 0x86 || op == 0x87) {
            writes_reg = writes_rm = 1; /* xchg */
        } else if (op == 0x88 || op == 0x89) {
            writes_rm = 1; /* mov reg to r/m */
        } else if (op == 0x90 || op == 0x98 || op == 0x99) {
            has_modrm = 0; /* nop, cdqe, cqo */
        } else if (op >= 0xb0 && op <= 0xbf) { /* mov imm, reg */
            has_modrm = 0;
            unsigned reg = (op & 7) | (b_ext ? 8 : 0);
            if (reg == 4 || reg == 5)
                return -1; /* rsp or rbp */
            imm = op < 0xb8 ? 1 : w ? 8 : iz;
        } else if (op == 0x80 || op == 0x81 || op == 0x83) { /* op imm, r/m */
            if (p >= left)
                return -1;
            writes_rm = ((c[p] >> 3) & 7) != 7; /* but cmp */
            imm = op == 0x81 ? iz : 1;
        } else if (op == 0xc6 || op == 0xc7) { /* mov imm, r/m */
            writes_rm = 1;
            imm = op == 0xc6 ? 1 : iz;
        } else if (op == 0xc0 || op == 0xc1 || (op >= 0xd0 && op <= 0xd3)) { /* shifts */
            writes_rm = 1;
            imm = op <= 0xc1 ? 1 : 0;
        } else if (op == 0xff) { /* inc, dec, push r/m */
            if (p >= left)
                return -1;
            unsigned sub = (c[p] >> 3) & 7;
            if (sub == 6) {
                if (!moved)
                    return -1;
                below += 8;
            } else if (sub > 1) {
                return -1;
            } else {
                writes_rm = 1;
            }
        } else if (op == 0xf6 || op == 0xf7) {
            if (p >= left)
                return -1;
            int test = ((c[p] >> 3) & 7) <= 1;
            writes_rm = !test;
            imm = test ? (op == 0xf6 ? 1 : iz) : 0;
        } else {
            return -1; /* an instruction this decoder does not know */
        }
        size_t m = 0;
        if (has_modrm) {
            if (!(m = modrm_len(c + p, left - p)))
                return -1;
            unsigned mr = c[p], reg = ((mr >> 3) & 7) | (r_ext ? 8 : 0), rm = (mr & 7) | (b_ext ? 8 : 0);
            /* any other write to rsp or rbp: the frame cannot be told */
            if ((writes_reg && (reg == 4 || reg == 5)) || (writes_rm && (mr >> 6) == 3 && (rm == 4 || rm == 5)))
                return -1;
        }
        if (p + m + imm > left)
            return -1;
        i += p + m + imm;
    }
    return -1; /* the bytes ended before the prologue did */
}

int hdx_x86_call_before(const unsigned char b[8], uint64_t ra, uint64_t *where)
{
    if (b[3] == 0xe8) { /* call rel32 */
        *where = ra + (uint64_t)imm_at(b + 4, 4);
        return HDX_CALL_DIRECT;
    }
    if (b[2] == 0xff && b[3] == 0x15) { /* call *rel32(%rip) */
        *where = ra + (uint64_t)imm_at(b + 4, 4);
        return HDX_CALL_SLOT;
    }
    /* call through a register or memory: ff /2 (a REX before it), its operand ending at ra */
    for (size_t k = 2; k <= 8; k++) {
        const unsigned char *q = b + 8 - k;
        size_t pre = (q[0] & 0xf0) == 0x40 ? 1 : 0;
        if (k < pre + 2 || q[pre] != 0xff || ((q[pre + 1] >> 3) & 7) != 2)
            continue;
        if ((q[pre + 1] >> 6) == 0 && (q[pre + 1] & 7) == 5)
            continue; /* rip-relative: the form above */
        if (pre + 1 + modrm_len(q + pre + 1, k - pre - 1) == k)
            return HDX_CALL_INDIRECT;
    }
    return 0;
}

int hdx_x86_stub_slot(const unsigned char *code, size_t len, uint64_t addr, uint64_t *slot)
{
    size_t i = 0;
    if (len >= 4 && code[0] == 0xf3 && code[1] == 0x0f && code[2] == 0x1e && code[3] == 0xfa)
        i = 4; /* endbr64 */
    if (i < len && code[i] == 0xf2)
        i++; /* bnd */
    if (i + 6 > len || code[i] != 0xff || code[i + 1] != 0x25)
        return -ENOENT;
    *slot = addr + i + 6 + (uint64_t)imm_at(code + i + 2, 4);
    return 0;
}
