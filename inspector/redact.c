#include "redact.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hangdx/trace.h"
#include "util.h"

#define MIN_SECRET 6

static const char *const allowed_names[] = {HDX_TRACE_ENV_NAMES};

static int is_allowed(const char *name, size_t len)
{
    for (size_t i = 0; allowed_names[i]; i++)
        if (strlen(allowed_names[i]) == len && !memcmp(allowed_names[i], name, len))
            return 1;
    return 0;
}

struct secret {
    const char *name; /* into the environ buffer, NUL-terminated */
    const char *value;
    int inside;       /* also looked for inside longer strings ("Bearer <token>") */
};

/* Names that say their value is a secret: its copies inside longer strings are redacted too.
 * Other values only where a string is exactly the value: a word such as a conda environment's
 * name also appears in paths that the classifier needs (a build directory). */
static int secret_name(const char *name)
{
    static const char *const words[] = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "CREDENTIAL",
                                        "AUTH", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE", "SAS", NULL};
    for (size_t i = 0; words[i]; i++)
        if (strstr(name, words[i]))
            return 1;
    return 0;
}

static int worth_hiding(const char *v, const hdx_process *p)
{
    size_t l = strlen(v);
    if (l < MIN_SECRET || v[0] == '/' || strspn(v, "0123456789") == l)
        return 0;
    if (!strcmp(v, hdx_hostname()))
        return 0;
    for (size_t i = 0; i < p->n_env; i++)
        if (p->env[i].value && !strcmp(p->env[i].value, v))
            return 0;
    return 1;
}

/* The replacement for s, or NULL when s holds no secret (or on ENOMEM, *oom set). */
static char *redacted(const char *s, const struct secret *sec, size_t n, int *oom)
{
    for (size_t i = 0; s && i < n; i++) {
        if (sec[i].inside ? !strstr(s, sec[i].value) : strcmp(s, sec[i].value) != 0)
            continue;
        char *r = hdx_asprintf(strcmp(s, sec[i].value) ? "<redacted: holds the value of $%s>"
                                                        : "<redacted: value of $%s>",
                               sec[i].name);
        if (!r)
            *oom = 1;
        return r;
    }
    return NULL;
}

static int redact_frames(hdx_frame *f, size_t nf, const struct secret *sec, size_t n, int *oom)
{
    int count = 0;
    for (size_t i = 0; i < nf; i++) {
        if (f[i].pooled)
            continue;
        for (size_t j = 0; j < f[i].n_locals; j++) {
            hdx_local *v = &f[i].locals[j];
            if (v->kind != HDX_VAL_STR)
                continue;
            char *r = redacted(v->s, sec, n, oom);
            if (r) {
                free(v->s);
                v->s = r;
                count++;
            }
        }
    }
    return count;
}

static int redact_env_values(hdx_process *p)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof path, "/proc/%d/environ", p->pid);
    char *buf = hdx_read_file(path, 4 << 20, &len);
    if (!buf)
        return errno == ENOMEM ? -ENOMEM : 0;
    struct secret *sec = NULL;
    size_t n = 0;
    int count = 0, oom = 0;
    for (size_t i = 0; i < len;) {
        char *kv = buf + i;
        size_t l = strnlen(kv, len - i);
        i += l + 1;
        char *eq = memchr(kv, '=', l);
        if (!eq || is_allowed(kv, (size_t)(eq - kv)))
            continue;
        *eq = 0;
        if (!worth_hiding(eq + 1, p))
            continue;
        struct secret *e = hdx_append((void **)&sec, &n, sizeof *e);
        if (!e) {
            oom = 1;
            goto out;
        }
        e->name = kv;
        e->value = eq + 1;
        e->inside = secret_name(kv);
    }
    for (size_t i = 0; n && i < p->n_cmdline; i++) {
        char *r = redacted(p->cmdline[i], sec, n, &oom);
        if (r) {
            free(p->cmdline[i]);
            p->cmdline[i] = r;
            count++;
        }
    }
    for (size_t t = 0; n && t < p->n_threads; t++) {
        count += redact_frames(p->threads[t].frames, p->threads[t].n_frames, sec, n, &oom);
        count += redact_frames(p->threads[t].py_frames, p->threads[t].n_py_frames, sec, n, &oom);
    }
out:
    free(sec);
    free(buf);
    return oom ? -ENOMEM : count;
}

/* 1 when a command-line option's name (without its dashes, up to '=') says its value is a
 * secret: "--hf-token", "--api_key", "--password". */
static int secret_option(const char *arg, size_t len)
{
    char name[64];
    if (len >= sizeof name)
        return 0;
    for (size_t i = 0; i < len; i++)
        name[i] = arg[i] == '-' ? '_' : (char)toupper((unsigned char)arg[i]);
    name[len] = 0;
    return secret_name(name);
}

/* The values of command-line options whose names say they are secrets, and that are not
 * values of the environment (those went first, named after their variable). */
static int redact_options(hdx_process *p, int *oom)
{
    int count = 0;
    for (size_t i = 0; i < p->n_cmdline; i++) {
        const char *a = p->cmdline[i];
        if (a[0] != '-')
            continue;
        const char *name = a + strspn(a, "-");
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        if (!len || !secret_option(name, len))
            continue;
        size_t at = eq ? i : i + 1;
        const char *value = eq ? eq + 1 : at < p->n_cmdline ? p->cmdline[at] : NULL;
        if (!value || (!eq && value[0] == '-') || !strncmp(value, "<redacted", 9) || !worth_hiding(value, p))
            continue;
        char *r = eq ? hdx_asprintf("%.*s=<redacted>", (int)(eq - a), a)
                     : hdx_asprintf("<redacted: value of %s>", a);
        if (!r) {
            *oom = 1;
            return count;
        }
        free(p->cmdline[at]);
        p->cmdline[at] = r;
        count++;
    }
    return count;
}

int hdx_redact_secrets(hdx_process *p)
{
    int count = redact_env_values(p), oom = 0;
    if (count < 0)
        return count;
    count += redact_options(p, &oom);
    return oom ? -ENOMEM : count;
}
