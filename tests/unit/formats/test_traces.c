/* Unit tests of the trace reader (traces.h): torn and malformed lines, headers, and the
 * conversion of a hand-written trace directory into evidence. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/evidence.h"
#include "hangdx/trace.h"
#include "gather/proc.h"
#include "formats/traces.h"
#include "model/util.h"
#include "report/report.h"

#include "check.h"

static char tmpdir[] = "/tmp/hdx-test-traces-XXXXXX";

static int parse(const char *line, hdx_trace_event *ev, hdx_trace_image *img)
{
    memset(ev, 0, sizeof *ev);
    memset(img, 0, sizeof *img);
    return hdx_trace_parse_line(line, strlen(line), ev, img);
}

static void test_parse_line(void)
{
    hdx_trace_event ev;
    hdx_trace_image img;
    CHECK(parse("", &ev, &img) == 0);
    CHECK(parse("   \r", &ev, &img) == 0);
    CHECK(parse("{\"type\":\"wait\",\"t\":1700000000000000000,\"tid\":7,\"path\":\"/x/build/lock\",\"how\":\"stat\","
                "\"polls\":4,\"since\":1699999999000000000}",
                &ev, &img) == 1);
    CHECK(ev.type == HDX_TEV_WAIT && ev.tid == 7 && ev.polls == 4);
    CHECK(ev.t_ns == 1700000000000000000LL && ev.since_ns == 1699999999000000000LL);
    CHECK(ev.path && strcmp(ev.path, "/x/build/lock") == 0 && strcmp(ev.how, "stat") == 0);
    hdx_trace_event_clear(&ev);

    /* a truncated line (the last write of a killed process) */
    CHECK(parse("{\"type\":\"acquire\",\"t\":1,\"tid\":7,\"path\":\"/x/bu", &ev, &img) == -EBADMSG);
    /* garbage, a JSON array, a number, a string */
    CHECK(parse("\x01\x02garbage\xff", &ev, &img) == -EBADMSG);
    CHECK(parse("[1,2,3]", &ev, &img) == -EBADMSG);
    CHECK(parse("42", &ev, &img) == -EBADMSG);
    CHECK(parse("\"header\"", &ev, &img) == -EBADMSG);
    /* two objects glued together (a torn line followed by the next) */
    CHECK(parse("{\"type\":\"exit\",\"t\":1,\"tid\":1}{\"type\":\"exit\",\"t\":2,\"tid\":1}", &ev, &img) == -EBADMSG);
    /* missing type, type of the wrong type, wrong field types, a missing required field */
    CHECK(parse("{\"t\":1,\"tid\":1,\"path\":\"/a\"}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":3,\"t\":1}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"acquire\",\"t\":\"soon\",\"tid\":1,\"path\":\"/a\"}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"acquire\",\"t\":1,\"tid\":1,\"path\":17}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"acquire\",\"t\":1,\"tid\":1}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"acquire\",\"t\":1,\"tid\":1,\"path\":\"relative/lock\"}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"lock_end\",\"t\":1,\"tid\":1,\"path\":\"/a\",\"op\":\"flock\"}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"header\",\"schema\":\"hangdx.trace/1\",\"pid\":\"12\"}", &ev, &img) == -EBADMSG);
    CHECK(parse("{\"type\":\"header\",\"pid\":12}", &ev, &img) == -EBADMSG);
    /* an unknown event type: well-formed, skipped and counted */
    CHECK(parse("{\"type\":\"teleport\",\"t\":1,\"tid\":1}", &ev, &img) == -ENOMSG);
    /* a header of another schema version is refused */
    CHECK(parse("{\"type\":\"header\",\"schema\":\"hangdx.trace/9\",\"pid\":12}", &ev, &img) == -EPROTONOSUPPORT);

    /* a full header */
    CHECK(parse("{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":5,\"pid\":12,\"ppid\":1,\"host\":\"n1\","
                "\"boot_id\":\"b\",\"start_time\":777,\"cwd\":\"/w\",\"exe\":\"/usr/bin/python3\","
                "\"argv\":[\"python3\",\"train.py\"],\"env\":{\"RANK\":\"3\",\"LOCAL_RANK\":\"1\","
                "\"WORLD_SIZE\":\"8\",\"SECRET\":\"x\"}}",
                &ev, &img) == 2);
    CHECK(img.pid == 12 && img.ppid == 1 && img.start_ticks == 777 && img.t_ns == 5);
    CHECK(img.rank == 3 && img.local_rank == 1 && img.world_size == 8);
    CHECK(img.argc == 2 && strcmp(img.argv[1], "train.py") == 0);
    CHECK(img.n_env == 3); /* SECRET is not an allowed name */
    CHECK(strcmp(img.host, "n1") == 0 && strcmp(img.cwd, "/w") == 0);
    hdx_trace_image_clear(&img);
}

