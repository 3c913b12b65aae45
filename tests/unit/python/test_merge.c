/* Merging native and Python stacks: the rule of docs/python-frames.md "Merging native and
 * Python stacks", on stacks shaped like Debian python3.11's. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "python/merge.h"

#include "check.h"

static void native(hdx_thread *t, const char *fn, const char *module)
{
    hdx_frame *f = hdx_thread_add_frame(t);
    f->kind = HDX_FRAME_NATIVE;
    f->function = strdup(fn);
    f->module = strdup(module);
}

static hdx_frame *python(const char *const *names, size_t n)
{
    hdx_frame *py = calloc(n, sizeof *py);
    for (size_t i = 0; i < n; i++) {
        py[i].kind = HDX_FRAME_PYTHON;
        py[i].function = strdup(names[i]);
        py[i].file = strdup("park.py");
        py[i].line = (int)(10 + i);
    }
    return py;
}

static hdx_thread sleeping_thread(void)
{
    hdx_thread t = {0};
    native(&t, "clock_nanosleep", "/usr/lib/x86_64-linux-gnu/libc.so.6");
    native(&t, "time_sleep", "/usr/bin/python3.11");
    native(&t, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11");
    native(&t, "_PyFunction_Vectorcall", "/usr/bin/python3.11");
    native(&t, "_PyEval_EvalFrameDefault", "/usr/bin/python3.11");
    native(&t, "PyEval_EvalCode", "/usr/bin/python3.11");
    native(&t, "main", "/usr/bin/python3.11");
    return t;
}

int main(void)
{
    static const char *const names[] = {"leaf", "middle", "outer"};
    /* Two activations: {leaf, middle} and {outer}. */
    hdx_thread t = sleeping_thread();
    static const unsigned char entry[] = {0, 1, 1};
    CHECK(hdx_merge_stacks(&t, python(names, 3), 3, entry) == 0);
    static const char *const want[] = {"clock_nanosleep", "time_sleep", "leaf", "middle", "outer", "main"};
    CHECK(t.n_frames == 6 && !t.unmerged);
    for (size_t i = 0; i < t.n_frames && i < 6; i++)
        CHECK(!strcmp(t.frames[i].function, want[i]));
    CHECK(t.frames[2].kind == HDX_FRAME_PYTHON && t.frames[2].line == 10);
    hdx_thread_clear(&t);

    /* Three activations against two eval frames: kept apart, flagged. */
    t = sleeping_thread();
    static const unsigned char every[] = {1, 1, 1};
    CHECK(hdx_merge_stacks(&t, python(names, 3), 3, every) == 0);
    CHECK(t.unmerged == 1 && t.n_frames == 7 && t.n_py_frames == 3);
    CHECK(!strcmp(t.py_frames[0].function, "leaf"));
    hdx_thread_clear(&t);

    /* No native stack (not readable): the Python frames stand alone. */
    hdx_thread bare = {0};
    CHECK(hdx_merge_stacks(&bare, python(names, 3), 3, every) == 0);
    CHECK(bare.n_frames == 3 && !bare.unmerged && !strcmp(bare.frames[2].function, "outer"));
    hdx_thread_clear(&bare);

    CHECK(hdx_is_eval_frame("_PyEval_EvalFrameDefault.cold"));
    CHECK(!hdx_is_eval_frame("PyEval_EvalCode"));
    if (failures)
        return 1;
    printf("merge: native and Python stacks merge as expected\n");
    return 0;
}
