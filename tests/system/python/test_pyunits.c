/*
 * Unit tests of the Python reader's parts that need no live target:
 *  - the three line-table decoders on tables made by compile() in every
 *    CPython >= 3.8 here, against CPython's own answer (lines_dump.py);
 *  - random tables (no crash, no read past the end);
 *  - _Py_DebugOffsets parsing on the .PyRuntime section of libpython3.13
 *    (the values of docs/python-frames.md "Offsets"), a synthetic 3.14 blob, and rejection of
 *    damaged ones;
 *  - version detection from file names and Py_GetVersion() strings.
 *
 *   test_pyunits LINES_DUMP_PY
 */
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/wait.h>
#include <unistd.h>

#include "python/pyimpl.h"
#include "pyinterps.h"
#include "check.h"

/* ---------------------------------------------------------- line tables */

static size_t unhex(const char *h, uint8_t *out, size_t max)
{
    size_t n = 0;
    if (!strcmp(h, "-"))
        return 0;
    while (h[0] && h[1] && n < max) {
        unsigned v;
        if (sscanf(h, "%2x", &v) != 1)
            break;
        out[n++] = (uint8_t)v;
        h += 2;
    }
    return n;
}

static int decode(int minor, const uint8_t *tab, size_t len, int first, int pos)
{
    if (minor <= 9)
        return hdx_py_lnotab_line(tab, len, first, pos);
    if (minor == 10)
        return hdx_py_linetable310_line(tab, len, first, pos);
    return hdx_py_loctable_line(tab, len, first, pos);
}

static void test_lines(const pyinterp *py, const char *script)
{
    char out[] = "/tmp/hdx-lines-XXXXXX";
    int fd = mkstemp(out);
    if (fd < 0)
        return;
    close(fd);
    char cmd[2048];
    snprintf(cmd, sizeof cmd, "PYTHONDONTWRITEBYTECODE=1 '%s' '%s' '%s'", py->path, script, out);
    if (system(cmd) != 0) {
        CHECK(0, "%s: %s failed", py->label, script);
        unlink(out);
        return;
    }
    FILE *f = fopen(out, "r");
    static char line[1 << 20];
    static uint8_t tab[1 << 19];
    size_t len = 0, codes = 0, checked = 0, wrong = 0;
    int first = 0;
    while (f && fgets(line, sizeof line, f)) {
        if (line[0] == 'C') {
            char hex[sizeof line];
            if (sscanf(line, "C %d %s", &first, hex) == 2) {
                len = unhex(hex, tab, sizeof tab);
                codes++;
            }
        } else if (line[0] == 'E') {
            int pos, want;
            if (sscanf(line, "E %d %d", &pos, &want) != 2)
                continue;
            int got = decode(py->minor, tab, len, first, pos);
            checked++;
            if (got != want && wrong++ < 5)
                CHECK(0, "%s: position %d: line %d, CPython says %d", py->label, pos, got, want);
        }
    }
    if (f)
        fclose(f);
    unlink(out);
    CHECK(codes >= 8 && checked > 1000, "%s: only %zu code objects, %zu positions", py->label, codes,
          checked);
    printf("%s   %s: %zu positions in %zu code objects decoded as CPython does\n",
           wrong ? "FAIL" : "ok", py->label, checked, codes);
}