static void write_file(const char *name, const char *text)
{
    char path[512];
    snprintf(path, sizeof path, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "w");
    if (!f) {
        perror(path);
        exit(2);
    }
    fputs(text, f);
    fclose(f);
}

static void clear_dir(void)
{
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", tmpdir);
    if (system(cmd) != 0)
        exit(2);
}

/* A pid that does not exist now (pid_max is at most 4194304). */
#define DEAD_PID 4194303

static void test_load_dir(void)
{
    hdx_trace_set *set = NULL;
    char *err = NULL;

    /* no such directory; a directory without traces */
    CHECK(hdx_trace_load_dir("/nonexistent/traces", &set, &err) == -ENOENT);
    CHECK(err && strstr(err, "no such directory"));
    free(err);
    err = NULL;
    CHECK(hdx_trace_load_dir(tmpdir, &set, &err) == -ENOENT);
    CHECK(err && strstr(err, "not a hangdx trace directory"));
    free(err);
    err = NULL;

    /* lines before a header, garbage, two headers (an exec), a long line, a torn last line */
    char *huge = malloc(3u << 20);
    size_t k = (size_t)sprintf(huge, "{\"type\":\"wait\",\"t\":9,\"tid\":1,\"path\":\"/");
    memset(huge + k, 'a', (3u << 20) - k - 200);
    strcpy(huge + (3u << 20) - 200, "\",\"how\":\"stat\"}\n");
    char *text = hdx_asprintf(
        "{\"type\":\"acquire\",\"t\":1,\"tid\":5,\"path\":\"/early/lock\"}\n"
        "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":10,\"pid\":5,\"ppid\":1,\"host\":\"h\","
        "\"argv\":[\"sh\"],\"env\":{}}\n"
        "not json at all\n"
        "[\"array\"]\n"
        "{\"type\":\"spawn\",\"t\":11,\"tid\":5,\"child\":6,\"via\":\"fork\",\"argv\":[]}\n"
        "{\"type\":\"mystery\",\"t\":12,\"tid\":5}\n"
        "%s"
        "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":20,\"pid\":5,\"ppid\":1,\"host\":\"h\","
        "\"argv\":[\"python3\",\"x.py\"],\"env\":{\"RANK\":\"2\"}}\n"
        "{\"type\":\"exit\",\"t\":21,\"tid\":5,\"status\":0,\"dropped\":3}\n"
        "{\"type\":\"acquire\",\"t\":22,\"tid\":5,\"path\":\"/x/bu",
        huge);
    write_file("h-5.jsonl", text);
    free(text);
    free(huge);
    write_file("README", "not a trace\n");
    CHECK(hdx_trace_load_dir(tmpdir, &set, &err) == 0);
    CHECK(set && set->n_files == 1);
    CHECK(set && set->n_images == 2);
    if (set && set->n_images == 2) {
        CHECK(set->images[0].argc == 1 && set->images[0].n_events == 1);
        CHECK(set->images[0].events[0].type == HDX_TEV_SPAWN && set->images[0].events[0].child == 6);
        CHECK(set->images[1].rank == 2 && set->images[1].n_events == 1);
        CHECK(set->images[1].events[0].type == HDX_TEV_EXIT && set->images[1].events[0].dropped == 3);
        CHECK(strstr(set->images[1].file, "h-5.jsonl") != NULL);
    }
    /* the line before the header, garbage, the array, the huge line, the torn line */
    CHECK(set && set->skipped_lines == 5);
    CHECK(set && set->unknown_events == 1);
    CHECK(set && set->dropped_events == 3); /* the shim's count of events it could not record */
    hdx_trace_set_free(set);
    set = NULL;

    /* an unknown schema version: refused, naming the file and both versions */
    write_file("h-7.jsonl", "{\"schema\":\"hangdx.trace/2\",\"type\":\"header\",\"t\":1,\"pid\":7}\n");
    CHECK(hdx_trace_load_dir(tmpdir, &set, &err) == -EPROTONOSUPPORT);
    CHECK(set == NULL);
    CHECK(err && strstr(err, "h-7.jsonl") && strstr(err, "hangdx.trace/2") && strstr(err, "hangdx.trace/1"));
    if (err)
        printf("refused as expected: %s\n", err);
    free(err);
    clear_dir();
}

