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

#include "python.h" /* hdx_pymap */

typedef struct hdx_unwind_tables hdx_unwind_tables;

/*
 * The unwind tables of live process pid over its mappings maps[0..n_maps)
 * (hdx_pymaps_read, sorted as /proc lists them), which t borrows: they must
 * outlive t. n_maps 0 sends every lookup to _UPT_find_proc_info. The caller
 * owns the result (hdx_unwind_tables_free). NULL with errno set: ENOMEM, EIO
 * (libelf unusable).
 */
hdx_unwind_tables *hdx_unwind_tables_new(int pid, const hdx_pymap *maps, size_t n_maps);

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

#endif