static void test_random_tables(void)
{
    uint8_t tab[64];
    unsigned seed = 12345;
    for (int i = 0; i < 200000; i++) {
        size_t len = (size_t)(rand_r(&seed) % 64);
        for (size_t j = 0; j < len; j++)
            tab[j] = (uint8_t)rand_r(&seed);
        int pos = rand_r(&seed) % 300 - 2;
        /* Only what must hold for any input: no crash; no reads past len (ASan). */
        uint8_t *heap = malloc(len ? len : 1);
        memcpy(heap, tab, len);
        (void)hdx_py_lnotab_line(heap, len, 1, pos);
        (void)hdx_py_linetable310_line(heap, len, 1, pos);
        (void)hdx_py_loctable_line(heap, len, 1, pos);
        free(heap);
    }
    /* Hand-made PEP 657 entries: one-line form, long form, no-location. */
    const uint8_t t[] = {
        0x80 | (10 << 3) | 1, 0, 0,       /* 2 units, line +0 (code 10), 2 column bytes */
        0x80 | (13 << 3) | 0, 2 << 1,     /* 1 unit, no columns, line +2 */
        0x80 | (15 << 3) | 2,             /* 3 units, no location */
        0x80 | (14 << 3) | 0, (3 << 1) | 1, 0, 1, 1, /* long form, line -3 */
    };
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 0) == 10, "one-line form");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 1) == 10, "one-line form, second unit");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 2) == 12, "no-columns form");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 4) == 0, "no location");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 6) == 9, "long form, negative delta");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, 7) == 0, "past the end");
    CHECK(hdx_py_loctable_line(t, sizeof t, 10, -1) == 10, "before the first instruction");
    printf("ok   decoders on random and hand-made tables\n");
}

/* ------------------------------------------------------- debug offsets */

static void put(uint8_t *b, int pos, uint64_t v)
{
    memcpy(b + pos, &v, 8);
}

/* The .PyRuntime section's first bytes from a file, or 0. */
static size_t read_pyruntime_section(const char *path, uint8_t *buf, size_t max)
{
    size_t got = 0;
    int fd = open(path, O_RDONLY);
    if (fd < 0)
        return 0;
    elf_version(EV_CURRENT);
    Elf *e = elf_begin(fd, ELF_C_READ, NULL);
    size_t shstr;
    if (e && !elf_getshdrstrndx(e, &shstr)) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            const char *nm;
            if (!gelf_getshdr(scn, &sh) || !(nm = elf_strptr(e, shstr, sh.sh_name)) || strcmp(nm, ".PyRuntime"))
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            if (d && d->d_buf) {
                got = d->d_size < max ? d->d_size : max;
                memcpy(buf, d->d_buf, got);
            }
            break;
        }
    }
    if (e)
        elf_end(e);
    close(fd);
    return got;
}