static void test_to_evidence(void)
{
    const char *boot = hdx_proc_boot_id();
    char *r0 = hdx_asprintf(
        "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1700000000000000000,\"pid\":%d,\"ppid\":1,"
        "\"host\":\"%s\",\"boot_id\":\"%s\",\"start_time\":12345,\"cwd\":\"/x\",\"exe\":\"/usr/bin/python3\","
        "\"argv\":[\"python3\",\"train.py\"],\"env\":{\"RANK\":\"0\",\"WORLD_SIZE\":\"2\"}}\n"
        "{\"type\":\"acquire\",\"t\":1700000001000000000,\"tid\":%d,\"path\":\"/x/build/lock\",\"fd\":5}\n"
        "{\"type\":\"spawn\",\"t\":1700000001500000000,\"tid\":%d,\"child\":99,\"via\":\"posix_spawn\","
        "\"argv\":[\"ninja\",\"-v\"]}\n",
        DEAD_PID, hdx_hostname(), boot, DEAD_PID, DEAD_PID);
    char *r1 = hdx_asprintf(
        "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1700000000000000000,\"pid\":%d,\"ppid\":1,"
        "\"host\":\"%s\",\"boot_id\":\"%s\",\"start_time\":1,\"cwd\":\"/x\",\"exe\":\"/usr/bin/python3\","
        "\"argv\":[\"python3\",\"train.py\"],\"env\":{\"RANK\":\"1\",\"WORLD_SIZE\":\"2\"}}\n"
        "{\"type\":\"wait\",\"t\":1700000002000000000,\"tid\":%d,\"path\":\"/x/build/lock\",\"how\":\"eexist\","
        "\"polls\":1,\"since\":1700000002000000000}\n"
        "{\"type\":\"wait\",\"t\":1700000010000000000,\"tid\":%d,\"path\":\"/x/build/lock\",\"how\":\"stat\","
        "\"polls\":64,\"since\":1700000002000000000}\n"
        /* an earlier wait on another build dir that ended when this process took it */
        "{\"type\":\"wait\",\"t\":1700000000100000000,\"tid\":%d,\"path\":\"/y/build/lock\",\"how\":\"stat\","
        "\"polls\":1,\"since\":1700000000100000000}\n"
        "{\"type\":\"acquire\",\"t\":1700000000500000000,\"tid\":%d,\"path\":\"/y/build/lock\",\"fd\":4}\n"
        "{\"type\":\"release\",\"t\":1700000000900000000,\"tid\":%d,\"path\":\"/y/build/lock\"}\n",
        DEAD_PID - 1, hdx_hostname(), boot, DEAD_PID - 1, DEAD_PID - 1, DEAD_PID - 1, DEAD_PID - 1, DEAD_PID - 1);
    char name[64];
    snprintf(name, sizeof name, "n-%d.jsonl", DEAD_PID);
    write_file(name, r0);
    snprintf(name, sizeof name, "n-%d.jsonl", DEAD_PID - 1);
    write_file(name, r1);
    free(r0);
    free(r1);

    hdx_trace_set *set = NULL;
    char *err = NULL;
    CHECK(hdx_trace_load_dir(tmpdir, &set, &err) == 0);
    free(err);
    if (!set)
        return;
    CHECK(set->n_images == 2 && set->skipped_lines == 0);
    hdx_evidence *ev = hdx_evidence_new();
    CHECK(hdx_trace_to_evidence(set, ev, 1, hdx_proc_trace_host()) == 0);

    CHECK(ev->n_locks == 1);
    hdx_lock *l = hdx_evidence_find_lock(ev, "/x/build/lock");
    CHECK(l != NULL);
    CHECK(hdx_evidence_find_lock(ev, "/y/build/lock") == NULL);
    if (l) {
        CHECK(l->kind == HDX_LOCK_BATON);
        CHECK(l->has_creator == 1 && l->creator_pid == DEAD_PID && l->creator_rank == 0);
        CHECK(l->creator_alive == 0);
        CHECK(l->created_ns == 1700000001000000000LL);
        CHECK(l->n_waiters == 1);
        if (l->n_waiters == 1) {
            CHECK(l->waiters[0].pid == DEAD_PID - 1 && l->waiters[0].rank == 1);
            CHECK(l->waiters[0].since_ns == 1700000002000000000LL);
            CHECK(l->waiters[0].how && strcmp(l->waiters[0].how, "eexist") == 0);
        }
    }
    CHECK(ev->n_procs == 2);
    hdx_process *p0 = hdx_evidence_find_process(ev, DEAD_PID);
    CHECK(p0 && p0->rank == 0 && p0->world_size == 2 && p0->alive == 0 && p0->n_cmdline == 2);
    hdx_process *p1 = hdx_evidence_find_process(ev, DEAD_PID - 1);
    CHECK(p1 && p1->rank == 1);
    hdx_evidence_free(ev);

    /* Without a host (post-mortem) nothing of this machine is asked: the same boot id does
     * not make the creator's death known, and a note says that aliveness was not checked. */
    ev = hdx_evidence_new();
    CHECK(hdx_trace_to_evidence(set, ev, 1, NULL) == 0);
    l = hdx_evidence_find_lock(ev, "/x/build/lock");
    CHECK(l && l->creator_pid == DEAD_PID && l->creator_alive == HDX_UNKNOWN && l->creator_children == 0);
    p0 = hdx_evidence_find_process(ev, DEAD_PID);
    CHECK(p0 && p0->alive == HDX_UNKNOWN && p0->rank == 0);
    int unchecked = 0;
    for (size_t i = 0; i < ev->n_notes; i++)
        unchecked |= strstr(ev->notes[i], "read without a live host") != NULL;
    CHECK(unchecked);
    hdx_evidence_free(ev);

    /* Later, rank 1 got the lock: it no longer waits. */
    snprintf(name, sizeof name, "%s/n-%d.jsonl", tmpdir, DEAD_PID - 1);
    FILE *f = fopen(name, "a");
    fprintf(f, "{\"type\":\"acquire\",\"t\":1700000020000000000,\"tid\":%d,\"path\":\"/x/build/lock\",\"fd\":6}\n",
            DEAD_PID - 1);
    fclose(f);
    hdx_trace_set_free(set);
    set = NULL;
    CHECK(hdx_trace_load_dir(tmpdir, &set, NULL) == 0);
    ev = hdx_evidence_new();
    CHECK(set && hdx_trace_to_evidence(set, ev, 0, hdx_proc_trace_host()) == 0);
    l = hdx_evidence_find_lock(ev, "/x/build/lock");
    CHECK(l && l->n_waiters == 0 && l->creator_pid == DEAD_PID - 1 && l->creator_rank == 1);
    CHECK(ev->n_procs == 0);
    hdx_evidence_free(ev);
    hdx_trace_set_free(set);
    clear_dir();
}

