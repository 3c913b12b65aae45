/* unwind_tables.h against libunwind-ptrace's own: every thread of a real
 * process (live_target, then python3), stopped, is unwound twice, with
 * _UPT_accessors as they are and with hdx_unwind_tables_find as their
 * find_proc_info; the frames must be the same, found without falling back
 * to _UPT_find_proc_info (which re-reads /proc/PID/maps).
 *   test_live_unwind_tables LIVE_TARGET [PYTHON]
 */
#include <dirent.h>
#include <libunwind-ptrace.h>
#include <sys/ptrace.h>
#include <sys/stat.h>

#include "live_util.h"
#include "native/unwind_tables.h"

#define MAX_FRAMES 128

static hdx_unwind_tables *cur_tables;

static int find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi, int need_unwind_info,
                          void *arg)
{
    return hdx_unwind_tables_find(cur_tables, as, ip, pi, need_unwind_info, arg);
}

static int unwind(unw_addr_space_t as, void *upt, unw_word_t *ips)
{
    unw_cursor_t c;
    int n = 0;
    if (unw_init_remote(&c, as, upt) < 0)
        return -1;
    do {
        unw_word_t ip = 0;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip == 0)
            break;
        ips[n++] = ip;
    } while (n < MAX_FRAMES && unw_step(&c) > 0);
    return n;
}

/* Stop each thread of pid, unwind it both ways, compare; returns threads unwound. */
static int check_process(int pid, const char *what)
{
    unw_accessors_t ours = _UPT_accessors;
    ours.find_proc_info = find_proc_info;
    unw_addr_space_t as_upt = unw_create_addr_space(&_UPT_accessors, 0);
    unw_addr_space_t as_ours = unw_create_addr_space(&ours, 0);
    hdx_map *maps = NULL;
    size_t n_maps = 0;
    CHECK(hdx_maps_read(pid, &maps, &n_maps) == 0 && n_maps > 0, "%s: the maps of %d", what, pid);
    cur_tables = hdx_unwind_tables_new(pid, maps, n_maps);
    CHECK(as_upt && as_ours && cur_tables, "%s: address spaces and tables of %d", what, pid);
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/task", pid);
    DIR *d = opendir(path);
    struct dirent *de;
    int threads = 0, frames = 0;
    while (d && cur_tables && (de = readdir(d))) {
        int tid = atoi(de->d_name);
        if (tid <= 0)
            continue;
        if (ptrace(PTRACE_SEIZE, tid, 0, 0) < 0)
            continue;
        int st;
        if (ptrace(PTRACE_INTERRUPT, tid, 0, 0) < 0 || waitpid(tid, &st, __WALL) != tid) {
            ptrace(PTRACE_DETACH, tid, 0, 0);
            continue;
        }
        void *upt = _UPT_create(tid);
        unw_word_t a[MAX_FRAMES], b[MAX_FRAMES];
        int na = upt ? unwind(as_upt, upt, a) : -1;
        int nb = upt ? unwind(as_ours, upt, b) : -1;
        if (upt)
            _UPT_destroy(upt);
        ptrace(PTRACE_DETACH, tid, 0, 0);
        int same = na == nb && na > 0 && memcmp(a, b, (size_t)na * sizeof a[0]) == 0;
        CHECK(same, "%s: thread %d: %d frames with _UPT_find_proc_info, %d with the tables", what, tid, na, nb);
        for (int i = 0; !same && i < (na > nb ? na : nb); i++)
            fprintf(stderr, "  #%d 0x%llx 0x%llx\n", i, i < na ? (unsigned long long)a[i] : 0ull,
                    i < nb ? (unsigned long long)b[i] : 0ull);
        threads++;
        frames += na > 0 ? na : 0;
    }
    if (d)
        closedir(d);
    size_t fb = hdx_unwind_tables_fallbacks(cur_tables), im = hdx_unwind_tables_images(cur_tables);
    fprintf(stderr, "%s: %d threads, %d frames, %zu images located, %zu fallbacks to _UPT_find_proc_info\n",
            what, threads, frames, im, fb);
    CHECK(threads > 0 && frames >= 3 * threads, "%s: %d threads, %d frames", what, threads, frames);
    CHECK(im >= 2, "%s: %zu images located", what, im);
    CHECK(fb == 0, "%s: %zu lookups fell back to _UPT_find_proc_info", what, fb);
    CHECK(live_untraced(pid) == 0, "%s: untraced afterwards", what);
    hdx_unwind_tables_free(cur_tables);
    cur_tables = NULL;
    hdx_maps_free(maps, n_maps);
    if (as_upt)
        unw_destroy_addr_space(as_upt);
    if (as_ours)
        unw_destroy_addr_space(as_ours);
    return threads;
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: test_live_unwind_tables LIVE_TARGET [PYTHON]\n");
        return 64;
    }
    hdx_unwind_tables_free(NULL);
    CHECK(hdx_unwind_tables_fallbacks(NULL) == 0 && hdx_unwind_tables_images(NULL) == 0, "NULL counts 0");
    errno = 0;
    hdx_map *none = NULL;
    size_t n_none = 0;
    CHECK(hdx_maps_read(999999999, &none, &n_none) == -ESRCH && !none && !n_none, "no such process: no maps");

    char dir[] = "/tmp/hdx-live-unwind-XXXXXX";
    if (!mkdtemp(dir))
        return 1;
    char *lock = hdx_asprintf("%s/build.lock", dir);
    char *targv[] = {argv[1], lock, NULL};
    char *tenv[] = {NULL};
    struct live_proc lp;
    char line[128];
    if (live_spawn(&lp, targv, tenv, dir) < 0 || live_read_line(lp.out, line, sizeof line, 10000) < 0) {
        fprintf(stderr, "FAIL: live_target did not start\n");
        return 1;
    }
    hdx_sleep_ms(200);
    check_process(lp.pid, "live_target");
    live_kill(&lp);
    unlink(lock);
    rmdir(dir);
    free(lock);

    struct stat st;
    if (argc > 2 && stat(argv[2], &st) == 0) {
        char *pyargv[] = {argv[2], "-c",
                          "import sys, threading, time\n"
                          "threading.Thread(target=time.sleep, args=(600,), daemon=True).start()\n"
                          "sys.stdout.write('ready\\n'); sys.stdout.flush()\ntime.sleep(600)",
                          NULL};
        char *pyenv[] = {NULL};
        if (live_spawn(&lp, pyargv, pyenv, NULL) == 0 && live_read_line(lp.out, line, sizeof line, 20000) == 0) {
            hdx_sleep_ms(100);
            check_process(lp.pid, "python");
        } else {
            CHECK(0, "python did not start");
        }
        live_kill(&lp);
    } else {
        fprintf(stderr, "skip: no Python interpreter given or found: the python3 process is not checked\n");
    }
    if (failures)
        fprintf(stderr, "%d failure(s)\n", failures);
    else
        fprintf(stderr, "ok\n");
    return failures ? 1 : 0;
}