static void test_debug_offsets(const pyinterp *py, size_t n)
{
    const pyinterp *p13 = NULL;
    for (size_t i = 0; i < n; i++)
        if (py[i].minor == 13 && !strncmp(py[i].label, "pyenv", 5))
            p13 = &py[i];
    uint8_t buf[1024];
    hdx_pyoffs o;
    const char *why = NULL;
    if (!p13) {
        printf("skipped: _Py_DebugOffsets of a real 3.13 (no pyenv 3.13 here)\n");
    } else {
        char lib[600];
        snprintf(lib, sizeof lib, "%s", p13->path);
        char *slash = strrchr(lib, '/');
        if (slash)
            *slash = 0; /* .../bin */
        slash = strrchr(lib, '/');
        if (slash)
            snprintf(slash, sizeof lib - (size_t)(slash - lib), "/lib/libpython3.13.so.1.0");
        size_t got = read_pyruntime_section(lib, buf, sizeof buf);
        if (got < hdx_pydebug_size(0x030d)) {
            printf("skipped: _Py_DebugOffsets of a real 3.13 (no .PyRuntime in %s)\n", lib);
        } else {
            int rc = hdx_pyoffs_from_debug(buf, got, &o, &why);
            CHECK(rc == 0, "3.13 debug offsets rejected: %s", why);
            /* docs/python-frames.md "Offsets", 3.13 column, and docs/python-frames.md "Debug offsets". */
            CHECK(o.version == 0x030d, "version %#x", o.version);
            CHECK(o.rt_interp_head == 632 && o.rt_finalizing == 608, "runtime %d %d", o.rt_interp_head, o.rt_finalizing);
            CHECK(o.is_next == 7264 && o.is_threads_head == 7344 && o.is_id == 7272, "interp %d %d %d",
                  o.is_next, o.is_threads_head, o.is_id);
            CHECK(o.is_gil_locked == 7768 && o.is_gil_holder == 7760, "gil %d %d", o.is_gil_locked, o.is_gil_holder);
            CHECK(o.ts_next == 8 && o.ts_interp == 16 && o.ts_frame == 72 && o.ts_thread_id == 152 &&
                  o.ts_native_tid == 160, "tstate");
            CHECK(o.if_previous == 8 && o.if_code == 0 && o.if_instr == 56 && o.if_owner == 70 &&
                  o.if_localsplus == 72, "frame");
            CHECK(o.co_filename == 112 && o.co_name == 120 && o.co_qualname == 128 &&
                  o.co_linetable == 136 && o.co_firstlineno == 68 && o.co_code_adaptive == 200 &&
                  o.co_localsplusnames == 96 && o.co_localspluskinds == 104, "code");
            CHECK(o.str_ascii_size == 40 && o.str_compact_size == 56, "unicode %d", o.str_ascii_size);
            CHECK(o.owner_shim_lo == 3 && o.owner_shim_hi == 3 && o.tag_mask == ~(uint64_t)0, "3.13 rules");

            /* Damaged copies are refused. */
            uint8_t bad[1024];
            memcpy(bad, buf, got);
            bad[0] = 'y';
            CHECK(hdx_pyoffs_from_debug(bad, got, &o, &why) == -EINVAL, "bad cookie accepted");
            memcpy(bad, buf, got);
            put(bad, 152, 2u << 20); /* thread_state.size = 2 MiB */
            CHECK(hdx_pyoffs_from_debug(bad, got, &o, &why) == -EINVAL, "2 MiB struct accepted");
            memcpy(bad, buf, got);
            uint64_t ts_size;
            memcpy(&ts_size, buf + 152, 8); /* thread_state.size */
            put(bad, 200, ts_size - 4);     /* native_thread_id (8 bytes) across its end */
            CHECK(hdx_pyoffs_from_debug(bad, got, &o, &why) == -EINVAL, "field past its struct accepted");
            memcpy(bad, buf, got);
            put(bad, 16, 1);
            CHECK(hdx_pyoffs_from_debug(bad, got, &o, &why) == -ENOTSUP, "free-threaded accepted");
            memcpy(bad, buf, got);
            put(bad, 8, 0x030f00a0);
            CHECK(hdx_pyoffs_from_debug(bad, got, &o, &why) == -ENOTSUP, "3.15 accepted");
            CHECK(hdx_pyoffs_from_debug(buf, 100, &o, &why) == -EINVAL, "a cut copy accepted");
            printf("%s   _Py_DebugOffsets of %s: the reference's values; damaged copies refused\n",
                   failures ? "FAIL" : "ok", lib);
        }
    }

    /* A synthetic 3.14 blob: every group's size 4096, every field a distinct
     * value; each must land in its member (positions from docs/python-frames.md "Debug offsets"). */
    memset(buf, 0, sizeof buf);
    memcpy(buf, "xdebugpy", 8);
    put(buf, 8, 0x030e00f0);
    const int sizes[] = { 24, 48, 176, 248, 312, 400, 416, 448, 472, 496, 528, 552, 568, 592, 616, 648, 664 };
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        put(buf, sizes[i], 4096);
    const struct { int pos; int *member; } f14[] = {
        { 40, &o.rt_interp_head }, { 72, &o.is_threads_head }, { 64, &o.is_next },
        { 144, &o.is_gil_locked }, { 152, &o.is_gil_holder }, { 192, &o.ts_next },
        { 200, &o.ts_interp }, { 208, &o.ts_frame }, { 224, &o.ts_native_tid },
        { 256, &o.if_previous }, { 264, &o.if_code }, { 272, &o.if_instr }, { 280, &o.if_localsplus },
        { 288, &o.if_owner }, { 320, &o.co_filename }, { 336, &o.co_qualname }, { 344, &o.co_linetable },
        { 352, &o.co_firstlineno }, { 384, &o.co_code_adaptive }, { 408, &o.ob_type },
        { 424, &o.tp_name }, { 456, &o.tuple_item }, { 560, &o.float_fval }, { 584, &o.long_digits },
        { 608, &o.bytes_sval }, { 624, &o.str_state }, { 632, &o.str_length },
    };
    for (size_t i = 0; i < sizeof f14 / sizeof *f14; i++)
        put(buf, f14[i].pos, 100 + 8 * i);
    put(buf, 464, 16);  /* tuple ob_size */
    put(buf, 576, 16);  /* lv_tag == ob_size */
    put(buf, 640, 40);  /* asciiobject_size */
    for (int pos = 32; pos < 760; pos += 8) /* the rest: small, valid */
        if (!buf[pos] && !buf[pos + 1])
            put(buf, pos, 8);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        put(buf, sizes[i], 4096);
    int rc = hdx_pyoffs_from_debug(buf, 760, &o, &why);
    CHECK(rc == 0, "synthetic 3.14 refused: %s", why);
    if (!rc) {
        /* o was overwritten by the parse: compare through a fresh copy. */
        hdx_pyoffs got = o;
        for (size_t i = 0; i < sizeof f14 / sizeof *f14; i++) {
            int v = *(int *)((char *)&got + ((char *)f14[i].member - (char *)&o));
            CHECK(v == (int)(100 + 8 * i), "3.14 field at %d read as %d", f14[i].pos, v);
        }
        CHECK(got.owner_shim_lo == 3 && got.owner_shim_hi == 4 && got.tag_mask == ~(uint64_t)3,
              "3.14 rules");
        printf("ok   synthetic 3.14 _Py_DebugOffsets: every field from its 3.14 position\n");
    }
}

