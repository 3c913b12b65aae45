/*
 * cJSON's arena (json_arena.h): cJSON's hooks send a thread's allocations to its pool
 * between hdx_json_arena_begin and hdx_json_arena_end, and everyone else's to malloc.
 */
#include "model/json_arena.h"

#include <cjson/cJSON.h>
#include <pthread.h>
#include <stdlib.h>

#include "model/pool.h"

/* Under AddressSanitizer cJSON keeps malloc, so that its checks see each node. */
#if defined(__SANITIZE_ADDRESS__)
#define HDX_JSON_ARENA 0
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HDX_JSON_ARENA 0
#endif
#endif
#ifndef HDX_JSON_ARENA
#define HDX_JSON_ARENA 1
#endif

static _Thread_local hdx_pool *active_arena; /* set: this thread's cJSON allocations go there */
static _Thread_local hdx_pool *thread_arena; /* this thread's, kept for its next use */

static void *arena_malloc(size_t n)
{
    return active_arena ? hdx_pool_alloc(active_arena, n) : malloc(n);
}

static void arena_free(void *p)
{
    if (!active_arena)
        free(p);
}

static void install_hooks(void)
{
    cJSON_Hooks h = {.malloc_fn = arena_malloc, .free_fn = arena_free};
    cJSON_InitHooks(&h);
}

int hdx_json_arena_begin(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    if (!HDX_JSON_ARENA || pthread_once(&once, install_hooks) != 0)
        return 0;
    if (!thread_arena && !(thread_arena = hdx_pool_new()))
        return 0;
    active_arena = thread_arena;
    return 1;
}

void hdx_json_arena_end(void)
{
    hdx_pool *a = active_arena;
    active_arena = NULL;
    hdx_pool_reset(a); /* its largest block stays for the next input */
}

void hdx_json_arena_release(void)
{
    hdx_pool_free(thread_arena);
    thread_arena = NULL;
}
