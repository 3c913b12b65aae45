#include "model/redact.h"

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "hangdx/trace.h"
#include "model/util.h"

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
    char *label;  /* "$NAME" (an environment variable) or "--option" (the command line); heap */
    char *value;  /* heap; looked for in whole strings and inside longer ones ("Bearer <token>") */
};

/* Names that say their value is a secret. Only such variables' values are looked for: a value
 * that merely equals another variable's (argv[0] is $_, a conda environment's name is in its
 * paths) says nothing secret. name: upper case. */
static int secret_name(const char *name)
{
    static const char *const words[] = {"TOKEN", "SECRET", "PASSWORD", "PASSWD", "PASS", "KEY", "CREDENTIAL",
                                        "AUTH", "COOKIE", "SESSION", "PRIVATE", "SIGNATURE", "SAS", NULL};
    for (size_t i = 0; words[i]; i++)
        if (strstr(name, words[i]))
            return 1;
    return 0;
}

/* secret_name() of an identifier in any case ("--hf-token", "api_key", "password"): the first
 * len bytes of s, '-' read as '_'. */
static int secret_identifier(const char *s, size_t len)
{
    char name[64];
    if (len >= sizeof name)
        return 0;
    for (size_t i = 0; i < len; i++)
        name[i] = s[i] == '-' ? '_' : (char)toupper((unsigned char)s[i]);
    name[len] = 0;
    return secret_name(name);
}

static int worth_hiding(const char *v, const hdx_process *p)
{
    size_t l = strlen(v);
    if (l < MIN_SECRET || v[0] == '/' || strspn(v, "0123456789") == l || !strncmp(v, "<redacted", 9))
        return 0;
    if (!strcmp(v, hdx_hostname()))
        return 0;
    for (size_t i = 0; i < p->n_env; i++)
        if (p->env[i].value && !strcmp(p->env[i].value, v))
            return 0;
    return 1;
}

static int add_secret(struct secret **sec, size_t *n, const char *label, size_t label_len, const char *value)
{
    struct secret *e = hdx_append((void **)sec, n, sizeof *e);
    if (!e)
        return -ENOMEM;
    e->label = strndup(label, label_len);
    e->value = strdup(value);
    return e->label && e->value ? 0 : -ENOMEM;
}

/* Where the userinfo of a URL at or after s starts ("scheme://USERINFO@host"), its length in
 * *len; NULL when s holds none. The authority ends at '/', '?', '#', a blank or a quote. */
static const char *url_userinfo(const char *s, size_t *len)
{
    for (const char *m = strstr(s, "://"); m; m = strstr(m + 3, "://")) {
        if (m == s || !(isalnum((unsigned char)m[-1]) || strchr("+.-", m[-1])))
            continue; /* no scheme before it */
        const char *a = m + 3;
        size_t end = strcspn(a, "/?#\"' \t\n");
        const char *at = NULL;
        for (size_t i = 0; i < end; i++)
            if (a[i] == '@')
                at = a + i;
        if (at && at > a && strncmp(a, "<redacted>@", 11)) {
            *len = (size_t)(at - a);
            return a;
        }
    }
    return NULL;
}

/* Where the value of a query parameter at or after s whose name says it is a secret starts
 * ("?token=VALUE", "&X-Amz-Signature=VALUE"), its length in *len; NULL when s holds none. The
 * value ends at '&', '#', a blank or a quote. */
static const char *query_secret(const char *s, size_t *len)
{
    for (const char *q = strpbrk(s, "?&"); q; q = strpbrk(q + 1, "?&")) {
        const char *name = q + 1;
        size_t n = strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-.");
        if (!n || name[n] != '=')
            continue;
        const char *v = name + n + 1;
        size_t l = strcspn(v, "&#\"' \t\n");
        /* "sig": an Azure shared access signature's */
        int secret = secret_identifier(name, n) || (n == 3 && !strncasecmp(name, "sig", 3));
        if (l && strncmp(v, "<redacted>", 10) && secret) {
            *len = l;
            return v;
        }
    }
    return NULL;
}

/* A bare "Bearer X" is taken for credentials from this length on: tokens are long (a JWT, hf_
 * and ghp_ tokens: 37 bytes and more), prose is not ("Bearer tokens"). */
#define BEARER_MIN 16