/* -------------------------------------------------------------- version */

static void test_versions(void)
{
    CHECK(hdx_pyversion_from_name("/usr/lib/x86_64-linux-gnu/libpython3.11.so.1.0") == 0x030b, "libpython3.11");
    CHECK(hdx_pyversion_from_name("/usr/bin/python3.8") == 0x0308, "python3.8");
    CHECK(hdx_pyversion_from_name("/x/python3.13d") == 0x030d, "python3.13d");
    CHECK(hdx_pyversion_from_name("/usr/bin/python3") == 0, "python3");
    CHECK(hdx_pyversion_from_name("/opt/python3.10/bin/uwsgi") == 0, "a directory name");
    static const char s1[] = "junk\0" "3.8.18 (default, May  9 2026, 07:33:04) \n[GCC 12.2.0]";
    static const char s2[] = "xx3.12.0rc1 (main, Oct  1 2023)";
    static const char s3[] = "13.8.1 (nope) 3.9 (nope) 3.10.13+ (heads/3.10:abc)";
    CHECK(hdx_pyversion_from_text((const uint8_t *)s1, sizeof s1) == 0x0308, "3.8.18 string");
    CHECK(hdx_pyversion_from_text((const uint8_t *)s2, sizeof s2) == 0x030c, "3.12.0rc1 string");
    CHECK(hdx_pyversion_from_text((const uint8_t *)s3, sizeof s3) == 0x030a, "3.10.13+ string");
    CHECK(hdx_pyversion_from_text((const uint8_t *)"3.8", 3) == 0, "short");
    for (int m = 8; m <= 12; m++)
        CHECK(hdx_pyoffs_static(m) && hdx_pyoffs_static(m)->version == (0x0300 | m), "table 3.%d", m);
    CHECK(!hdx_pyoffs_static(7) && !hdx_pyoffs_static(13), "tables outside 3.8–3.12");
    printf("ok   version from names and strings; static tables 3.8–3.12\n");
}

