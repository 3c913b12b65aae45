/*
 * Symbolization of native addresses with elfutils libdwfl: follows build ids
 * and .gnu_debuglink into /usr/lib/debug, reads DWARF line info, demangles C++
 * names with __cxa_demangle. Binaries are read through /proc/PID/root.
 */
#ifndef HDX_SYMBOLS_H
#define HDX_SYMBOLS_H

#include <stdint.h>

#include "evidence.h"

typedef struct hdx_symbolizer hdx_symbolizer;

/* A symbolizer for the memory map of live process pid. NULL with errno set. */
hdx_symbolizer *hdx_symbolizer_new(int pid);

/*
 * Fill f->function, f->file, f->line, f->module and f->offset for f->pc
 * (heap strings, owned by f afterwards). The function name is demangled and
 * loses its symbol version ("@GLIBC_2.2.5") and LTO suffix (".lto_priv.0").
 * For a return address (every frame but the innermost, and not the one
 * interrupted by a signal frame) pass is_return = 1: the lookup
 * uses pc - 1, as eu-stack does. Returns 0 when a symbol was found, -ENOENT
 * when not (module/offset may still be set).
 */
int hdx_symbolize(hdx_symbolizer *s, hdx_frame *f, int is_return);

/* Accepts NULL. */
void hdx_symbolizer_free(hdx_symbolizer *s);

/*
 * Demangle a C++ name with __cxa_demangle. Heap string, or a copy of name
 * when it is not a mangled C++ name. NULL only on ENOMEM.
 */
char *hdx_demangle(const char *name);

#endif
