/*
 * hbprof_layout -- print the byte layout of hbprof_format.h as JSON:
 *
 *   {"structs": {"hbp_file_header": {"size": 256, "fields": {"magic": 0, ...},
 *                                    "field_sizes": {"magic": 8, ...}}, ...},
 *    "constants": {"HBP_VERSION": 1, ...},
 *    "metrics": [{"name": "computation", "unit": 2}, ...],
 *    "collectives": {"1": "Alltoall", ...}}
 *
 * Readers compare their record layouts with this output. The constants list
 * is generated from the header by the Makefile (every #define HBP_* with a
 * numeric value), so it cannot miss one; the field lists are written out
 * below and checked at compile time to cover every byte of their struct
 * (the structs have no padding).
 */
#include <stddef.h>
#include <stdio.h>

#include "hbprof_format.h"

#define FILE_HEADER_FIELDS(X)                                                  \
    X(hbp_file_header, magic) X(hbp_file_header, version)                     \
    X(hbp_file_header, endian) X(hbp_file_header, header_size)                \
    X(hbp_file_header, flags) X(hbp_file_header, rank)                        \
    X(hbp_file_header, nranks) X(hbp_file_header, comp_source)                \
    X(hbp_file_header, metric_count) X(hbp_file_header, max_bins)             \
    X(hbp_file_header, index_size) X(hbp_file_header, record_size)            \
    X(hbp_file_header, boundary_mask) X(hbp_file_header, clock_id)            \
    X(hbp_file_header, pid) X(hbp_file_header, start_mono_ns)                 \
    X(hbp_file_header, start_real_ns) X(hbp_file_header, run_ns)              \
    X(hbp_file_header, segment_count) X(hbp_file_header, metric_table_offset) \
    X(hbp_file_header, metric_entry_size) X(hbp_file_header, rank_entry_size) \
    X(hbp_file_header, rank_table_offset) X(hbp_file_header, bin_table_offset) \
    X(hbp_file_header, bin_entry_size) X(hbp_file_header, inject_families)    \
    X(hbp_file_header, data_offset) X(hbp_file_header, data_length)           \
    X(hbp_file_header, inject_mean_ns) X(hbp_file_header, inject_sd_ns)       \
    X(hbp_file_header, inject_prob) X(hbp_file_header, inject_seed)           \
    X(hbp_file_header, reserved) X(hbp_file_header, host)

#define METRIC_ENTRY_FIELDS(X)                                                 \
    X(hbp_metric_entry, name) X(hbp_metric_entry, unit)                       \
    X(hbp_metric_entry, bins_used)

#define RANK_ENTRY_FIELDS(X)                                                   \
    X(hbp_rank_entry, rank) X(hbp_rank_entry, flags) X(hbp_rank_entry, run_ns) \
    X(hbp_rank_entry, segment_count) X(hbp_rank_entry, first_record)          \
    X(hbp_rank_entry, start_real_ns) X(hbp_rank_entry, start_mono_ns)         \
    X(hbp_rank_entry, pid) X(hbp_rank_entry, comp_source)                     \
    X(hbp_rank_entry, reserved) X(hbp_rank_entry, host)

#define BIN_FIELDS(X) X(hbp_bin, value) X(hbp_bin, count)

#define SEGMENT_RECORD_FIELDS(X)                                               \
    X(hbp_segment_record, duration_ns) X(hbp_segment_record, end_ns)          \
    X(hbp_segment_record, segment) X(hbp_segment_record, bin)                 \
    X(hbp_segment_record, reserved) X(hbp_segment_record, kind)               \
    X(hbp_segment_record, flags)

#define BIN_RECORD_FIELDS(X)                                                   \
    X(hbp_bin_record, value) X(hbp_bin_record, count)                         \
    X(hbp_bin_record, segment) X(hbp_bin_record, metric)                      \
    X(hbp_bin_record, slot) X(hbp_bin_record, from_slot)                      \
    X(hbp_bin_record, reserved0) X(hbp_bin_record, reserved)                  \
    X(hbp_bin_record, kind) X(hbp_bin_record, flags)

