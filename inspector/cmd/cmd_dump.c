/*
 * hangdx dump: every thread of each process, as merged Python and native
 * stacks (like a py-spy native dump), without classifying.
 */
#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "hangdx/report.h"
#include "gather/proc.h"
#include "report/report.h"
#include "gather/sample.h"
#include "formats/snapshot.h"
#include "native/stacks.h"
#include "model/jsonout.h"
#include "model/util.h"

static void usage(FILE *f)
{
    fprintf(f, "usage: hangdx dump [--json] [--locals] [--python-only] [--native-lines] PID...\n\n"
               "Show every thread of each PID and its descendants as merged Python and native\n"
               "stacks. Each thread is stopped only to copy its registers and stack.\n\n"
               "  --json         print {\"schema\": \"hangdx.dump/1\", \"processes\": [...]} on stdout\n"
               "  --locals       also read the local variables of Python frames\n"
               "  --python-only  Python frames only: no thread is stopped at all\n"
               "  --native-lines native frames also get their source file:line, from the DWARF of\n"
               "                 the debug files (/usr/lib/debug): slower, about 0.1 s of CPU per\n"
               "                 large binary; without it, function and module+offset\n\n"
               "examples:\n"
               "  hangdx dump 4123\n"
               "  hangdx dump --locals --json 4123 > stacks.json\n\n"
               "exit status: 0 all read, 1 partial (a process exited while being read, or could\n"
               "not be read whole: another user's, or traced by another tracer), 2 failure (no\n"
               "such process), 64 usage error.\n");
}

int hdx_cmd_dump(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'},        {"locals", no_argument, NULL, 'l'},
        {"python-only", no_argument, NULL, 'p'}, {"native-lines", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int json = 0, native_lines = 0;
    unsigned flags = HDX_SAMPLE_PYTHON;
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'j': json = 1; break;
        case 'l': flags |= HDX_SAMPLE_LOCALS; break;
        case 'p': flags |= HDX_SAMPLE_NO_NATIVE; break;
        case 'N': native_lines = 1; break;
        case 'h': usage(stdout); return HDX_EXIT_OK;
        default: usage(stderr); return HDX_EXIT_USAGE;
        }
    }
    if (optind >= argc) {
        hdx_say(stderr, "hangdx dump: no PID given\n\n");
        usage(stderr);
        return HDX_EXIT_USAGE;
    }
    hdx_evidence *ev = hdx_evidence_new();
    if (!ev)
        return HDX_EXIT_FAILURE;
    hdx_stacks_set_native_lines(native_lines);
    int partial = 0;
    for (int i = optind; i < argc; i++) {
        long pid;
        if (hdx_parse_long(argv[i], 1, 1 << 22, &pid)) {
            hdx_say(stderr, "hangdx dump: '%s' is not a process id\n", argv[i]);
            hdx_evidence_free(ev);
            return HDX_EXIT_USAGE;
        }
        int root = (int)pid, *pids = NULL;
        size_t n = 0;
        if (hdx_proc_is_kernel_thread(root)) {
            hdx_say(stderr, "hangdx dump: process %d is a kernel thread: it has no user-space stacks\n", root);
            partial = 1;
            continue;
        }
        if (hdx_proc_descendants(&root, 1, &pids, &n) != 0) {
            hdx_say(stderr, "hangdx dump: no process %d — check the PID\n", root);
            partial = 1;
            continue;
        }
        for (size_t j = 0; j < n; j++) {
            if (hdx_evidence_find_process(ev, pids[j]))
                continue;
            hdx_process *p = hdx_evidence_add_process(ev);
            int r = p ? hdx_proc_read(p, pids[j]) : -ENOMEM;
            if (r == -EACCES || r == -EPERM) {
                /* another user's process: show what /proc still shows, and say what is not */
                char denied[512];
                if (hdx_proc_denied(pids[j], denied, sizeof denied) > 0)
                    hdx_say(stderr, "hangdx dump: /proc/%d: %s (it belongs to uid %d, hangdx runs as uid %d) — "
                                    "%s\n",
                            pids[j], denied, hdx_proc_uid(pids[j]), (int)geteuid(), hdx_proc_access_advice());
                partial = 1;
            } else if (r != 0) {
                if (p) { /* gone meanwhile, or unreadable */
                    if (r == -ESRCH && hdx_proc_state(pids[j]) == 'Z')
                        hdx_say(stderr, "hangdx dump: no process %d: it has exited (a zombie its parent has not "
                                        "reaped)\n", pids[j]);
                    else if (r == -ESRCH)
                        hdx_say(stderr, "hangdx dump: process %d exited while being inspected\n", pids[j]);
                    else
                        hdx_say(stderr, "hangdx dump: cannot read /proc/%d: %s\n", pids[j], strerror(-r));
                    hdx_process_clear(p);
                    ev->n_procs--;
                }
                partial = 1;
                continue;
            }
            if (hdx_sample_stacks(p, ev, flags) != 0)
                partial = 1;
            if (!hdx_proc_alive(p->pid, p->start_ticks)) {
                hdx_say(stderr, "hangdx dump: process %d exited while being inspected: its stacks may be "
                                "missing or partial\n", p->pid);
                p->alive = 0;
                partial = 1;
            }
        }
        free(pids);
    }
    if (json) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "schema", "hangdx.dump/1");
        cJSON *procs = cJSON_AddArrayToObject(o, "processes");
        for (size_t i = 0; i < ev->n_procs; i++)
            cJSON_AddItemToArray(procs, hdx_snapshot_process_json(&ev->procs[i]));
        cJSON *notes = cJSON_AddArrayToObject(o, "notes");
        for (size_t i = 0; i < ev->n_notes; i++)
            cJSON_AddItemToArray(notes, cJSON_CreateString(ev->notes[i]));
        char *s = hdx_json_print(o, 1);
        if (s)
            printf("%s\n", s);
        free(s);
        cJSON_Delete(o);
    } else {
        for (size_t i = 0; i < ev->n_procs; i++) {
            hdx_report_threads_text(stdout, &ev->procs[i]);
            fputc('\n', stdout);
        }
    }
    for (size_t i = 0; i < ev->n_notes; i++) /* with --json too: what is missing, and why */
        hdx_say(stderr, "note: %s\n", ev->notes[i]);
    int status = !ev->n_procs ? HDX_EXIT_FAILURE : partial ? HDX_EXIT_PARTIAL : HDX_EXIT_OK;
    hdx_stacks_forget();
    hdx_evidence_free(ev);
    return status;
}
