/*
 * An arena for cJSON, for the loaders of large inputs and the writer of large reports: while
 * a thread parses or builds, cJSON's nodes (and the text cJSON prints) come from a pool of that
 * thread and go all at once, instead of a malloc and a free per node (an 8192-rank job's tree
 * holds ~10 M of them). cJSON's hooks are global, so they are installed once (at the first
 * hdx_json_arena_begin) and pass every other allocation to malloc and free: only a thread
 * between begin and end allocates from its pool, and frees nothing there. Under
 * AddressSanitizer the arena is off, so that its checks see each node.
 */
#ifndef HDX_JSON_ARENA_H
#define HDX_JSON_ARENA_H

/* Start this thread's arena: until hdx_json_arena_end, what cJSON allocates in this thread
 * comes from it, and cJSON_Delete frees nothing. 1 when started; 0 when it is off (built
 * with AddressSanitizer, or no memory for it): then cJSON mallocs as usual, and the caller
 * deletes its trees itself and does not call hdx_json_arena_end. */
int hdx_json_arena_begin(void);

/* End this thread's arena after a begin that returned 1: everything cJSON allocated since
 * then is gone at once (trees parsed or made in between, and text printed, must not be used,
 * nor deleted, after). The arena keeps its largest block for this thread's next use. */
void hdx_json_arena_end(void);

/* At the end of a thread that used an arena: free it. Accepts a thread that has none. */
void hdx_json_arena_release(void);

#endif