#define INJECT_RECORD_FIELDS(X)                                                \
    X(hbp_inject_record, injected_ns) X(hbp_inject_record, segment)           \
    X(hbp_inject_record, delayed_calls) X(hbp_inject_record, reserved)        \
    X(hbp_inject_record, kind) X(hbp_inject_record, flags)

#define RUN_RECORD_FIELDS(X)                                                   \
    X(hbp_run_record, duration_ns) X(hbp_run_record, segment)                 \
    X(hbp_run_record, rank) X(hbp_run_record, bin)                            \
    X(hbp_run_record, boundary) X(hbp_run_record, flags)

#define FIELD_SIZE(S, F) + sizeof(((struct S *)0)->F)
#define FIELD_ROW(S, F) { #F, offsetof(struct S, F), sizeof(((struct S *)0)->F) },

#define CHECK(LIST, S)                                                         \
    _Static_assert(0 LIST(FIELD_SIZE) == sizeof(struct S), #LIST " misses a field of " #S);
CHECK(FILE_HEADER_FIELDS, hbp_file_header)
CHECK(METRIC_ENTRY_FIELDS, hbp_metric_entry)
CHECK(RANK_ENTRY_FIELDS, hbp_rank_entry)
CHECK(BIN_FIELDS, hbp_bin)
CHECK(SEGMENT_RECORD_FIELDS, hbp_segment_record)
CHECK(BIN_RECORD_FIELDS, hbp_bin_record)
CHECK(INJECT_RECORD_FIELDS, hbp_inject_record)
CHECK(RUN_RECORD_FIELDS, hbp_run_record)

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

static const struct field file_header[] = { FILE_HEADER_FIELDS(FIELD_ROW) };
static const struct field metric_entry[] = { METRIC_ENTRY_FIELDS(FIELD_ROW) };
static const struct field rank_entry[] = { RANK_ENTRY_FIELDS(FIELD_ROW) };
static const struct field bin[] = { BIN_FIELDS(FIELD_ROW) };
static const struct field segment_record[] = { SEGMENT_RECORD_FIELDS(FIELD_ROW) };
static const struct field bin_record[] = { BIN_RECORD_FIELDS(FIELD_ROW) };
static const struct field inject_record[] = { INJECT_RECORD_FIELDS(FIELD_ROW) };
static const struct field run_record[] = { RUN_RECORD_FIELDS(FIELD_ROW) };

#define TABLE(S, A) { #S, sizeof(struct S), A, COUNT(A) }
static const struct table tables[] = {
    TABLE(hbp_file_header, file_header),     TABLE(hbp_metric_entry, metric_entry),
    TABLE(hbp_rank_entry, rank_entry),       TABLE(hbp_bin, bin),
    TABLE(hbp_segment_record, segment_record), TABLE(hbp_bin_record, bin_record),
    TABLE(hbp_inject_record, inject_record), TABLE(hbp_run_record, run_record),
};

struct constant {
    const char *name;
    unsigned long long value;
};

#define HBP_CONST(NAME) { #NAME, (unsigned long long)(NAME) },
static const struct constant constants[] = {
#include "hbp_constants.h"
};

static const struct { const char *name; unsigned unit; } metrics[] = {
#define METRIC_ROW(name, unit) { name, unit },
    HBP_METRIC_LIST(METRIC_ROW)
};

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
    for (size_t i = 0; i < COUNT(metrics); i++)
        printf("%s\n    {\"name\": \"%s\", \"unit\": %u}", i ? "," : "", metrics[i].name,
               metrics[i].unit);
    printf("\n  ],\n  \"collectives\": {");
    for (size_t i = 0; i < COUNT(colls); i++)
        printf("%s\"%u\": \"%s\"", i ? ", " : "", colls[i].code, colls[i].name);
    printf(", \"%u\": \"Finalize\"}\n}\n", (unsigned)HBP_COLL_FINALIZE);
    return 0;
}