/* A container whose processes are all gone, with a trace directory that was bind-mounted from
 * a path that shares nothing with the one read here: its lock cannot be found here, and is
 * named by the container's mount namespace. */
static void test_gone_container(void)
{
    char *t = hdx_asprintf(
        "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1700000000000000000,\"pid\":1,\"ppid\":0,"
        "\"host\":\"%s\",\"boot_id\":\"%s\",\"pid_ns\":4026532800,\"mnt_ns\":4026532801,"
        "\"trace_dir\":\"/qq-unmapped/zz\",\"start_time\":5,\"argv\":[\"python3\"],\"env\":{\"RANK\":\"0\"}}\n"
        "{\"type\":\"acquire\",\"t\":1700000001000000000,\"tid\":1,\"path\":\"/workspace/b/lock\",\"fd\":5}\n",
        hdx_hostname(), hdx_proc_boot_id());
    write_file("n-1-ns4026532800.jsonl", t);
    free(t);
    hdx_trace_set *set = NULL;
    CHECK(hdx_trace_load_dir(tmpdir, &set, NULL) == 0);
    hdx_evidence *ev = hdx_evidence_new();
    CHECK(set && hdx_trace_to_evidence(set, ev, 0, hdx_proc_trace_host()) == 0);
    CHECK(ev->n_locks == 1);
    if (ev->n_locks == 1) {
        const hdx_lock *l = &ev->locks[0];
        CHECK(l->foreign == 1 && l->mnt_ns == 4026532801u);
        CHECK(strcmp(l->path, "/workspace/b/lock") == 0);
        hdx_verdict v = {0};
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);
        CHECK(hdx_report_text(f, ev, &v, HDX_TREE_AUTO) == 0);
        fclose(f);
        CHECK(text && strstr(text, "/workspace/b/lock (a path in the container of mount namespace 4026532801, whose "
                                   "processes are all gone"));
        free(text);
    }
    hdx_evidence_free(ev);
    hdx_trace_set_free(set);
    clear_dir();
}

