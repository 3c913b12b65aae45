/*
 * Merging a thread's native and Python stacks, as py-spy's native mode and
 * pystack do (docs/python-frames.md "Merging native and Python stacks"): each native activation of
 * the eval loop is replaced by the Python frames it runs.
 */
#ifndef HDX_MERGE_H
#define HDX_MERGE_H

#include <stddef.h>

#include "model/evidence.h"

/* 1 when a native function name is an activation of CPython's eval loop:
 * _PyEval_EvalFrameDefault (any .cold/LTO suffix), PyEval_EvalFrameEx, or a
 * 3.14 tail-call handler (_TAIL_CALL_*). */
int hdx_is_eval_frame(const char *function);

/*
 * Merge py (n_py Python frames, innermost first) into t. is_entry[i] != 0
 * marks the outermost Python frame of one eval-loop activation (3.8–3.10:
 * every frame; 3.11: is_entry; 3.12+: the frame after a shim frame).
 * Takes ownership of py and its contents in every case.
 *  - t has no native frames: t->frames becomes py.
 *  - the number of eval frames in t->frames equals the number of
 *    activations: each eval frame is replaced by its activation's Python
 *    frames; interpreter-internal native frames of the python module
 *    (_Py*, PyEval*, *vectorcall*, PyObject_Call*) are dropped.
 *  - otherwise t keeps its native frames, py goes to t->py_frames and
 *    t->unmerged is set.
 * Returns 0 or -ENOMEM (then py is freed and t is unchanged).
 */
int hdx_merge_stacks(hdx_thread *t, hdx_frame *py, size_t n_py, const unsigned char *is_entry);

#endif
