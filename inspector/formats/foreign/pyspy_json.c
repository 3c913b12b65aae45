/* py-spy `dump --json` (foreign.h): an array of thread objects, py-spy's src/stack_trace.rs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/json_read.h"
#include "model/util.h"

/* Integers a JSON number (a double) holds exactly: py-spy's thread_id, a pthread_t, within them. */
#define EXACT_MAX 9007199254740992LL /* 2^53 */

/* Members of another type count as absent here: what py-spy does not give stays unknown. */
int hdx_foreign_pyspy_json(parser *P, const char *text, size_t len)
{
    cJSON *root = cJSON_ParseWithLength(text, len);
    int rc = 0;
    if (!root)
        return hdx_foreign_fail(P, -EBADMSG, "not valid JSON (py-spy dump --json prints an array of threads)");
    if (!cJSON_IsArray(root)) {
        rc = hdx_foreign_fail(P, -EBADMSG, "not a JSON array of threads, as py-spy dump --json prints");
        goto out;
    }
    stream *s = hdx_foreign_stream_for(P, HDX_UNKNOWN, HDX_UNKNOWN, 0);
    if (!s) {
        rc = -ENOMEM;
        goto out;
    }
    int ti = 0;
    const cJSON *th;
    cJSON_ArrayForEach(th, root) {
        if (!cJSON_IsObject(th)) {
            rc = hdx_foreign_fail(P, -EBADMSG, "thread %d: not an object", ti);
            goto out;
        }
        const cJSON *frames = NULL;
        if (hdx_json_get_array(th, "frames", &frames, NULL) != 1) {
            rc = hdx_foreign_fail(P, -EBADMSG, "thread %d: no \"frames\" array", ti);
            goto out;
        }
        int pid = HDX_UNKNOWN, tid = HDX_UNKNOWN;
        int64_t pyid = 0;
        if (hdx_json_get_int(th, "pid", 1, INT_MAX, &pid, NULL) != 1)
            pid = HDX_UNKNOWN;
        if (hdx_json_get_int(th, "os_thread_id", 1, INT_MAX, &tid, NULL) != 1)
            tid = HDX_UNKNOWN;
        (void)hdx_json_get_i64(th, "thread_id", -EXACT_MAX, EXACT_MAX, &pyid, NULL);
        /* A process per pid (py-spy fills each thread's pid); threads of an unknown pid join the current one. */
        hdx_process *p = proc_of(P, s);
        if (!p || (pid != HDX_UNKNOWN && p->pid != pid)) {
            p = NULL;
            for (size_t i = 0; i < P->one->n_procs; i++)
                if (P->one->procs[i].pid == pid && pid != HDX_UNKNOWN) {
                    s->proc = (long)i;
                    p = &P->one->procs[i];
                }
            if (!p && (rc = hdx_foreign_new_process(P, s, pid)) < 0)
                goto out;
        }
        const char *name = NULL;
        (void)hdx_json_get_str(th, "thread_name", &name, NULL);
        char hex[32];
        snprintf(hex, sizeof hex, "%#llx", (unsigned long long)pyid);
        if ((rc = hdx_foreign_new_thread(P, s, tid, name ? name : hex)) < 0)
            goto out;
        int active;
        thread_of(P, s)->state = hdx_json_get_bool(th, "active", &active, NULL) == 1 ? (active ? 'R' : 'S') : 0;
        int fi = 0;
        const cJSON *fr;
        cJSON_ArrayForEach(fr, frames) {
            const char *fname = NULL, *file = NULL, *module = NULL;
            (void)hdx_json_get_str(fr, "name", &fname, NULL);
            (void)hdx_json_get_str(fr, "filename", &file, NULL);
            (void)hdx_json_get_str(fr, "module", &module, NULL);
            if (!cJSON_IsObject(fr) || !fname) {
                rc = hdx_foreign_fail(P, -EBADMSG, "thread %d, frame %d: not an object with a \"name\"", ti, fi);
                goto out;
            }
            int64_t line = 0;
            (void)hdx_json_get_i64(fr, "line", -EXACT_MAX, EXACT_MAX, &line, NULL);
            hdx_frame *f = hdx_foreign_add_frame(P, s, 0, &rc);
            if (!f) {
                if (rc < 0)
                    goto out;
                break;
            }
            /* py-spy sets "module" on native frames (--native) only. */
            f->kind = module || (file && !hdx_foreign_python_file(file)) ? HDX_FRAME_NATIVE : HDX_FRAME_PYTHON;
            f->line = line > 0 && line < 0x7fffffff ? (int)line : 0;
            if (!(f->function = strdup(fname)) || (file && *file && !(f->file = strdup(file))) ||
                (module && !(f->module = strdup(module)))) {
                rc = -ENOMEM;
                goto out;
            }
            if (f->kind == HDX_FRAME_NATIVE && f->file && f->module && !strcmp(f->file, f->module) && !f->line) {
                free(f->file); /* no source: py-spy repeats the module as the file */
                f->file = NULL;
            }
            const cJSON *locals = NULL, *lv;
            if (hdx_json_get_array(fr, "locals", &locals, NULL) == 1) {
                cJSON_ArrayForEach(lv, locals) {
                    const char *lname = NULL, *repr = NULL;
                    (void)hdx_json_get_str(lv, "repr", &repr, NULL);
                    if (hdx_json_get_str(lv, "name", &lname, NULL) == 1 &&
                        (rc = hdx_foreign_add_local(f, lname, repr)) < 0)
                        goto out;
                }
            }
            fi++;
        }
        ti++;
    }
    if (!ti)
        rc = hdx_foreign_fail(P, -EBADMSG, "an empty array: py-spy found no thread");
out:
    cJSON_Delete(root);
    return rc;
}
