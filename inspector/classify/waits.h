/*
 * What a thread waits on, from its merged stack and its current system call:
 * one table of signatures (waits.c), data rather than code. Each entry names
 * the frame it matches and the wait it means. Pure: no I/O.
 */
#ifndef HDX_WAITS_H
#define HDX_WAITS_H

#include "model/evidence.h"

/* Wait labels (hdx_thread.wait). */
#define HDX_WAIT_BUILD_LOCK "build_lock"
#define HDX_WAIT_RENDEZVOUS "rendezvous"
#define HDX_WAIT_COLLECTIVE "collective"
#define HDX_WAIT_P2P_SEND "p2p_send"
#define HDX_WAIT_P2P_RECV "p2p_recv"
#define HDX_WAIT_P2P "p2p" /* a pipeline exchange whose direction is unknown */
/* A thread every rank has, hung or not: NCCL's watchdog and heartbeat monitor, NCCL's
 * proxy, the TCPStore server. wait_op says which. */
#define HDX_WAIT_SERVICE "service"

/*
 * Set t->wait, t->wait_op, t->wait_peer and t->wait_frame from the first
 * signature, in table order, that matches any of t's frames (the innermost
 * such frame); signatures come before the system-call rows, so a Python
 * `all_reduce` frame tells more than the futex under it. The peer of a p2p
 * wait comes from the matching frame's `src`/`dst`/`peer` local, else from
 * the nearest Python frame that has one. Leaves t untouched when nothing
 * matches, and when its input recorded its wait (t->wait and t->wait_pg set:
 * a Flight Recorder dump's). Returns 0 or -ENOMEM.
 */
int hdx_wait_classify(hdx_thread *t);

/* 1 for the labels of a thread that tells nothing about the hang by itself: a service
 * thread, "sleep", "futex", "io", "running". wait must not be NULL. */
int hdx_wait_is_background(const char *wait);

/* 1 for the p2p wait labels. */
int hdx_wait_is_p2p(const char *wait);

/* Frame f's integer local `name` when it can be a rank, a group rank or a tag (0 to 2^24),
 * else HDX_UNKNOWN. */
int hdx_wait_rank_local(const hdx_frame *f, const char *name);

#endif
