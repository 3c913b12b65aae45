/* py-spy `dump --json` (foreign.h): an array of thread objects, py-spy's src/stack_trace.rs. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "formats/foreign/internal.h"
#include "model/util.h"

static const char *jstr(const cJSON *o, const char *key)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int jint(const cJSON *o, const char *key, long long *out)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    if (!cJSON_IsNumber(v) || v->valuedouble < -9e15 || v->valuedouble > 9e15)
        return 0;
    *out = (long long)v->valuedouble;
    return 1;
}

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
        const cJSON *frames = cJSON_GetObjectItemCaseSensitive(th, "frames");
        if (!cJSON_IsArray(frames)) {
            rc = hdx_foreign_fail(P, -EBADMSG, "thread %d: no \"frames\" array", ti);
            goto out;
        }
        long long pid = HDX_UNKNOWN, tid = HDX_UNKNOWN, pyid = 0;
        if (!jint(th, "pid", &pid) || pid <= 0 || pid > 0x7fffffff)
            pid = HDX_UNKNOWN;
        if (!jint(th, "os_thread_id", &tid) || tid <= 0 || tid > 0x7fffffff)
            tid = HDX_UNKNOWN;
        (void)jint(th, "thread_id", &pyid);
        /* A process per pid (py-spy fills each thread's pid); threads of an unknown pid join the current one. */
        hdx_process *p = proc_of(P, s);
        if (!p || (pid != HDX_UNKNOWN && p->pid != (int)pid)) {
            p = NULL;
            for (size_t i = 0; i < P->one->n_procs; i++)
                if (P->one->procs[i].pid == (int)pid && pid != HDX_UNKNOWN) {
                    s->proc = (long)i;
                    p = &P->one->procs[i];
                }
            if (!p && (rc = hdx_foreign_new_process(P, s, (int)pid)) < 0)
                goto out;
        }
        const char *name = jstr(th, "thread_name");
        char hex[32];
        snprintf(hex, sizeof hex, "%#llx", (unsigned long long)pyid);
        if ((rc = hdx_foreign_new_thread(P, s, (int)tid, name ? name : hex)) < 0)
            goto out;
        const cJSON *active = cJSON_GetObjectItemCaseSensitive(th, "active");
        thread_of(P, s)->state = cJSON_IsBool(active) ? (cJSON_IsTrue(active) ? 'R' : 'S') : 0;
        int fi = 0;
        const cJSON *fr;
        cJSON_ArrayForEach(fr, frames) {
            const char *fname = jstr(fr, "name"), *file = jstr(fr, "filename"), *module = jstr(fr, "module");
            if (!cJSON_IsObject(fr) || !fname) {
                rc = hdx_foreign_fail(P, -EBADMSG, "thread %d, frame %d: not an object with a \"name\"", ti, fi);
                goto out;
            }
            long long line = 0;
            (void)jint(fr, "line", &line);
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
            const cJSON *locals = cJSON_GetObjectItemCaseSensitive(fr, "locals"), *lv;
            if (cJSON_IsArray(locals)) {
                cJSON_ArrayForEach(lv, locals) {
                    const char *lname = jstr(lv, "name");
                    if (lname && (rc = hdx_foreign_add_local(f, lname, jstr(lv, "repr"))) < 0)
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
