/*
 * Environment values stay on this host (docs/design.md, "what leaves the host"):
 * a process's environment is read only for the names of HDX_TRACE_ENV_NAMES,
 * but the value of any other variable can still sit in a Python local
 * (token = os.environ["HF_TOKEN"]) or in the command line. This module
 * blanks those copies before they reach the evidence.
 */
#ifndef HDX_REDACT_H
#define HDX_REDACT_H

#include "model/evidence.h"

/*
 * s with the credentials in it blanked, each replaced by "<redacted>":
 * - a URL's userinfo: "scheme://USERINFO@host..." becomes "scheme://<redacted>@host..." (the
 *   user too: a token is often the user name alone, as in https://TOKEN@github.com);
 * - the value of a query parameter whose name says it is a secret (TOKEN, KEY, SIGNATURE, ...,
 *   as for variables, and "sig", an Azure shared access signature's): "?token=<redacted>&x=1",
 *   "&X-Amz-Signature=<redacted>", "&sig=<redacted>";
 * - HTTP authorization credentials (RFC 7235): what follows "Authorization:" and its scheme,
 *   "Bearer TOKEN" anywhere when TOKEN has 16 bytes or more ("Bearer <redacted>"; prose such
 *   as "Bearer tokens" stays), and the value of a "Cookie:" header, to a quote or the end.
 * Returns a heap copy the caller frees, or NULL: with errno 0 when s holds none of these,
 * ENOMEM when out of memory.
 */
char *hdx_redact_credentials(const char *s);

/*
 * Blank the secrets of p before they reach the evidence. Returns how many
 * strings were replaced, or -ENOMEM (what was replaced stays replaced).
 *
 * 1. Environment values: in p's command line and in the string locals of its
 *    frames (frames and py_frames of every thread; pooled frames are left
 *    alone) each string that is, or holds, the value of an environment
 *    variable of p (/proc/PID/environ) outside HDX_TRACE_ENV_NAMES whose name
 *    says it is a secret (TOKEN, SECRET, PASSWORD, KEY, AUTH, ...: "<redacted:
 *    value of $NAME>", "<redacted: holds the value of $NAME>"). A value is
 *    not redacted because it equals another variable's: argv[0] is $_, and a
 *    conda environment's name also appears in paths the classifier reads.
 *    Values that are not looked for, as they say nothing secret or leave the
 *    host anyway: shorter than 6 bytes, digits only, absolute paths and path
 *    lists, the host name, and the values of the allowed variables. When the
 *    environment cannot be read (another user's process), this step replaces
 *    nothing: its memory, and so its locals, cannot be read either.
 * 2. Command-line options whose name says the same ("--hf-token VALUE",
 *    "--password=VALUE", "--api_key VALUE"), variables' assignments in the
 *    command line ("env WANDB_API_KEY=VALUE python train.py"), and "-p VALUE"
 *    (a password to mysql, sshpass): the value, when step 1 left it and it is worth hiding
 *    by the same measure (so "-p 29500" stays), becomes "<redacted: value of
 *    --hf-token>" (or "--password=<redacted>"), and the locals that hold it
 *    are redacted as in step 1. An option's name is an identifier: a
 *    "-H 'authorization: token X'" argument is one word, left to step 4.
 *    The command line is readable for every
 *    process, so this step always runs.
 * 3. A string local whose name says it is a secret (password, api_key, token)
 *    and whose value is worth hiding: "<redacted: its name says it is a
 *    secret>".
 * 4. In the command line and string locals that no step above replaced, the
 *    credentials of URLs and HTTP authorizations (hdx_redact_credentials). The allowed variables'
 *    values get the same when they are kept (hdx_process_set_env).
 */
int hdx_redact_secrets(hdx_process *p);

/*
 * Steps 2 to 4 of hdx_redact_secrets, which need no environment, for a process that was not
 * read live: the argv a trace header recorded (the shim writes it as the process had it), whose
 * pid may be another process's by now, so /proc/PID/environ is not read. Returns how many
 * strings were replaced, or -ENOMEM.
 */
int hdx_redact_command_line(hdx_process *p);

#endif
