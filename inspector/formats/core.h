/*
 * ELF core files of hung ranks: a gcore or kernel core becomes one
 * hdx_process of the evidence, with the same stacks, native and Python, that
 * a live `hangdx dump` of that process would have shown.
 *
 * Native stacks come from elfutils libdwfl (dwfl_core_file_report,
 * dwfl_core_file_attach, dwfl_getthread_frames), which follows build ids and
 * .gnu_debuglink into /usr/lib/debug; libunwind's _UCD_* is not used, its
 * released versions misread file offsets (docs/python-frames.md "Core files").
 *
 * Python frames are read out of the core's memory through an hdx_pymem
 * backend: PT_LOAD segments up to p_filesz, and for pages the core lacks
 * (a kernel core leaves out text, rodata and untouched data), the file the
 * page was mapped from (NT_FILE), read from this machine — only when its
 * GNU build id equals the one in the core's dumped first page of that file,
 * or when one of the two cannot be read (then a note says it was unchecked).
 */
#ifndef HDX_CORE_H
#define HDX_CORE_H

#include "model/evidence.h"

/*
 * What a file is, from its first n bytes (head; the first 64 are enough): 1 an ELF core (ELF
 * magic and e_type ET_CORE), 2 another ELF file (or one too short to tell: hdx_core_load()
 * then says what it is instead), 0 not ELF.
 */
int hdx_core_sniff(const void *head, size_t n);

/*
 * Load the ELF core at path into ev as one hdx_process, appended:
 *  - pid, ppid (NT_PRPSINFO, else the first NT_PRSTATUS), one thread per
 *    NT_PRSTATUS (its pr_pid is the TID), the main thread first;
 *  - cmdline from the initial stack's argv (else pr_psargs, cut at 80
 *    bytes), exe from NT_AUXV AT_EXECFN (else the first NT_FILE mapping),
 *    the allowed environment names (RANK, WORLD_SIZE, ...) from the initial
 *    stack's envp, and so rank / local rank / world size;
 *  - state unknown, alive 0, host unknown, no CPU samples;
 *  - native frames (innermost first, symbolized, module and offset) merged
 *    with the Python frames (with locals) as hdx_merge_stacks does live;
 *  - a FileBaton build lock (<build_directory>/lock) when a thread waits in
 *    FileBaton.wait under cpp_extension._jit_compile, as locks.c does live;
 *    the caller takes its facts (hdx_locks_record_facts).
 * What could not be read (missing binaries, unchecked or refused file
 * pages, no Python frames) is noted in ev and the load still succeeds.
 *
 * Returns 0, or a negative errno with *err (heap, caller frees; NULL on
 * success) naming the file and what to do:
 *   -ENOEXEC  not an ELF core (another ELF file, or not ELF);
 *   -EBADMSG  a truncated or malformed core (its program headers promise
 *             more bytes than the file holds);
 *   -ENOTSUP  a 32-bit core, or a machine other than x86-64 / aarch64;
 *   -errno    of open/stat/mmap;  -ENOMEM.
 * On error nothing is added to ev.
 */
int hdx_core_load(const char *path, hdx_evidence *ev, char **err);

#endif
