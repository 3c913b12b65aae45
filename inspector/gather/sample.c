#include "gather/sample.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "python/merge.h"
#include "python/python.h"
#include "model/redact.h"
#include "native/stacks.h"
#include "model/util.h"

/* How long one thread may take to stop for a stack sample, ms. */
#define STOP_TIMEOUT_MS 200

static hdx_thread *thread_of(hdx_process *p, int tid)
{
    for (size_t i = 0; i < p->n_threads; i++)
        if (p->threads[i].tid == tid)
            return &p->threads[i];
    return NULL;
}

static int add_python(hdx_process *p, hdx_evidence *ev, unsigned flags)
{
    char *err = NULL;
    hdx_pyproc *py = hdx_py_attach(p->pid, &err);
    if (!py) {
        if (errno != ENOENT) /* not a Python process: nothing to say */
            hdx_evidence_note(ev, "Python frames of pid %d not read: %s", p->pid, err ? err : strerror(errno));
        free(err);
        return 0;
    }
    int v = hdx_py_version(py);
    free(p->python);
    p->python = hdx_asprintf("%d.%d %s", v >> 8, v & 0xff, hdx_py_binary(py));
    hdx_py_sample s = {0};
    int rc = hdx_py_read(py, flags & HDX_SAMPLE_LOCALS ? HDX_PY_LOCALS : 0, &s);
    if (rc == 0 && s.partial)
        hdx_evidence_note(ev, "pid %d: some Python stacks are partial (the process changed while it was read)", p->pid);
    for (size_t i = 0; rc == 0 && i < s.n_threads; i++) {
        hdx_py_thread *pt = &s.threads[i];
        hdx_thread *t = pt->tid >= 0 ? thread_of(p, pt->tid) : NULL;
        if (!t) {
            if (!(t = hdx_process_add_thread(p))) {
                rc = -ENOMEM;
                break;
            }
            t->tid = pt->tid;
        }
        rc = hdx_merge_stacks(t, pt->frames, pt->n_frames, pt->is_entry);
        pt->frames = NULL; /* merged frames are owned by t now */
        pt->n_frames = 0;
    }
    if (rc == 0 && (flags & HDX_SAMPLE_LOCALS))
        rc = hdx_sample_pgroups(py, p, ev);
    hdx_py_sample_clear(&s);
    hdx_py_detach(py);
    return rc == -ENOMEM ? rc : 0;
}

int hdx_sample_stacks(hdx_process *p, hdx_evidence *ev, unsigned flags)
{
    int rc = 0;
    if (!(flags & HDX_SAMPLE_NO_NATIVE))
        rc = hdx_stacks_sample(p, ev, STOP_TIMEOUT_MS);
    if (flags & HDX_SAMPLE_PYTHON) {
        int r = add_python(p, ev, flags);
        if (r == -ENOMEM)
            return r;
    }
    /* Locals and the command line may hold other environment values and secrets: they stay here. */
    if (hdx_redact_secrets(p) == -ENOMEM)
        return -ENOMEM;
    return rc;
}
