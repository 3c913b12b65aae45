/*
 * Redaction (model/redact.h) on a process built here whose environment is this test's own: the
 * test starts itself again with an environment it chose (/proc/self/environ shows the one a
 * process was started with), then redacts a command line, string locals and an allowed
 * variable, and compares each string exactly. Cases: a secret-named variable's value, whole and
 * inside a string; values that only equal another variable's (argv[0] is $_, "python",
 * "train.py", a conda environment's name) kept; -p VALUE (a port number kept), --password
 * VALUE, --token=VALUE; URL credentials in arguments, locals and MASTER_ADDR; URLs without any.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/evidence.h"
#include "model/redact.h"
#include "model/util.h"
#include "check.h"

static char *const child_env[] = {
    "HDX_REDACT_CHILD=1",
    "HF_TOKEN=hf_abcdefghijkl",
    "_=./prog",
    "PYTHON_NAME=python",
    "SCRIPT=train.py",
    "CONDA_DEFAULT_ENV=pytorch-env",
    "DATABASE_URL=postgres://dbuser:dbpass123@db.internal/app",
    "PATH=/usr/bin:/bin",
    NULL,
};

static void add_local(hdx_frame *f, const char *name, const char *value)
{
    hdx_local *v = hdx_append((void **)&f->locals, &f->n_locals, sizeof *v);
    CHECK(v != NULL);
    v->name = strdup(name);
    v->kind = HDX_VAL_STR;
    v->s = strdup(value);
}

static const char *local(const hdx_frame *f, const char *name)
{
    for (size_t i = 0; i < f->n_locals; i++)
        if (!strcmp(f->locals[i].name, name))
            return f->locals[i].s;
    return NULL;
}

static void test_urls(void)
{
    static const char *const none[] = {"no url here", "https://host.example/a@b", "a://@host", "://user@host",
                                       "https://<redacted>@host/x", "user@host.example",
                                       "https://h/x?q=1&page=2", "basic training loop", "Bearer token",
                                       "Bearer <redacted>", "?token=<redacted>", "Bearer tokenization step",
                                       "Cookie: <redacted>", "https://h/x?design=1&sigma=2", "https://h/x?", "a&token"};
    for (size_t i = 0; i < sizeof none / sizeof none[0]; i++) {
        char *r = hdx_redact_credentials(none[i]);
        CHECK(r == NULL && errno == 0, "%s became %s", none[i], r ? r : "(null)");
        free(r);
    }
    static const char *const in_out[][2] = {
        {"https://user:secret@host/x", "https://<redacted>@host/x"},
        {"https://ghp_token@github.com", "https://<redacted>@github.com"},
        {"git clone 'ssh://git:pw@h:22/r' && curl http://a:b@c?q=1@2",
         "git clone 'ssh://<redacted>@h:22/r' && curl http://<redacted>@c?q=1@2"},
        {"redis+tls://:pass@cache:6380/0", "redis+tls://<redacted>@cache:6380/0"},
        {"https://h/d?token=abc123&x=1#f", "https://h/d?token=<redacted>&x=1#f"},
        {"s3://b/k?X-Amz-Credential=AKIA/x&X-Amz-Signature=f00d", "s3://b/k?X-Amz-Credential=<redacted>&X-Amz-Signature=<redacted>"},
        {"Authorization: Bearer eyJhbGciOi.x-y", "Authorization: Bearer <redacted>"},
        {"authorization:Basic dXNlcjpwYXNz= next", "authorization:Basic <redacted> next"},
        {"Authorization: ghp_abc", "Authorization: <redacted>"},
        {"{'Authorization': 'Bearer hf_abcdefghijklmnop'}", "{'Authorization': 'Bearer <redacted>'}"},
        {"https://u:p@h/x?api_key=k1 and Bearer tokentokentokentoken", "https://<redacted>@h/x?api_key=<redacted> and Bearer <redacted>"},
        {"https://a.blob.core.windows.net/c/b?sv=2022&sp=r&sig=AbCd1234%3D", "https://a.blob.core.windows.net/c/b?sv=2022&sp=r&sig=<redacted>"},
        {"curl -H 'Cookie: session=abc123; id=7' https://h", "curl -H 'Cookie: <redacted>' https://h"},
    };
    for (size_t i = 0; i < sizeof in_out / sizeof in_out[0]; i++) {
        char *r = hdx_redact_credentials(in_out[i][0]);
        CHECK(r && !strcmp(r, in_out[i][1]), "%s became %s, not %s", in_out[i][0], r ? r : "(null)", in_out[i][1]);
        free(r);
    }
}

static void test_process(void)
{
    static const char *const argv_in[] = {
        "./prog", "python", "train.py", "-p", "hunter2secret", "-p", "29500", "--password", "pw-from-cli",
        "--token=tok-abcdef", "--repo", "https://oauth2:glpat-xyz@gitlab.example/a/b.git", "pytorch-env",
        "hf_abcdefghijkl", "Bearer hf_abcdefghijkl", "--url=https://u:p@h/x and http://ghp_tok@github.com/y",
        "WANDB_API_KEY=wandb-secret-123", "OUTPUT_DIR=runs/exp1", "9KEY=not-a-variable",
    };
    static const char *const argv_out[] = {
        "./prog", "python", "train.py", "-p", "<redacted: value of -p>", "-p", "29500", "--password",
        "<redacted: value of --password>", "--token=<redacted>", "--repo",
        "https://<redacted>@gitlab.example/a/b.git", "pytorch-env", "<redacted: value of $HF_TOKEN>",
        "<redacted: holds the value of $HF_TOKEN>", "--url=https://<redacted>@h/x and http://<redacted>@github.com/y",
        "WANDB_API_KEY=<redacted>", "OUTPUT_DIR=runs/exp1", "9KEY=not-a-variable",
    };
    size_t n = sizeof argv_in / sizeof argv_in[0];
    hdx_evidence *ev = hdx_evidence_new();
    hdx_process *p = ev ? hdx_evidence_add_process(ev) : NULL;
    hdx_thread *t = p ? hdx_process_add_thread(p) : NULL;
    hdx_frame *f = t ? hdx_thread_add_frame(t) : NULL;
    CHECK(f != NULL);
    if (!f)
        return;
    p->pid = getpid();
    p->cmdline = calloc(n, sizeof *p->cmdline);
    for (size_t i = 0; i < n; i++)
        p->cmdline[i] = strdup(argv_in[i]);
    p->n_cmdline = n;
    add_local(f, "token", "hf_abcdefghijkl");
    add_local(f, "env_name", "pytorch-env");
    add_local(f, "prog", "./prog");
    add_local(f, "dsn", "postgres://dbuser:dbpass123@db.internal/app");
    add_local(f, "pw", "hunter2secret");
    add_local(f, "db_password", "from-config");
    CHECK(hdx_process_set_env(p, "MASTER_ADDR", "https://user:secret@host.example:29500") == 0);

    int count = hdx_redact_secrets(p);
    for (size_t i = 0; i < n; i++)
        CHECK(!strcmp(p->cmdline[i], argv_out[i]), "argv[%zu] %s, not %s", i, p->cmdline[i], argv_out[i]);
    static const char *const locals[][2] = {
        {"token", "<redacted: value of $HF_TOKEN>"},
        {"env_name", "pytorch-env"},
        {"prog", "./prog"},
        {"dsn", "postgres://<redacted>@db.internal/app"},
        {"pw", "<redacted: value of -p>"},
        {"db_password", "<redacted: its name says it is a secret>"},
    };
    for (size_t i = 0; i < sizeof locals / sizeof locals[0]; i++) {
        const char *s = local(f, locals[i][0]);
        CHECK(s && !strcmp(s, locals[i][1]), "local %s is %s, not %s", locals[i][0], s ? s : "(none)", locals[i][1]);
    }
    /* 8 of the command line, 4 locals */
    CHECK(count == 12, "%d strings replaced", count);
    const char *addr = hdx_process_env(p, "MASTER_ADDR");
    CHECK(addr && !strcmp(addr, "https://<redacted>@host.example:29500"), "MASTER_ADDR %s", addr ? addr : "(none)");
    hdx_evidence_free(ev);
}

int main(int argc, char **argv)
{
    (void)argc;
    if (!getenv("HDX_REDACT_CHILD")) {
        execve("/proc/self/exe", argv, child_env);
        fprintf(stderr, "test_redact: cannot start itself again: %s\n", strerror(errno));
        return 1;
    }
    test_urls();
    test_process();
    return failures ? 1 : 0;
}
