/*
 * The one way hangdx creates an output file (docs/design.md "Writing outputs safely"):
 * snapshots, reports, HTML reports, exports, run's report.txt and report.json. A new file is
 * made nameless (O_TMPFILE) in the output's directory, or where the filesystem cannot, under
 * a random name made with O_CREAT|O_EXCL|O_NOFOLLOW; it is published whole by a rename within
 * that directory, which replaces the name itself and never writes through it. No name
 * another user could guess is ever opened for writing, and a link planted at any name is
 * never followed into someone else's file.
 *
 * The output's name, as the user gave it:
 *   - absent, or a regular file: written anew and renamed over it (a reader sees the old file
 *     or the whole new one; another hard link to the old file keeps the old bytes). The new
 *     file takes the old one's permission bits when the caller owned it, else 0666 less the
 *     umask.
 *   - a symbolic link owned by the caller's effective user or by root (one of the user's
 *     own, /dev/stdout): followed, at most 8 deep, and its target handled by these rules.
 *   - a symbolic link anyone else owns: never followed; hdx_outfile_check() refuses it, and
 *     a link that appears after the check is replaced by the output, its target untouched.
 *   - a FIFO, character device or socket (/dev/null, a pipe): written in place.
 *   - a directory: refused (EISDIR).
 */
#ifndef HDX_OUTFILE_H
#define HDX_OUTFILE_H

#include <limits.h>
#include <stdio.h>

/* An output being written. Filled by hdx_outfile_open(); the caller writes to f and
 * ends with hdx_outfile_close(), which closes f. */
typedef struct hdx_outfile {
    FILE *f;                  /* where to write: the new file, the device, or stdout */
    int dirfd;                /* O_PATH fd of the output's directory; -1 for stdout */
    int how;                  /* private: how the file was made (outfile.c) */
    char tmp[NAME_MAX + 1];   /* private: the random name in dirfd, "" while nameless */
    char name[NAME_MAX + 1];  /* private: the output's last component in dirfd */
} hdx_outfile;

/*
 * Start writing the output path ("-" or NULL: standard output) by the rules above. Takes
 * path (borrowed); fills *o, which the caller owns and must pass to hdx_outfile_close().
 * Returns 0, or a negative errno: -EISDIR (a directory), -ENOENT (its directory does not
 * exist), -ELOOP (links more than 8 deep), -ENAMETOOLONG, or what open(2) returned. Nothing
 * is visible under path until hdx_outfile_close() publishes it.
 */
int hdx_outfile_open(hdx_outfile *o, const char *path);

/*
 * End the output started by hdx_outfile_open(): rc is the writer's result so far (0: all
 * written). With rc 0 the file is flushed, closed and published under its name; otherwise it
 * is removed and the name left as it was. Standard output is flushed, not closed. Returns rc
 * when it was an error, else 0 or the negative errno of flushing, closing or renaming.
 * Accepts an *o that was never opened or failed to open (zeroed by hdx_outfile_open).
 */
int hdx_outfile_close(hdx_outfile *o, int rc);

/*
 * Could path be written by hdx_outfile_open(), checked before a command reads or captures
 * anything, without creating any name: 0 ("-" included), or a negative errno: -EISDIR,
 * -ENOENT or -ENOTDIR (its directory is missing), -EACCES or -EROFS (the directory, or the
 * existing file, is not writable by the effective user), -EPERM (a symbolic link another
 * user owns), -ELOOP, -ENAMETOOLONG.
 */
int hdx_outfile_check(const char *path);

/*
 * 1 when path, or a directory on its way ("a" and "a/b" of "a/b/c"), is a symbolic link
 * that the rules above do not follow (owned by neither the effective user nor root), else 0
 * (no link, trusted ones, or nothing there). The outputs' directories are checked so
 * (-EPERM), and so are the directories that commands write into or delete in (run -d,
 * snapshot --slurm-job -o DIR, locks --clean-stale DIR). A link swapped in between this
 * check and the open is not seen.
 */
int hdx_outfile_foreign_link(const char *path);

#endif
