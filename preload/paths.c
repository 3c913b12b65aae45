/*
 * Absolute paths, and the table of known lock paths with the aggregation of
 * waits on them.
 *
 * The table is a fixed array. A slot is claimed with a compare-and-swap on
 * its state; readers match only "live" slots and compare hash, length and
 * bytes. A slot forgotten while another thread compares it can give that
 * thread one wrong answer at worst (a missed or extra poll count), never a
 * crash: the bytes stay inside the slot.
 *
 * An alias (the path as given, when relative) names its canonical slot by index
 * and by the hash of the canonical path. A release that races an add can forget
 * the canonical slot before the alias is live; that slot may then be claimed
 * again for another key, a relative alias among them. An alias whose canonical
 * slot no longer holds its path is stale: it is dropped when found.
 *
 * A slot found can also be forgotten and claimed again by other threads before
 * its path is written out. Each slot has a generation, odd while claim() writes
 * it: a trace line copies the path and keeps it only when the generation did not
 * move meanwhile (hdx_lock_path_copy), so that it never names another key, a
 * relative alias among them.
 */
#include "shim.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define HDX_LOCK_SLOTS 64
#define HDX_LOCK_PATH_MAX 1024

enum { SLOT_FREE, SLOT_BUSY, SLOT_LIVE };

struct hdx_wait {
    atomic_ulong polls;
    atomic_llong since;
    atomic_llong last; /* when the last wait line was written */
};

struct hdx_slot {
    atomic_int state;
    atomic_uint gen; /* odd while claim() writes the slot */
    int kind;
    int canon; /* the slot holding the absolute form (itself when absolute) */
    uint32_t canon_hash; /* the hash of that slot's path */
    uint32_t hash;
    uint32_t len;
    char path[HDX_LOCK_PATH_MAX];
    struct hdx_wait wait[HDX_HOW_N];
};

static struct hdx_slot slots[HDX_LOCK_SLOTS];
static atomic_int slots_used; /* high-water mark: slots beyond it were never used */
atomic_int hdx_known_baton;
atomic_int hdx_known_kernel;

static const char *const how_names[HDX_HOW_N] = {"eexist", "stat", "flock", "posix", "ofd",
                                                 "lockf"};

static uint32_t hash_len(const char *s, uint32_t *len)
{
    uint32_t h = 2166136261u;
    const char *p = s;
    for (; *p; p++)
        h = (h ^ (unsigned char)*p) * 16777619u;
    *len = (uint32_t)(p - s);
    return h;
}

static int find(int kind, const char *path)
{
    uint32_t len, h = hash_len(path, &len);
    int n = atomic_load_explicit(&slots_used, memory_order_acquire);
    for (int i = 0; i < n; i++) {
        struct hdx_slot *s = &slots[i];
        if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_LIVE &&
            s->kind == kind && s->hash == h && s->len == len && !memcmp(s->path, path, len))
            return i;
    }
    return -1;
}

static void release_slot(int i);

/* The canonical slot of live slot i, or -1 when i is a stale alias (then released). */
static int canonical(int kind, int i)
{
    int c = slots[i].canon;
    if (c == i)
        return i;
    struct hdx_slot *s = &slots[c];
    if (atomic_load_explicit(&s->state, memory_order_acquire) == SLOT_LIVE && s->kind == kind &&
        s->canon == c && s->hash == slots[i].canon_hash)
        return c;
    release_slot(i);
    return -1;
}

int hdx_lock_find(enum hdx_kind kind, const char *path)
{
    int i = find(kind, path);
    return i < 0 ? -1 : canonical(kind, i);
}

