#include "python/merge.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int hdx_is_eval_frame(const char *function)
{
    return function && (strstr(function, "_PyEval_EvalFrameDefault") || strstr(function, "PyEval_EvalFrameEx") ||
                        !strncmp(function, "_TAIL_CALL_", 11));
}

/* Native frames of the interpreter that only carry a call from one Python frame to the next. */
static int is_interpreter_glue(const hdx_frame *f)
{
    static const char *const prefixes[] = {"_Py", "PyEval", "PyObject_Call", "PyObject_Vectorcall", "method_vectorcall",
                                           "cfunction_", "function_code_fastcall", "call_function"};
    const char *base = f->module ? strrchr(f->module, '/') : NULL;
    base = base ? base + 1 : f->module;
    if (!f->function || !base || !strstr(base, "python"))
        return 0;
    if (strstr(f->function, "vectorcall"))
        return 1;
    for (size_t i = 0; i < sizeof prefixes / sizeof prefixes[0]; i++)
        if (!strncmp(f->function, prefixes[i], strlen(prefixes[i])))
            return 1;
    return 0;
}

int hdx_merge_stacks(hdx_thread *t, hdx_frame *py, size_t n_py, const unsigned char *is_entry)
{
    /* A new sample replaces what an earlier one kept apart. */
    hdx_frames_free(t->py_frames, t->n_py_frames);
    t->py_frames = NULL;
    t->n_py_frames = 0;
    t->unmerged = 0;
    if (!t->n_frames) {
        hdx_frames_free(t->frames, 0);
        t->frames = py;
        t->n_frames = n_py;
        return 0;
    }
    size_t evals = 0, entries = 0;
    for (size_t i = 0; i < t->n_frames; i++)
        evals += hdx_is_eval_frame(t->frames[i].function) != 0;
    for (size_t i = 0; i < n_py; i++)
        entries += is_entry[i] != 0;
    if (evals != entries || !evals) {
        t->py_frames = py;
        t->n_py_frames = n_py;
        t->unmerged = n_py > 0;
        return 0;
    }
    hdx_frame *out = calloc(t->n_frames + n_py, sizeof *out);
    if (!out) {
        hdx_frames_free(py, n_py);
        return -ENOMEM;
    }
    size_t n = 0, next_py = 0;
    for (size_t i = 0; i < t->n_frames; i++) {
        hdx_frame *f = &t->frames[i];
        if (hdx_is_eval_frame(f->function)) {
            /* This activation's Python frames: up to and including its entry frame. */
            while (next_py < n_py) {
                out[n++] = py[next_py];
                if (is_entry[next_py++])
                    break;
            }
            hdx_frame_clear(f);
        } else if (is_interpreter_glue(f)) {
            hdx_frame_clear(f);
        } else {
            out[n++] = *f;
        }
    }
    while (next_py < n_py) /* frames after the last entry belong to no activation */
        hdx_frame_clear(&py[next_py++]);
    free(t->frames);
    free(py); /* its contents moved into out */
    t->frames = out;
    t->n_frames = n;
    return 0;
}
