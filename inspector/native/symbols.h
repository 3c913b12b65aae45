/*
 * Symbolization of native addresses with elfutils libdwfl: follows build ids
 * and .gnu_debuglink into /usr/lib/debug, reads DWARF line info, demangles C++
 * names with __cxa_demangle. Binaries are read through /proc/PID/root.
 *
 * A symbolizer serves one process (its memory map). The symbolizers of one
 * capture can share an hdx_symcache: the ranks of a job run the same
 * binaries, and a binary's symbols and (often compressed) DWARF are then read
 * once per capture instead of once per process.
 */
#ifndef HDX_SYMBOLS_H
#define HDX_SYMBOLS_H

#include <stddef.h>
#include <stdint.h>

#include "model/evidence.h"

typedef struct hdx_symbolizer hdx_symbolizer;
typedef struct hdx_symcache hdx_symcache;

/*
 * Symbol results shared by several symbolizers, keyed by the binary's
 * identity (its GNU build id, else device, inode, mtime and size of the
 * file) and the address in the binary (the process's address less the
 * module's load bias). Holds one libdwfl session per binary, which reads
 * that binary's symbol table and DWARF (through /usr/lib/debug, as a
 * per-process symbolizer would) the first time an address in it is looked
 * up, and keeps every result: an address one process resolved costs the
 * next process no libdwfl lookup. With lines 0 no DWARF is read and frames
 * get function names only (file NULL, line 0): a debug file's DWARF is
 * mostly compressed, and inflating it is most of the time a lookup takes
 * (python3.11's, with python3.11-dbg: about 0.1 s of CPU, zlib). The caller
 * owns it; free it with hdx_symcache_free after every symbolizer that uses
 * it. NULL with errno ENOMEM.
 */
hdx_symcache *hdx_symcache_new(int lines);

/*
 * How many addresses the cache resolved through libdwfl (symbol table and
 * line info), since it was made: each (binary, address) counts once, however
 * many processes asked. For tests and benchmarks. 0 for NULL.
 */
size_t hdx_symcache_lookups(const hdx_symcache *c);

/* How many binaries the cache opened (one libdwfl session each). 0 for NULL. */
size_t hdx_symcache_binaries(const hdx_symcache *c);

/* Free the cache and its libdwfl sessions. Accepts NULL. */
void hdx_symcache_free(hdx_symcache *c);

/*
 * A symbolizer for the memory map of live process pid, resolving through
 * shared (borrowed: it must outlive the symbolizer; its lines setting holds
 * for every module) or, when shared is NULL, on its own, with a libdwfl
 * session of its own for every module, and lines. Modules
 * that are no openable file with an identity (the vDSO, a deleted file) are
 * always resolved per process. Results are the same either way. NULL with
 * errno set: ESRCH (no such process), EACCES/EPERM (its maps cannot be
 * read), ENOMEM, EIO (libdwfl failed).
 */
hdx_symbolizer *hdx_symbolizer_new_shared(int pid, hdx_symcache *shared);

/* hdx_symbolizer_new_shared(pid, NULL). */
hdx_symbolizer *hdx_symbolizer_new(int pid);

/*
 * Fill f->function, f->file, f->line (not without lines: see
 * hdx_symcache_new), f->module and f->offset for f->pc (heap strings, owned
 * by f afterwards). The function name is demangled and
 * loses its symbol version ("@GLIBC_2.2.5") and LTO suffix (".lto_priv.0").
 * For a return address (every frame but the innermost, and not the one
 * interrupted by a signal frame) pass is_return = 1: the lookup
 * uses pc - 1, as eu-stack does. Returns 0 when a symbol was found, -ENOENT
 * when not (module/offset may still be set).
 */
int hdx_symbolize(hdx_symbolizer *s, hdx_frame *f, int is_return);

/* Accepts NULL. Leaves the shared cache it was made with. */
void hdx_symbolizer_free(hdx_symbolizer *s);

/*
 * Demangle a C++ name with __cxa_demangle. Heap string, or a copy of name
 * when it is not a mangled C++ name. NULL only on ENOMEM.
 */
char *hdx_demangle(const char *name);

/*
 * The name a person (and classify) expects of an ELF symbol name: demangled (hdx_demangle),
 * without the symbol version ("clock_nanosleep@GLIBC_2.2.5") or GCC's LTO privatization
 * suffix ("time_sleep.lto_priv.0"). Other clone suffixes (.constprop, .isra, .cold) stay:
 * they tell a different body. name must not be NULL. Heap string the caller frees; NULL
 * only on ENOMEM.
 */
char *hdx_symbol_clean_name(const char *name);

#endif