static int claim(int kind, const char *path, int canon)
{
    uint32_t len, h = hash_len(path, &len);
    if (len >= HDX_LOCK_PATH_MAX)
        return -1;
    for (int i = 0; i < HDX_LOCK_SLOTS; i++) {
        struct hdx_slot *s = &slots[i];
        int expect = SLOT_FREE;
        if (!atomic_compare_exchange_strong(&s->state, &expect, SLOT_BUSY))
            continue;
        if (i == canon) {
            /* the canonical slot was forgotten meanwhile, and this is it: no alias of it */
            atomic_store_explicit(&s->state, SLOT_FREE, memory_order_release);
            return -1;
        }
        atomic_fetch_add_explicit(&s->gen, 1, memory_order_acq_rel);
        s->kind = kind;
        s->canon = canon < 0 ? i : canon;
        s->canon_hash = canon < 0 ? h : slots[canon].hash;
        s->hash = h;
        s->len = len;
        memcpy(s->path, path, len + 1);
        for (int k = 0; k < HDX_HOW_N; k++)
            atomic_store(&s->wait[k].polls, 0);
        atomic_fetch_add_explicit(&s->gen, 1, memory_order_release);
        int used = atomic_load(&slots_used);
        while (used < i + 1 && !atomic_compare_exchange_weak(&slots_used, &used, i + 1))
            ;
        atomic_store_explicit(&s->state, SLOT_LIVE, memory_order_release);
        atomic_fetch_add(kind == HDX_KIND_BATON ? &hdx_known_baton : &hdx_known_kernel, 1);
        return i;
    }
    return -1;
}

int hdx_lock_add(enum hdx_kind kind, const char *given, const char *abs)
{
    int c = find(kind, abs);
    if (c >= 0)
        c = canonical(kind, c);
    if (c < 0)
        c = claim(kind, abs, -1);
    if (c < 0)
        return -1;
    if (strcmp(given, abs) && find(kind, given) < 0)
        claim(kind, given, c);
    return c;
}

static void release_slot(int i)
{
    int expect = SLOT_LIVE;
    if (atomic_compare_exchange_strong(&slots[i].state, &expect, SLOT_FREE))
        atomic_fetch_sub(slots[i].kind == HDX_KIND_BATON ? &hdx_known_baton : &hdx_known_kernel,
                         1);
}

void hdx_lock_forget(int slot)
{
    if (slot < 0)
        return;
    int n = atomic_load(&slots_used);
    for (int i = 0; i < n; i++)
        if (i != slot && slots[i].canon == slot &&
            atomic_load(&slots[i].state) == SLOT_LIVE)
            release_slot(i);
    release_slot(slot);
}

int hdx_lock_path_copy(int slot, char *out, size_t cap)
{
    struct hdx_slot *s = &slots[slot];
    unsigned g = atomic_load_explicit(&s->gen, memory_order_acquire);
    if ((g & 1) || atomic_load_explicit(&s->state, memory_order_acquire) != SLOT_LIVE || s->canon != slot)
        return -1;
    uint32_t len = s->len;
    if (len >= cap || len >= HDX_LOCK_PATH_MAX)
        return -1;
    memcpy(out, s->path, len);
    out[len] = 0;
    atomic_thread_fence(memory_order_acquire);
    return atomic_load_explicit(&s->gen, memory_order_relaxed) == g ? 0 : -1;
}

void hdx_wait_poll(struct hdx_buf *b, int slot, enum hdx_how how)
{
    struct hdx_wait *wt = &slots[slot].wait[how];
    int64_t now = hdx_now_ns();
    unsigned long n = atomic_fetch_add(&wt->polls, 1) + 1;
    if (n == 1) {
        atomic_store(&wt->since, now);
        atomic_store(&wt->last, 0);
    }
    int64_t last = atomic_load(&wt->last);
    if ((n & (n - 1)) && now - last < (int64_t)HDX_TRACE_WAIT_REPEAT_S * 1000000000)
        return;
    if (hdx_lock_path_copy(slot, b->path, sizeof b->path) != 0)
        return; /* forgotten meanwhile: that wait is over */
    atomic_store(&wt->last, now);
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_WAIT);
    hdx_w_kstr(w, "how", how_names[how]);
    hdx_w_kint(w, "polls", (int64_t)n);
    hdx_w_kint(w, "since", atomic_load(&wt->since));
    hdx_w_kpath(w, "path", b->path);
    hdx_w_emit(w);
}

void hdx_wait_reset(int slot, enum hdx_how how)
{
    atomic_store(&slots[slot].wait[how].polls, 0);
}

void hdx_wait_reset_all(void)
{
    for (int i = 0; i < HDX_LOCK_SLOTS; i++)
        for (int k = 0; k < HDX_HOW_N; k++)
            atomic_store(&slots[i].wait[k].polls, 0);
}

/* ---- paths ---- */

static size_t copy_trunc(char *out, size_t cap, const char *s)
{
    size_t n = strlen(s);
    if (n >= cap)
        n = cap - 1;
    memcpy(out, s, n);
    out[n] = 0;
    return n;
}

