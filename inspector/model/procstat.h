/*
 * The text of /proc/PID/stat and /proc/PID/task/TID/stat (proc(5)), parsed with nothing
 * allocated: one parser for every reader, the live host's (gather/), the stopping of
 * threads (native/) and the forked witness of `hangdx run` (cmd/).
 */
#ifndef HDX_PROCSTAT_H
#define HDX_PROCSTAT_H

/* The fields of a /proc/PID/stat (or /proc/PID/task/TID/stat) line, numbered as in proc(5). */
#define HDX_STAT_FIELDS 52 /* the last field read (exit_code, proc(5)) */
typedef struct hdx_stat {
    char comm[64];                           /* field 2 without its parentheses, cut to 63 bytes */
    char state;                              /* field 3: R S D T t Z X ..., 0 when absent */
    int last;                                /* the number of the last field present (>= 2) */
    unsigned long long f[HDX_STAT_FIELDS + 1]; /* f[i]: field i (4 <= i <= 52) as strtoull reads it
                                                * (a negative value wraps), 0 when absent */
} hdx_stat;

/*
 * hdx_stat_parse: split the text of a stat file into *out (filled by the caller's struct;
 * nothing allocated). comm may hold spaces and parentheses ("a) b (c"), so the fields
 * start after the last ')' of text, which must be followed by a space.
 * Returns 0, or -EIO when text is no stat line (no "(comm) "); *out is zeroed first.
 */
int hdx_stat_parse(const char *text, hdx_stat *out);

/*
 * hdx_stat_read: read the stat file at path ("/proc/PID/stat", "/proc/PID/task/TID/stat") and
 * parse it as hdx_stat_parse does, without allocating (a stack buffer, so it also serves
 * between fork and exec). Returns 0, or a negative errno: that of open/read (-ENOENT: no
 * such process), -EIO when what it reads is no stat line.
 */
int hdx_stat_read(const char *path, hdx_stat *out);

#endif
