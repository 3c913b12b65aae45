/* libFuzzer target: an ELF image's program headers and .eh_frame_hdr header
 * (hdx_unwind_table_locate), read with libelf from memory, for each PT_LOAD
 * segment taken as the mapping that holds ip. */
#include <gelf.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "native/unwind_tables.h"

static void locate(Elf *elf, uint64_t map_start, uint64_t map_offset, uint64_t ip)
{
    unw_dyn_info_t di;
    if (hdx_unwind_table_locate(elf, map_start, map_offset, ip, &di) != 0)
        return;
    /* what libunwind's search relies on */
    if (di.format != UNW_INFO_FORMAT_REMOTE_TABLE || di.u.rti.table_len == 0 ||
        di.u.rti.table_data <= di.u.rti.segbase || di.u.rti.table_data - di.u.rti.segbase > 20)
        abort();
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (elf_version(EV_CURRENT) == EV_NONE)
        return 0;
    char *image = malloc(size ? size : 1); /* elf_memory takes a writable image */
    if (!image)
        return 0;
    memcpy(image, data, size);
    Elf *elf = elf_memory(image, size);
    size_t phnum = 0;
    if (elf && elf_getphdrnum(elf, &phnum) == 0) {
        for (size_t i = 0; i < phnum && i < 64; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(elf, (int)i, &ph) || ph.p_type != PT_LOAD)
                continue;
            uint64_t off = ph.p_offset & ~(uint64_t)0xfff, start = 0x7f0000000000ull + off;
            locate(elf, start, off, start + (ph.p_offset - off));
            locate(elf, start, off, start + (ph.p_offset - off) + ph.p_filesz / 2);
        }
        locate(elf, 0x1000, 0, 0xfff); /* below the mapping: refused */
    }
    locate(NULL, 0, 0, 0);
    elf_end(elf);
    free(image);
    return 0;
}