int hdx_fd_path(int fd, char *out, size_t cap)
{
    char link[40] = "/proc/self/fd/";
    hdx_itoa(fd, link + 14);
    ssize_t n = readlink(link, out, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) { /* at cap - 1 it may have been cut: not that path */
        copy_trunc(out, cap, "?");
        return -1;
    }
    out[n] = 0;
    return 0;
}

int hdx_abs_path(int dirfd, const char *path, char *out, size_t cap)
{
    if (path[0] == '/') {
        copy_trunc(out, cap, path);
        return 0;
    }
    size_t n;
    if (dirfd == AT_FDCWD) {
        if (syscall(SYS_getcwd, out, cap) <= 0)
            goto fail;
        n = strlen(out);
    } else {
        if (hdx_fd_path(dirfd, out, cap) != 0 || out[0] != '/')
            goto fail;
        n = strlen(out);
    }
    while (path[0] == '.' && path[1] == '/')
        path += 2;
    if (n > 1)
        out[n++] = '/';
    if (n + strlen(path) >= cap)
        goto fail;
    strcpy(out + n, path);
    return 0;
fail:
    copy_trunc(out, cap, path);
    return -1;
}

/* ---- the events that touch the table ---- */

/* An unaggregated wait line (the table is full): one attempt; fd -1 for none. */
static void wait_once(struct hdx_buf *b, const char *how, int fd, const char *path)
{
    struct hdx_w *w = &b->w;
    hdx_w_event(w, HDX_EV_WAIT);
    hdx_w_kstr(w, "how", how);
    hdx_w_kint(w, "polls", 1);
    hdx_w_kint(w, "since", hdx_now_ns());
    if (fd >= 0)
        hdx_w_kint(w, "fd", fd);
    hdx_w_kpath(w, "path", path);
    hdx_w_emit(w);
}

void hdx_after_open(int dirfd, const char *path, int flags, int fd, int e)
{
    if (fd < 0 && e != EEXIST)
        return;
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return;
    /* A path that cannot be made absolute (too long, or its directory fd has no path)
     * is recorded as null: a relative one would name another file. */
    const char *abs = hdx_abs_path(dirfd, path, b->path, sizeof b->path) == 0 ? b->path : NULL;
    int slot = hdx_lock_add(HDX_KIND_BATON, path, abs ? abs : path);
    if (fd >= 0) {
        if (slot >= 0)
            hdx_wait_reset(slot, HDX_HOW_EEXIST), hdx_wait_reset(slot, HDX_HOW_STAT);
        struct hdx_w *w = &b->w;
        hdx_w_event(w, HDX_EV_ACQUIRE);
        hdx_w_kint(w, "fd", fd);
        hdx_w_kpath(w, "path", abs);
        hdx_w_emit(w);
    } else if (slot >= 0) {
        hdx_wait_poll(b, slot, HDX_HOW_EEXIST);
    } else {
        wait_once(b, "eexist", -1, abs);
    }
    (void)flags;
    hdx_leave();
}

void hdx_after_stat(const char *path, int rc, int e)
{
    int slot = hdx_lock_find(HDX_KIND_BATON, path);
    if (slot < 0)
        return;
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return;
    if (rc == 0)
        hdx_wait_poll(b, slot, HDX_HOW_STAT);
    else if (e == ENOENT)
        hdx_wait_reset(slot, HDX_HOW_STAT); /* the lock is gone: that wait is over */
    hdx_leave();
}

void hdx_kernel_wait(int fd, enum hdx_how how)
{
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return;
    const char *p = hdx_fd_path(fd, b->path, sizeof b->path) == 0 ? b->path : NULL;
    int slot = p ? hdx_lock_add(HDX_KIND_KERNEL, p, p) : -1;
    if (slot >= 0)
        hdx_wait_poll(b, slot, how);
    else
        wait_once(b, how_names[how], fd, p);
    hdx_leave();
}

void hdx_kernel_taken(int fd, enum hdx_how how)
{
    struct hdx_buf *b = hdx_enter();
    if (!b)
        return;
    if (hdx_fd_path(fd, b->path, sizeof b->path) == 0) {
        int slot = hdx_lock_find(HDX_KIND_KERNEL, b->path);
        if (slot >= 0) {
            hdx_wait_reset(slot, how);
            hdx_lock_forget(slot);
        }
    }
    hdx_leave();
}
