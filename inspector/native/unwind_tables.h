/*
 * Unwind tables of a live process for libunwind's find_proc_info callback,
 * from one read of /proc/PID/maps.
 *
 * libunwind-ptrace's _UPT_find_proc_info re-reads and re-parses the whole
 * /proc/PID/maps (1700 lines in a torch process) every time an unwind moves
 * into another ELF image. Here the caller's one read of the maps serves; each
 * image's .eh_frame_hdr (PT_GNU_EH_FRAME, from the file's program headers,
 * read through /proc/PID/root) is located once, and libunwind's own search
 * of that table (dwarf_search_unwind_table: the libunwind export that
 * _UPT_find_proc_info itself uses, declared here as Linux perf does) finds
 * the FDE, reading the table and the FDE from target memory through the
 * address space's access_mem. Whatever this cannot handle (an address
 * outside the maps read, the vDSO, a deleted file, a table in an encoding
 * other than the usual one) goes to _UPT_find_proc_info as before.
 */
#ifndef HDX_UNWIND_TABLES_H
#define HDX_UNWIND_TABLES_H

#include <libelf.h>
#include <libunwind.h>
#include <stddef.h>
#include <stdint.h>

#include "native/maps.h"

typedef struct hdx_unwind_tables hdx_unwind_tables;

/*
 * The unwind tables of live process pid over its mappings maps[0..n_maps)
 * (hdx_maps_read, sorted as /proc lists them), which t borrows: they must
 * outlive t. n_maps 0 sends every lookup to _UPT_find_proc_info. The caller
 * owns the result (hdx_unwind_tables_free). NULL with errno set: ENOMEM, EIO
 * (libelf unusable).
 */
hdx_unwind_tables *hdx_unwind_tables_new(int pid, const hdx_map *maps, size_t n_maps);

/*
 * libunwind's find_proc_info (unw_accessors_t) for ip in t's process: fills
 * pi (and its unwind info when need_unwind_info, freed by libunwind as
 * after its own search) and returns 0, or a negative UNW_E* code
 * (-UNW_ENOINFO: no unwind info covers ip). upt is the _UPT_create() handle
 * of the same process (borrowed), passed to libunwind's callbacks as their
 * argument and used for the fallback to _UPT_find_proc_info. t NULL: the
 * fallback only.
 */
int hdx_unwind_tables_find(hdx_unwind_tables *t, unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
                           int need_unwind_info, void *upt);

/*
 * How many hdx_unwind_tables_find calls went to _UPT_find_proc_info (each
 * reads /proc/PID/maps again), and how many images were located. For tests
 * and benchmarks; 0 for NULL.
 */
size_t hdx_unwind_tables_fallbacks(const hdx_unwind_tables *t);
size_t hdx_unwind_tables_images(const hdx_unwind_tables *t);

/* Accepts NULL. */
void hdx_unwind_tables_free(hdx_unwind_tables *t);

/*
 * Where the x86-64 ELF image elf (borrowed; NULL is fine) keeps its
 * .eh_frame_hdr binary search table, for ip, which lies in a mapping of the
 * image's file that starts at map_start and maps file offset map_offset:
 * fills di as libunwind's dwarf_find_unwind_table does for
 * _UPT_find_proc_info (format UNW_INFO_FORMAT_REMOTE_TABLE; start_ip and
 * end_ip the image's PT_LOAD range; segbase and table_data the header's and
 * the table's addresses in the target). Reads only the program headers and
 * the first bytes of the PT_GNU_EH_FRAME segment. Returns 0, or -ENOENT when
 * the image has no table that libunwind's binary search can use (none,
 * another encoding, sizes that do not fit the segment) or ip is in no
 * PT_LOAD segment.
 */
int hdx_unwind_table_locate(Elf *elf, uint64_t map_start, uint64_t map_offset, uint64_t ip, unw_dyn_info_t *di);

/*
 * The frame of an x86-64 function that keeps a frame pointer, from code[0..len), its first
 * instructions (read from the start its FDE gives, up to the pc of interest). Read in
 * order, through the early exits of a shrink-wrapped function, up to its mov %rsp,%rbp:
 * returns how many bytes rsp lies below rbp once the prologue is done, i.e. the pushes
 * after the mov and the sub $N,%rsp that ends it, or those up to the first call, jump or
 * return when there is no sub. At a call in the body that moves rsp no further (no pushed
 * arguments, no alloca), the function's rbp is the call's rsp plus that. -1 when the code
 * does not read so: no such mov, an instruction this small decoder does not know (it
 * knows the integer and SSE moves and arithmetic that compilers put in prologues), a write
 * to rsp or rbp it cannot follow, the bytes end first. Pure.
 */
long hdx_x86_fp_frame_size(const unsigned char *code, size_t len);

/* What hdx_x86_call_before found before a return address. */
enum { HDX_CALL_DIRECT = 1, HDX_CALL_SLOT, HDX_CALL_INDIRECT };

/*
 * The x86-64 call instruction that ends at return address ra, from b, the 8 bytes before
 * ra: HDX_CALL_DIRECT with *where its target (call rel32), HDX_CALL_SLOT with *where the
 * address of the pointer it calls through (call *rel32(%rip): -fno-plt, the GOT),
 * HDX_CALL_INDIRECT (through a register or other memory: its target is not known), or 0
 * when no call ends there. Pure.
 */
int hdx_x86_call_before(const unsigned char b[8], uint64_t ra, uint64_t *where);

/*
 * When the code at addr (code[0..len) its first bytes) is a PLT stub, jmp *rel32(%rip)
 * (after an endbr64 and a bnd prefix, as .plt, .plt.sec and .plt.got have it): the
 * address of the pointer it jumps through into *slot, and 0. -ENOENT otherwise. Pure.
 */
int hdx_x86_stub_slot(const unsigned char *code, size_t len, uint64_t addr, uint64_t *slot);

#endif
