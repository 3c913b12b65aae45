/*
 * A reader of Python pickles that runs nothing: the data opcodes of protocols 2 to 5 (dicts,
 * lists, tuples, sets, strings, bytes, ints, floats, bools, None, the memo, frames), turned
 * into a cJSON tree. Made for torch's NCCL Flight Recorder dumps (docs/formats.md "Flight
 * Recorder dumps"), which torch writes with its own pickler (protocol 2) and people re-save
 * with Python's (protocol 4 or 5).
 *
 * Refused, with the opcode and its offset: every opcode that makes Python find or call
 * something (GLOBAL, STACK_GLOBAL, REDUCE, BUILD, INST, OBJ, NEWOBJ, NEWOBJ_EX, EXT1/2/4,
 * PERSID, BINPERSID, NEXT_BUFFER, READONLY_BUFFER); also the text opcodes of protocols 0 and
 * 1, which these dumps do not use, and any byte that is no opcode.
 *
 * Bounded by the input: no length is taken from the input before the bytes it claims are
 * there; containers nest at most HDX_PICKLE_MAX_DEPTH deep; memo ids come in order (as both
 * picklers write them); a memo fetch copies what it fetches (cJSON items have one parent), and
 * all that is made is charged to a budget of HDX_PICKLE_COST_PER_BYTE per input byte (plus
 * HDX_PICKLE_COST_BASE, at most HDX_PICKLE_COST_MAX): 64 per item made, and each string's
 * length. Work is linear in what the budget allows.
 */
#ifndef HDX_PICKLE_H
#define HDX_PICKLE_H

#include <stddef.h>

#include <cjson/cJSON.h>

#define HDX_PICKLE_MAX_DEPTH 64
#define HDX_PICKLE_COST_PER_BYTE 64
#define HDX_PICKLE_COST_BASE (16u << 20)
#define HDX_PICKLE_COST_MAX (1ull << 30)

/* Where and why a pickle was refused. */
typedef struct hdx_pickle_error {
    size_t offset; /* of the opcode (or of the data that is short) from the start */
    int opcode;    /* the opcode byte there, -1 when the input ended */
    int unsafe;    /* 1: an opcode that would run code (refused by design), 0: malformed */
    char what[200]; /* for a person: "GLOBAL (0x63) finds a Python object by name ..." */
} hdx_pickle_error;

/*
 * Read the pickle in data[0..len) into *out (a cJSON tree the caller frees with cJSON_Delete):
 * dicts become objects (keys must be strings or ints, which become their decimal text), lists,
 * tuples and sets arrays, ints and floats numbers (ints beyond 2^53 lose precision), bools,
 * None null, str and bytes strings (cut at a NUL byte). Reading ends at STOP; bytes after it
 * are ignored.
 * Returns 0; -EPERM for an opcode that would run code (e->unsafe 1); -EBADMSG for a malformed
 * or truncated pickle, beyond the bounds above or of an opcode this reader does not read; or
 * -ENOMEM. On an error *out is NULL and e (not NULL) says where.
 */
int hdx_pickle_read(const unsigned char *data, size_t len, cJSON **out, hdx_pickle_error *e);

/* The name of pickle opcode op ("GLOBAL", "BINUNICODE", ...), or "?" for a byte that is none. Static. */
const char *hdx_pickle_opcode_name(int op);

#endif
