/*
 * Evidence for unit tests: a process whose main thread runs a Python stack, as the tests of
 * the stack groups (classify) and of the stack tree (report) build it.
 */
#ifndef HDX_TEST_PYTHON_PROCESS_H
#define HDX_TEST_PYTHON_PROCESS_H

#include <stdlib.h>
#include <string.h>

#include "model/evidence.h"

/* Append to ev a live process of pid and rank (HDX_UNKNOWN: none), whose one thread (tid pid)
 * runs the Python frames of file given outermost first, the i-th outermost at line
 * 10 * (i + 1). Aborts when out of memory (a test's evidence). */
static inline void hdx_test_python_process(hdx_evidence *ev, int pid, int rank, const char *file,
                                           const char *const *outer_first, size_t n)
{
    hdx_process *p = hdx_evidence_add_process(ev);
    hdx_thread *t = p ? hdx_process_add_thread(p) : NULL;
    if (!t)
        abort();
    p->pid = pid;
    p->rank = rank;
    p->alive = 1;
    t->tid = pid;
    for (size_t i = n; i-- > 0;) {
        hdx_frame *f = hdx_thread_add_frame(t);
        if (!f)
            abort();
        f->kind = HDX_FRAME_PYTHON;
        f->function = strdup(outer_first[i]);
        f->file = strdup(file);
        f->line = (int)(10 * (i + 1));
    }
}

#endif
