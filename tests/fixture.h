/* fixture.h — where the reference fixtures are (tests/fixtures/README.md) and what a fixture's
 * MANIFEST says: the header line's KEY=VALUE fields and each tensor's dtype and element count.
 * Shared by mlp_fixture.h, gpt_fixture.h and test_fixture_reader.c, so every test finds the
 * fixtures, parses MANIFEST and loads NAME.bin one way.
 *
 * The directory is $DDP_TEST_FIXTURES when set and not empty, read when the test runs, else
 * DDP_TEST_FIXTURES_DEFAULT, the source tree's tests/fixtures, compiled in by tests/meson.build
 * (fixtures_dep). A MANIFEST line that is not `name dtype shape` is refused (naming the line), and
 * a tensor is only ever loaded at the size its line gives: nothing here knows a fixture's shapes.
 *
 * Header-only like check.h. */
#ifndef DDP_TEST_FIXTURE_H
#define DDP_TEST_FIXTURE_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef DDP_TEST_FIXTURES_DEFAULT
#error "build this test with fixtures_dep (tests/meson.build): it compiles in the default fixture directory"
#endif

typedef struct fixture_tensor {
    char name[96];
    char dtype[8]; /* f32 or i32: 4 bytes per value either way */
    int64_t numel;
} fixture_tensor;

typedef struct fixture_manifest {
    char dir[2048];      /* <fixture root>/<fixture name> */
    char header[1024];   /* MANIFEST's first line, "# NAME KEY=VALUE ...; ..." */
    fixture_tensor tensors[512];
    int n_tensors;
} fixture_manifest;

/* The fixture root: $DDP_TEST_FIXTURES, else the repository's tests/fixtures. */
static inline const char *fixture_root(void)
{
    const char *dir = getenv("DDP_TEST_FIXTURES");
    return dir && *dir ? dir : DDP_TEST_FIXTURES_DEFAULT;
}

/* "AxBxC" -> A·B·C; -1 unless every dimension is a positive integer. */
static inline int64_t fixture_shape_numel(const char *shape)
{
    int64_t numel = 1;
    const char *s = shape;
    for (;;) {
        if (*s < '0' || *s > '9')
            return -1;
        char *end;
        long long d = strtoll(s, &end, 10);
        if (d < 1)
            return -1;
        numel *= d;
        if (*end == '\0')
            return numel;
        if (*end != 'x')
            return -1;
        s = end + 1;
    }
}

static inline int fixture_manifest_fail(FILE *fp, const char *path, int line_no, const char *why)
{
    char where[32] = "";
    if (line_no > 0)
        snprintf(where, sizeof where, ":%d", line_no);
    fprintf(stderr, "fixture %s%s: %s (fixtures from %s; DDP_TEST_FIXTURES overrides)\n", path, where, why,
            fixture_root());
    if (fp)
        fclose(fp);
    return 1;
}

/* Reads <root>/<name>/MANIFEST into m; 0 on success, else 1 after a message naming the file. */
static inline int fixture_manifest_read(fixture_manifest *m, const char *name)
{
    memset(m, 0, sizeof *m);
    snprintf(m->dir, sizeof m->dir, "%s/%s", fixture_root(), name);
    char path[2100], line[1024];
    snprintf(path, sizeof path, "%s/MANIFEST", m->dir);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return fixture_manifest_fail(NULL, path, 0, "cannot open");
    if (!fgets(m->header, sizeof m->header, fp) || m->header[0] != '#' || !strchr(m->header, '\n'))
        return fixture_manifest_fail(fp, path, 1, "no header line \"# ...\"");
    m->header[strcspn(m->header, "\n")] = '\0';
    for (int line_no = 2; fgets(line, sizeof line, fp); line_no++) {
        if (!strchr(line, '\n') && !feof(fp))
            return fixture_manifest_fail(fp, path, line_no, "line too long");
        if (m->n_tensors == (int)(sizeof m->tensors / sizeof m->tensors[0]))
            return fixture_manifest_fail(fp, path, line_no, "more tensors than a test fixture should have");
        fixture_tensor *t = &m->tensors[m->n_tensors];
        char shape[128], extra[2];
        if (sscanf(line, "%95s %7s %127s %1s", t->name, t->dtype, shape, extra) != 3 ||
            (strcmp(t->dtype, "f32") && strcmp(t->dtype, "i32")) || (t->numel = fixture_shape_numel(shape)) < 1)
            return fixture_manifest_fail(fp, path, line_no, "not \"name f32|i32 AxB...\"");
        m->n_tensors++;
    }
    fclose(fp);
    return 0;
}

/* The integer after " KEY=" in the header line ("L", "B", ...); -1 when absent. */
static inline int64_t fixture_header_int(const fixture_manifest *m, const char *key)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *p = strstr(m->header, pattern);
    return p ? strtoll(p + strlen(pattern), NULL, 10) : -1;
}

/* The header's text after " KEY=" up to the next space or ';' (at most cap-1 bytes); NULL when absent. */
static inline const char *fixture_header_word(const fixture_manifest *m, const char *key, char *out, size_t cap)
{
    char pattern[64];
    snprintf(pattern, sizeof pattern, " %s=", key);
    const char *p = strstr(m->header, pattern);
    if (!p || cap == 0)
        return NULL;
    p += strlen(pattern);
    size_t n = strcspn(p, " ;");
    n = n < cap - 1 ? n : cap - 1;
    memcpy(out, p, n);
    out[n] = '\0';
    return out;
}

/* The number after " KEY=" in the header line (rope_theta, norm_eps, ...); NAN when absent. */
static inline double fixture_header_double(const fixture_manifest *m, const char *key)
{
    char word[64];
    return fixture_header_word(m, key, word, sizeof word) ? strtod(word, NULL) : NAN;
}

/* NAME's element count from its MANIFEST line; -1 when MANIFEST does not list it. */
static inline int64_t fixture_numel(const fixture_manifest *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (!strcmp(m->tensors[i].name, name))
            return m->tensors[i].numel;
    return -1;
}

/* NAME.bin as a malloc'd buffer of the element count MANIFEST gives it (4-byte values); NULL
 * after a message when it is not listed, missing, or of another size. */
static inline void *fixture_load(const fixture_manifest *m, const char *name, int64_t *numel_out)
{
    int64_t numel = fixture_numel(m, name);
    char path[2300];
    snprintf(path, sizeof path, "%s/%s.bin", m->dir, name);
    if (numel < 1) {
        fprintf(stderr, "fixture %s: not in MANIFEST\n", path);
        return NULL;
    }
    FILE *fp = fopen(path, "rb");
    if (!fp) {
        fprintf(stderr, "fixture %s: cannot open\n", path);
        return NULL;
    }
    void *buf = malloc((size_t)numel * 4 + 1);
    size_t got = buf ? fread(buf, 1, (size_t)numel * 4 + 1, fp) : 0;
    fclose(fp);
    if (got != (size_t)numel * 4) {
        fprintf(stderr, "fixture %s: %zu bytes, MANIFEST says %lld values\n", path, got, (long long)numel);
        free(buf);
        return NULL;
    }
    if (numel_out)
        *numel_out = numel;
    return buf;
}

#endif