static void put_file(const char *path)
{
    char dir[512];
    snprintf(dir, sizeof dir, "%s", path);
    for (char *q = strchr(dir + 1, '/'); q; q = strchr(q + 1, '/')) {
        *q = 0;
        mkdir(dir, 0755);
        *q = '/';
    }
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    if (fd >= 0)
        close(fd);
}

static ino_t ino_of(const char *path, dev_t *dev)
{
    struct stat st;
    if (stat(path, &st))
        return 0;
    *dev = st.st_dev;
    return st.st_ino;
}

/* The file a mapping names: by its device and inode, through the target's root or as seen
 * here, never a namesake; and the maps parser keeps both. */
static void test_mapped_file(void)
{
    hdx_map *maps = NULL;
    size_t n = 0;
    CHECK(hdx_maps_parse("7f00-7f10 r-xp 00000000 fd:01 1234567 /usr/lib/libc.so.6\n", &maps, &n) == 0 && n == 1,
          "maps line parsed");
    CHECK(n == 1 && maps[0].dev_major == 0xfd && maps[0].dev_minor == 1 && maps[0].ino == 1234567,
          "dev fd:01 and inode 1234567 kept");
    hdx_maps_free(maps, n);

    char d[] = "/tmp/hdx-mapped-XXXXXX";
    if (!mkdtemp(d)) {
        CHECK(0, "mkdtemp");
        return;
    }
    char host[600], in_root[1200], root[600], got[1400];
    snprintf(host, sizeof host, "%s/usr/lib/libx.so", d);    /* the path, as seen here */
    snprintf(root, sizeof root, "%s/root", d);                 /* a container's root */
    snprintf(in_root, sizeof in_root, "%s%s", root, host);     /* the same path inside it */
    put_file(host);
    put_file(in_root);
    dev_t dev_host = 0, dev_root = 0;
    ino_t i_host = ino_of(host, &dev_host), i_root = ino_of(in_root, &dev_root);
    hdx_map m = {.start = 0x1000, .end = 0x2000, .path = host};
    /* a container: its file, not this host's namesake */
    m.dev_major = major(dev_root), m.dev_minor = minor(dev_root), m.ino = i_root;
    CHECK(hdx_map_file(0, root, &m, got, sizeof got) == 0 && !strcmp(got, in_root), "container: %s", got);
    /* a plain chroot: the maps show this host's path, which the root does not hold */
    m.dev_major = major(dev_host), m.dev_minor = minor(dev_host), m.ino = i_host;
    unlink(in_root);
    CHECK(hdx_map_file(0, root, &m, got, sizeof got) == 0 && !strcmp(got, host), "chroot: %s", got);
    /* neither file is the mapped one: no namesake stands in */
    m.ino = i_host + 7777;
    CHECK(hdx_map_file(0, root, &m, got, sizeof got) == -ENOENT, "a namesake is refused");
    /* " (deleted)" is not part of the path */
    char deleted[700];
    snprintf(deleted, sizeof deleted, "%s (deleted)", host);
    m.path = deleted;
    m.ino = i_host;
    CHECK(hdx_map_file(0, "", &m, got, sizeof got) == 0 && !strcmp(got, host), "deleted suffix: %s", got);
    unlink(host);
    printf("ok   mapped files: by device and inode, in a container and in a chroot\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s LINES_DUMP_PY\n", argv[0]);
        return 2;
    }
    setvbuf(stdout, NULL, _IOLBF, 0);
    test_versions();
    test_random_tables();
    test_mapped_file();
    pyinterp py[32];
    size_t n = pyi_find(py, 32);
    for (size_t i = 0; i < n; i++)
        test_lines(&py[i], argv[1]);
    if (!n)
        printf("skipped: line tables from compile() (no CPython >= 3.8 here)\n");
    test_debug_offsets(py, n);
    printf("%s\n", failures ? "FAILED" : "PASSED");
    return failures ? 1 : 0;
}
