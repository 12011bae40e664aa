/*
 * hbprof_layout -- print the byte layout of hbprof_format.h as JSON:
 *
 *   {"structs": {"hbp_file_header": {"size": 256, "fields": {"magic": 0, ...},
 *                                    "field_sizes": {"magic": 8, ...}}, ...},
 *    "constants": {"HBP_VERSION": 1, ...},
 *    "metrics": [{"name": "computation", "unit": 2}, ...],
 *    "collectives": {"1": "Alltoall", ...}}
 *
 * Readers compare their record layouts with this output. Every list below
 * comes from the header: hbp_layout.h is generated from it by
 * tools/gen_layout.py (every #define HBP_* with a numeric value, every
 * HBP_M_* of hbprof_counters.def, every field of every struct hbp_*), so it
 * cannot miss one; a compile-time check says that the fields cover every
 * byte of their struct (the structs have no padding).
 */
#include <stddef.h>
#include <stdio.h>

#include "hbprof_format.h"
#include "hbp_layout.h"

#define FIELD_SIZE(S, F) + sizeof(((struct S *)0)->F)
#define FIELD_ROW(S, F) { #F, offsetof(struct S, F), sizeof(((struct S *)0)->F) },

#define CHECK(S, FIELDS)                                                       \
    _Static_assert(0 FIELDS(FIELD_SIZE) == sizeof(struct S), "a field of " #S " is missing");
HBP_LAYOUT_STRUCTS(CHECK)

struct field {
    const char *name;
    size_t offset, size;
};

struct table {
    const char *name;
    size_t size;
    const struct field *f;
    size_t n;
};

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

#define FIELD_ARRAY(S, FIELDS) static const struct field S##_fields[] = { FIELDS(FIELD_ROW) };
HBP_LAYOUT_STRUCTS(FIELD_ARRAY)

#define TABLE(S, FIELDS) { #S, sizeof(struct S), S##_fields, COUNT(S##_fields) },
static const struct table tables[] = { HBP_LAYOUT_STRUCTS(TABLE) };

struct constant {
    const char *name;
    unsigned long long value;
};

#define CONSTANT_ROW(NAME) { #NAME, (unsigned long long)(NAME) },
static const struct constant constants[] = { HBP_LAYOUT_CONSTANTS(CONSTANT_ROW) };

static const struct { unsigned code; const char *name; } colls[] = {
#define COLL_ROW(code, name) { code, name },
    HBP_COLL_LIST(COLL_ROW)
};

int main(void)
{
    printf("{\n  \"structs\": {\n");
    for (size_t t = 0; t < COUNT(tables); t++) {
        const struct table *T = &tables[t];
        printf("    \"%s\": {\"size\": %zu, \"fields\": {", T->name, T->size);
        for (size_t i = 0; i < T->n; i++)
            printf("%s\"%s\": %zu", i ? ", " : "", T->f[i].name, T->f[i].offset);
        printf("},\n      \"field_sizes\": {");
        for (size_t i = 0; i < T->n; i++)
            printf("%s\"%s\": %zu", i ? ", " : "", T->f[i].name, T->f[i].size);
        printf("}}%s\n", t + 1 < COUNT(tables) ? "," : "");
    }
    printf("  },\n  \"constants\": {");
    for (size_t i = 0; i < COUNT(constants); i++)
        printf("%s\n    \"%s\": %llu", i ? "," : "", constants[i].name, constants[i].value);
    printf("\n  },\n  \"metrics\": [");
    for (unsigned m = 0; m < HBP_METRIC_COUNT; m++)
        printf("%s\n    {\"name\": \"%s\", \"unit\": %u}", m ? "," : "", hbp_metric_name(m),
               (unsigned)hbp_metric_unit(m));
    printf("\n  ],\n  \"collectives\": {");
    for (size_t i = 0; i < COUNT(colls); i++)
        printf("%s\"%u\": \"%s\"", i ? ", " : "", colls[i].code, colls[i].name);
    printf(", \"%u\": \"Finalize\"}\n}\n", (unsigned)HBP_COLL_FINALIZE);
    return 0;
}
