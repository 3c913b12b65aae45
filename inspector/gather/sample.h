/*
 * One stack sample of a live process: native stacks (each thread stopped only
 * to copy its registers and stack, stacks.h), then the Python frames read
 * from memory without a stop (python.h), merged per thread (merge.h).
 */
#ifndef HDX_SAMPLE_H
#define HDX_SAMPLE_H

#include "model/evidence.h"

#define HDX_SAMPLE_PYTHON 1u /* read Python frames when the process runs CPython */
#define HDX_SAMPLE_LOCALS 2u /* with their local variables */
#define HDX_SAMPLE_NO_NATIVE 4u /* Python frames only: stop no thread */

/*
 * Sample p's threads as flags say. Threads get merged frames; a Python thread
 * that hangdx did not see in /proc is added. A process that is not Python is
 * not an error. Locals and command-line words that hold the value of an
 * environment variable outside the design's list are redacted (redact.h). Notes in ev say what failed (and, once, which Python
 * version was read, and from where). Returns 0, or the negative errno of
 * hdx_stacks_sample when no native stack could be read.
 */
int hdx_sample_stacks(hdx_process *p, hdx_evidence *ev, unsigned flags);

#endif
