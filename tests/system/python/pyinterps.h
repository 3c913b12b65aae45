/*
 * The CPython interpreters of this machine that the Python reader's tests run
 * under: Debian's /usr/bin/python3.11, and every pyenv version >= 3.8
 * ($PYENV_ROOT, else `pyenv root`, else /root/.pyenv). Header-only: each test
 * program includes it once.
 */
#ifndef HDX_TEST_PYINTERPS_H
#define HDX_TEST_PYINTERPS_H

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

typedef struct pyinterp {
    char label[64]; /* "debian 3.11", "pyenv 3.8.18" */
    char path[512];
    int minor;
} pyinterp;

static int pyi_cmp(const void *a, const void *b)
{
    const pyinterp *x = a, *y = b;
    return x->minor != y->minor ? x->minor - y->minor : strcmp(x->label, y->label);
}

static int pyi_exec(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && access(path, X_OK) == 0;
}

/* Fill up to max interpreters; print what is skipped. Returns the count. */
static size_t pyi_find(pyinterp *out, size_t max)
{
    size_t n = 0;
    if (pyi_exec("/usr/bin/python3.11") && n < max) {
        snprintf(out[n].label, sizeof out[n].label, "debian 3.11");
        snprintf(out[n].path, sizeof out[n].path, "/usr/bin/python3.11");
        out[n++].minor = 11;
    } else {
        printf("skipped: Debian /usr/bin/python3.11 (not installed)\n");
    }
    char root[512] = "";
    const char *env = getenv("PYENV_ROOT");
    if (env && *env) {
        snprintf(root, sizeof root, "%s", env);
    } else {
        FILE *f = popen("pyenv root 2>/dev/null", "r");
        if (f) {
            if (fgets(root, sizeof root, f))
                root[strcspn(root, "\n")] = 0;
            pclose(f);
        }
        if (!*root)
            snprintf(root, sizeof root, "/root/.pyenv");
    }
    char vdir[600];
    snprintf(vdir, sizeof vdir, "%s/versions", root);
    DIR *d = opendir(vdir);
    if (!d) {
        printf("skipped: pyenv interpreters (no %s)\n", vdir);
    } else {
        struct dirent *de;
        while ((de = readdir(d))) {
            int major, minor, micro;
            if (sscanf(de->d_name, "%d.%d.%d", &major, &minor, &micro) != 3)
                continue;
            if (major != 3 || minor < 8) {
                printf("skipped: pyenv %s (older than 3.8)\n", de->d_name);
                continue;
            }
            char bin[1200];
            snprintf(bin, sizeof bin, "%s/%s/bin/python%d.%d", vdir, de->d_name, major, minor);
            if (!pyi_exec(bin)) {
                printf("skipped: pyenv %s (no %s)\n", de->d_name, bin);
                continue;
            }
            if (n >= max)
                break;
            snprintf(out[n].label, sizeof out[n].label, "pyenv %.50s", de->d_name);
            snprintf(out[n].path, sizeof out[n].path, "%.511s", bin);
            out[n++].minor = minor;
        }
        closedir(d);
    }
    qsort(out, n, sizeof *out, pyi_cmp);
    return n;
}

#endif