static void test_kernel_locks_and_remote(void)
{
    /* Rank 0 took a flock and stays; rank 1 blocks on it (lock_start, no lock_end).
     * The traces come from another host: aliveness cannot be checked here. */
    write_file("far-100.jsonl",
               "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1000,\"pid\":100,\"ppid\":1,"
               "\"host\":\"far-node\",\"boot_id\":\"00000000-0000-0000-0000-000000000000\",\"start_time\":5,"
               "\"env\":{\"RANK\":\"0\"}}\n"
               "{\"type\":\"lock_start\",\"t\":2000,\"tid\":100,\"path\":\"/c/x.lock\",\"fd\":3,\"op\":\"flock\","
               "\"cmd\":\"LOCK_EX\"}\n"
               "{\"type\":\"lock_end\",\"t\":2001,\"tid\":100,\"path\":\"/c/x.lock\",\"fd\":3,\"op\":\"flock\","
               "\"rc\":0,\"errno\":0}\n");
    write_file("far-101.jsonl",
               "{\"schema\":\"hangdx.trace/1\",\"type\":\"header\",\"t\":1000,\"pid\":101,\"ppid\":1,"
               "\"host\":\"far-node\",\"boot_id\":\"00000000-0000-0000-0000-000000000000\",\"start_time\":6,"
               "\"env\":{\"RANK\":\"1\"}}\n"
               "{\"type\":\"lock_start\",\"t\":3000,\"tid\":102,\"path\":\"/c/x.lock\",\"fd\":3,\"op\":\"flock\","
               "\"cmd\":\"LOCK_EX\"}\n");
    hdx_trace_set *set = NULL;
    CHECK(hdx_trace_load_dir(tmpdir, &set, NULL) == 0);
    hdx_evidence *ev = hdx_evidence_new();
    CHECK(set && hdx_trace_to_evidence(set, ev, 1, hdx_proc_trace_host()) == 0);
    hdx_lock *l = hdx_evidence_find_lock(ev, "/c/x.lock");
    CHECK(l && l->kind == HDX_LOCK_FLOCK);
    CHECK(l && l->has_creator && l->creator_pid == 100 && l->creator_rank == 0 && l->creator_alive == HDX_UNKNOWN);
    CHECK(l && l->n_waiters == 1 && l->waiters[0].pid == 101 && l->waiters[0].tid == 102 &&
          l->waiters[0].rank == 1 && l->waiters[0].since_ns == 3000 && !strcmp(l->waiters[0].how, "flock"));
    int noted = 0;
    for (size_t i = 0; i < ev->n_notes; i++)
        noted |= strstr(ev->notes[i], "far-node") != NULL;
    CHECK(noted);
    hdx_evidence_free(ev);
    hdx_trace_set_free(set);
    clear_dir();
}

int main(void)
{
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_parse_line();
    test_load_dir();
    test_to_evidence();
    test_kernel_locks_and_remote();
    test_gone_container();
    rmdir(tmpdir);
    if (failures) {
        fprintf(stderr, "%d check(s) failed\n", failures);
        return 1;
    }
    printf("traces: all checks passed\n");
    return 0;
}
