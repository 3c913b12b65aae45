/*
 * The target's mappings, as in proc(5) /proc/PID/maps (or a core's NT_FILE
 * note): which file each address range maps, and the path to open for it.
 * Native stacks, symbols and unwind tables use them, and so does the Python
 * frame reader (it finds the interpreter through them).
 */
#ifndef HDX_MAPS_H
#define HDX_MAPS_H

#include <stddef.h>
#include <stdint.h>

/* One mapping of the target, as in proc(5) /proc/PID/maps. */
typedef struct hdx_map {
    uint64_t start, end; /* [start, end) in the target */
    uint64_t offset;     /* file offset of start, bytes */
    char perms[5];       /* "r-xp" ... */
    char *path;          /* file path (" (deleted)" kept), "[heap]", or NULL when anonymous */
    unsigned dev_major, dev_minor; /* the file's device, as the maps line gives it (0:0 unknown) */
    uint64_t ino;        /* its inode, 0 unknown (a core's NT_FILE note has none) */
} hdx_map;

/*
 * The path to open for the file that m maps in process pid, into path (size bytes):
 * the first of these whose device and inode are the maps line's, never a namesake:
 *   /proc/PID/map_files/START-END (live, pid > 0; where permitted: root, or the
 *   process's own user with ptrace access), root + m->path (root: "/proc/PID/root"
 *   live, so that a container's files resolve; a sysroot or "" for a core), and
 *   m->path as seen from here (a plain chroot, whose maps show the host's paths).
 * A trailing " (deleted)" is not part of the path. When none matches (overlayfs shows
 * another inode than the maps line), map_files when it opens, else root + m->path
 * when it exists. Without a device and inode (a core), root + m->path.
 * Returns 0, or -ENOENT (no file found), -ENAMETOOLONG.
 */
int hdx_map_file(int pid, const char *root, const hdx_map *m, char *path, size_t size);

/*
 * Parse the text of a /proc/PID/maps file (proc(5): "start-end perms offset
 * dev inode [path]" a line, hex numbers) into a new array (*maps, *n); lines
 * that do not parse are skipped. The caller frees it with hdx_maps_free().
 * text is a C string. 0 or -ENOMEM (then *maps is NULL, *n 0).
 */
int hdx_maps_parse(const char *text, hdx_map **maps, size_t *n);

/*
 * Read /proc/PID/maps and parse it (hdx_maps_parse). Returns 0, or -ESRCH
 * (no such process), -errno of the read (EACCES...) or -ENOMEM.
 */
int hdx_maps_read(int pid, hdx_map **maps, size_t *n);

/* Free what hdx_maps_read() returned. Accepts NULL. */
void hdx_maps_free(hdx_map *maps, size_t n);

#endif
