/*
 * hbt_layout -- print the byte layout of hbtrace_format.h as JSON:
 *
 *   {"hbt_file_header": {"size": 128, "fields": {"magic": 0, ...}},
 *    "hbt_chunk_header": {...}, "hbt_record": {...},
 *    "constants": {"HBT_VERSION": 1, ...}}
 *
 * tests/test_layout.py compares hbtool's Python structs with this output.
 * The constants list is generated from the header by the Makefile (every
 * #define with a numeric value), so it cannot miss one; the field lists are
 * written out below and checked at compile time to cover every byte of
 * their struct (the structs have no padding).
 */
#include <stddef.h>
#include <stdio.h>

#include "hbtrace_format.h"

#define FILE_HEADER_FIELDS(X)                                                  \
    X(hbt_file_header, magic) X(hbt_file_header, version)                     \
    X(hbt_file_header, endian) X(hbt_file_header, header_size)                \
    X(hbt_file_header, slot_size) X(hbt_file_header, chunk_size)              \
    X(hbt_file_header, flags) X(hbt_file_header, meta_offset)                 \
    X(hbt_file_header, meta_length) X(hbt_file_header, meta_capacity)         \
    X(hbt_file_header, clock_id) X(hbt_file_header, data_offset)              \
    X(hbt_file_header, data_length) X(hbt_file_header, start_mono_ns)         \
    X(hbt_file_header, start_real_ns) X(hbt_file_header, clock_res_ns)        \
    X(hbt_file_header, pid) X(hbt_file_header, rank)                          \
    X(hbt_file_header, unit_size) X(hbt_file_header, lost_records)            \
    X(hbt_file_header, lost_why) X(hbt_file_header, lost_errno)               \
    X(hbt_file_header, reserved)

#define CHUNK_HEADER_FIELDS(X)                                                 \
    X(hbt_chunk_header, os_tid) X(hbt_chunk_header, thread_slot)              \
    X(hbt_chunk_header, chunk_seq) X(hbt_chunk_header, user_thread)           \
    X(hbt_chunk_header, reserved) X(hbt_chunk_header, capacity)               \
    X(hbt_chunk_header, magic)

#define RECORD_FIELDS(X)                                                       \
    X(hbt_record, t_ns) X(hbt_record, seq) X(hbt_record, thread)              \
    X(hbt_record, loop) X(hbt_record, iter) X(hbt_record, aux)                \
    X(hbt_record, kind) X(hbt_record, flags)

#define FIELD_SIZE(S, F) + sizeof(((struct S *)0)->F)
#define FIELD_ROW(S, F) { #F, offsetof(struct S, F) },

_Static_assert(0 FILE_HEADER_FIELDS(FIELD_SIZE) == sizeof(struct hbt_file_header),
               "FILE_HEADER_FIELDS misses a field of struct hbt_file_header");
_Static_assert(0 CHUNK_HEADER_FIELDS(FIELD_SIZE) == sizeof(struct hbt_chunk_header),
               "CHUNK_HEADER_FIELDS misses a field of struct hbt_chunk_header");
_Static_assert(0 RECORD_FIELDS(FIELD_SIZE) == sizeof(struct hbt_record),
               "RECORD_FIELDS misses a field of struct hbt_record");

struct field {
    const char *name;
    size_t offset;
};

static const struct field file_header[] = { FILE_HEADER_FIELDS(FIELD_ROW) };
static const struct field chunk_header[] = { CHUNK_HEADER_FIELDS(FIELD_ROW) };
static const struct field record[] = { RECORD_FIELDS(FIELD_ROW) };

struct constant {
    const char *name;
    unsigned long long value;
};

#define HBT_CONST(NAME) { #NAME, (unsigned long long)(NAME) },
static const struct constant constants[] = {
#include "hbt_constants.h"
};

static void print_struct(const char *name, size_t size, const struct field *f,
                         size_t n, int last)
{
    printf("  \"%s\": {\"size\": %zu, \"fields\": {", name, size);
    for (size_t i = 0; i < n; i++)
        printf("%s\"%s\": %zu", i ? ", " : "", f[i].name, f[i].offset);
    printf("}}%s\n", last ? "" : ",");
}

#define COUNT(a) (sizeof(a) / sizeof((a)[0]))

int main(void)
{
    printf("{\n");
    print_struct("hbt_file_header", sizeof(struct hbt_file_header), file_header,
                 COUNT(file_header), 0);
    print_struct("hbt_chunk_header", sizeof(struct hbt_chunk_header), chunk_header,
                 COUNT(chunk_header), 0);
    print_struct("hbt_record", sizeof(struct hbt_record), record, COUNT(record), 0);
    printf("  \"constants\": {");
    for (size_t i = 0; i < COUNT(constants); i++)
        printf("%s\n    \"%s\": %llu", i ? "," : "", constants[i].name,
               constants[i].value);
    printf("\n  }\n}\n");
    return 0;
}