/* Where the credentials of an HTTP authorization at or after s start, their length in *len;
 * NULL when s holds none. They are what follows "Authorization:" and its scheme ("Authorization:
 * Basic BASE64", "authorization: token X", as in a curl -H argument), or "Bearer TOKEN" anywhere
 * (a headers dict's value) when TOKEN has BEARER_MIN bytes or more, or the value of a "Cookie:"
 * header (to a quote or the end); the words are matched in any case, the credentials are a
 * token68 (RFC 7235: letters, digits, "-._~+/="). */
static const char *auth_credentials(const char *s, size_t *len)
{
    static const char token68[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=";
    for (const char *c = s; *c; c++) {
        if (c > s && isalnum((unsigned char)c[-1]))
            continue;
        const char *v = NULL;
        size_t min = 1, l = 0;
        if (!strncasecmp(c, "authorization:", 14)) {
            v = c + 14 + strspn(c + 14, " \t");
            size_t scheme = strspn(v, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz");
            if (scheme && v[scheme] == ' ')
                v += scheme + strspn(v + scheme, " ");
        } else if (!strncasecmp(c, "bearer ", 7)) {
            v = c + 7;
            min = BEARER_MIN;
        } else if (!strncasecmp(c, "cookie:", 7)) {
            v = c + 7 + strspn(c + 7, " \t");
            l = strncmp(v, "<redacted>", 10) ? strcspn(v, "\"'\n") : 0;
        }
        if (v && !l)
            l = strspn(v, token68);
        if (l >= min) {
            *len = l;
            return v;
        }
    }
    return NULL;
}

/* The first credentials at or after s (the earliest of url_userinfo, query_secret and
 * auth_credentials), their length in *len; NULL when s holds none. */
static const char *next_credentials(const char *s, size_t *len)
{
    const char *(*const finders[])(const char *, size_t *) = {url_userinfo, query_secret, auth_credentials};
    const char *first = NULL;
    for (size_t i = 0; i < sizeof finders / sizeof *finders; i++) {
        size_t l;
        const char *c = finders[i](s, &l);
        if (c && (!first || c < first)) {
            first = c;
            *len = l;
        }
    }
    return first;
}

char *hdx_redact_credentials(const char *s)
{
    static const char blank[] = "<redacted>";
    size_t len, n = 0, cut = 0;
    for (const char *u = next_credentials(s, &len); u; u = next_credentials(u + len, &len)) {
        n++;
        cut += len;
    }
    errno = 0;
    if (!n)
        return NULL;
    char *out = malloc(strlen(s) - cut + n * (sizeof blank - 1) + 1), *o = out;
    if (!out)
        return NULL;
    const char *from = s;
    for (const char *u = next_credentials(s, &len); u; from = u + len, u = next_credentials(from, &len)) {
        memcpy(o, from, (size_t)(u - from));
        o += u - from;
        memcpy(o, blank, sizeof blank - 1);
        o += sizeof blank - 1;
    }
    strcpy(o, from);
    return out;
}

/* The replacement for s, or NULL when s holds no secret (or on ENOMEM, *oom set). */
static char *redacted(const char *s, const struct secret *sec, size_t n, int *oom)
{
    for (size_t i = 0; s && i < n; i++) {
        if (!strstr(s, sec[i].value))
            continue;
        char *r = hdx_asprintf(strcmp(s, sec[i].value) ? "<redacted: holds the value of %s>"
                                                        : "<redacted: value of %s>",
                               sec[i].label);
        if (!r)
            *oom = 1;
        return r;
    }
    return NULL;
}

/* Replace *s when it holds a secret, or blank the credentials in it (hdx_redact_credentials); counts in
 * *count. */
static void redact_string(char **s, const struct secret *sec, size_t n, int *count, int *oom)
{
    char *r = redacted(*s, sec, n, oom);
    if (!r && !*oom && *s && !(r = hdx_redact_credentials(*s)) && errno == ENOMEM)
        *oom = 1;
    if (r) {
        free(*s);
        *s = r;
        (*count)++;
    }
}

/* String locals: those that hold a secret, and those whose name says they are one. */
static void redact_frames(hdx_frame *f, size_t nf, const hdx_process *p, const struct secret *sec, size_t n,
                          int *count, int *oom)
{
    for (size_t i = 0; i < nf; i++) {
        if (f[i].pooled)
            continue;
        for (size_t j = 0; j < f[i].n_locals; j++) {
            hdx_local *v = &f[i].locals[j];
            if (v->kind != HDX_VAL_STR || !v->s)
                continue;
            redact_string(&v->s, sec, n, count, oom);
            if (v->name && secret_identifier(v->name, strlen(v->name)) && worth_hiding(v->s, p)) {
                char *r = strdup("<redacted: its name says it is a secret>");
                if (!r) {
                    *oom = 1;
                    continue;
                }
                free(v->s);
                v->s = r;
                (*count)++;
            }
        }
    }
}

/* The values of p's environment variables whose names say they are secrets, outside the
 * allowed names, that are worth hiding (none when /proc/PID/environ cannot be read). 0 or
 * -ENOMEM. */
static int env_secrets(const hdx_process *p, struct secret **sec, size_t *n)
{
    char path[64];
    size_t len = 0;
    snprintf(path, sizeof path, "/proc/%d/environ", p->pid);
    char *buf = hdx_read_file(path, 4 << 20, &len);
    if (!buf)
        return errno == ENOMEM ? -ENOMEM : 0;
    int r = 0;
    for (size_t i = 0; i < len && r == 0;) {
        char *kv = buf + i;
        size_t l = strnlen(kv, len - i);
        i += l + 1;
        char *eq = memchr(kv, '=', l);
        if (!eq || is_allowed(kv, (size_t)(eq - kv)) || !worth_hiding(eq + 1, p))
            continue;
        char label[80];
        int ll = snprintf(label, sizeof label, "$%.*s", (int)(eq - kv), kv);
        *eq = 0;
        if (secret_identifier(kv, strlen(kv)))
            r = add_secret(sec, n, label, ll < (int)sizeof label ? (size_t)ll : sizeof label - 1, eq + 1);
    }
    free(buf);
    return r;
}

/* The values of command-line options whose names say they are secrets (or -p, the password of
 * mysql, sshpass and the like: its value is kept when it is no secret by worth_hiding, a port
 * number) and that no environment value covered: each is replaced, and becomes a secret looked
 * for in the locals. */
static int option_secrets(hdx_process *p, struct secret **sec, size_t *n, int *count)
{
    for (size_t i = 0; i < p->n_cmdline; i++) {
        const char *a = p->cmdline[i];
        const char *name = a + strspn(a, "-");
        const char *eq = strchr(name, '=');
        size_t len = eq ? (size_t)(eq - name) : strlen(name);
        /* An option, or a variable's assignment ("env HF_TOKEN=... python train.py"). */
        if (a[0] != '-' && !(eq && len && strspn(a, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_") == len &&
                             !isdigit((unsigned char)a[0])))
            continue;
        /* an option's name is an identifier: "-H 'authorization: token X'" as one word is none */
        if (!len || (a[0] == '-' && strspn(name, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_-") != len) ||
            !(secret_identifier(name, len) || !strcmp(a, "-p")))
            continue;
        size_t at = eq ? i : i + 1;
        const char *value = eq ? eq + 1 : at < p->n_cmdline ? p->cmdline[at] : NULL;
        if (!value || (!eq && value[0] == '-') || !worth_hiding(value, p))
            continue;
        size_t opt_len = eq ? (size_t)(eq - a) : strlen(a);
        char *r = eq ? hdx_asprintf("%.*s=<redacted>", (int)opt_len, a) : hdx_asprintf("<redacted: value of %s>", a);
        if (!r || add_secret(sec, n, a, opt_len, value) < 0) {
            free(r);
            return -ENOMEM;
        }
        free(p->cmdline[at]);
        p->cmdline[at] = r;
        (*count)++;
    }
    return 0;
}

/* The steps of hdx_redact_secrets (redact.h), step 1 only with with_env. */
static int redact(hdx_process *p, int with_env)
{
    struct secret *sec = NULL;
    size_t n = 0;
    int count = 0, oom = with_env && env_secrets(p, &sec, &n) < 0;
    for (size_t i = 0; !oom && i < p->n_cmdline; i++)
        redact_string(&p->cmdline[i], sec, n, &count, &oom);
    if (!oom && option_secrets(p, &sec, &n, &count) < 0)
        oom = 1;
    for (size_t t = 0; !oom && t < p->n_threads; t++) {
        redact_frames(p->threads[t].frames, p->threads[t].n_frames, p, sec, n, &count, &oom);
        redact_frames(p->threads[t].py_frames, p->threads[t].n_py_frames, p, sec, n, &count, &oom);
    }
    for (size_t i = 0; i < n; i++) {
        free(sec[i].label);
        free(sec[i].value);
    }
    free(sec);
    return oom ? -ENOMEM : count;
}

int hdx_redact_secrets(hdx_process *p)
{
    return redact(p, 1);
}

int hdx_redact_command_line(hdx_process *p)
{
    return redact(p, 0);
}
