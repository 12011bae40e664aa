/*
 * meta.c -- the metadata text block: "key=value\n" lines after the file
 * header, meta_length bytes used of meta_capacity.
 *
 * The text is written first and meta_length published after it (release),
 * so a reader never sees a partial line. A line that does not fit is dropped
 * whole; values have their newlines replaced by spaces.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"

/* what the first lines may use, so that later lines (name, api_type) fit
 * even after a very long command line */
#define HBT_META_RESERVE 512u
#define HBT_META_MAX_EXE 1024u

static char *hbt_meta_text(void)
{
    return (char *)hbt_g.hdr + hbt_g.hdr->meta_offset;
}

/* Longest prefix of s no longer than max bytes that does not split a UTF-8
 * sequence. */
size_t hbt_utf8_prefix(const char *s, size_t len, size_t max)
{
    if (len <= max)
        return len;
    while (max > 0 && ((unsigned char)s[max] & 0xC0) == 0x80)
        max--;
    return max;
}

/* Append one line, value cut to max_value bytes, keeping `reserve` bytes
 * free. g.lock held. */
static void hbt_meta_put(const char *key, const char *value, size_t max_value,
                         size_t reserve)
{
    struct hbt_file_header *h = hbt_g.hdr;
    if (!h)
        return;
    if (!value)
        value = "";
    size_t used = h->meta_length;
    size_t klen = strlen(key);
    size_t vlen = hbt_utf8_prefix(value, strlen(value), max_value);
    size_t need = klen + 1 + vlen + 1;
    if (used + need + reserve > h->meta_capacity)
        return;
    char *p = hbt_meta_text() + used;
    memcpy(p, key, klen);
    p[klen] = '=';
    for (size_t i = 0; i < vlen; i++) {
        char c = value[i];
        p[klen + 1 + i] = (c == '\n' || c == '\r') ? ' ' : c;
    }
    p[klen + 1 + vlen] = '\n';
    __atomic_store_n(&h->meta_length, (uint32_t)(used + need), __ATOMIC_RELEASE);
}

static int hbt_meta_has(const char *key)
{
    struct hbt_file_header *h = hbt_g.hdr;
    const char *p = hbt_meta_text(), *end = p + h->meta_length;
    size_t klen = strlen(key);
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl)
            break;
        if ((size_t)(nl - p) > klen && memcmp(p, key, klen) == 0 && p[klen] == '=')
            return 1;
        p = nl + 1;
    }
    return 0;
}

/* For keys that describe the run once (name, api_type): the first wins. */
void hbt_meta_append_once(const char *key, const char *value)
{
    if (hbt_state() != HBT_ON || !hbt_lock())
        return;
    if (!hbt_meta_has(key))
        hbt_meta_put(key, value, SIZE_MAX, 0);
    hbt_unlock();
}

static size_t hbt_read_file(const char *path, char *buf, size_t size)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return 0;
    size_t n = 0;
    while (n < size) {
        ssize_t r = read(fd, buf + n, size - n);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    return n;
}

/* /proc/self/cmdline: arguments joined by single spaces */
static void hbt_cmdline(char *out, size_t size)
{
    size_t n = hbt_read_file("/proc/self/cmdline", out, size - 1);
    while (n > 0 && out[n - 1] == '\0')
        n--;
    for (size_t i = 0; i < n; i++)
        if (out[i] == '\0')
            out[i] = ' ';
    out[n] = '\0';
}

static void hbt_iso_time(int64_t real_ns, char *out, size_t size)
{
    time_t sec = (time_t)(real_ns / 1000000000);
    int ms = (int)((real_ns % 1000000000) / 1000000);
    struct tm tm;
    if (!gmtime_r(&sec, &tm)) {
        snprintf(out, size, "unknown");
        return;
    }
    snprintf(out, size, "%04d-%02d-%02dT%02d:%02d:%02d.%03dZ", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec, ms);
}

/* The lines every file starts with. Called while the file is being created,
 * g.lock held, before the state is HBT_ON. */
void hbt_meta_write_initial(void)
{
    struct hbt_file_header *h = hbt_g.hdr;
    char buf[8192];
    char num[32];

    hbt_meta_put("format", "hbtrace", SIZE_MAX, 0);
    hbt_meta_put("tracer_version", HBT_TRACER_VERSION, SIZE_MAX, 0);
    if (gethostname(buf, 256) != 0)
        snprintf(buf, sizeof buf, "unknown");
    buf[255] = '\0';
    hbt_meta_put("host", buf, SIZE_MAX, 0);
    snprintf(num, sizeof num, "%d", (int)hbt_g.pid);
    hbt_meta_put("pid", num, SIZE_MAX, 0);
    snprintf(num, sizeof num, "%d", (int)getppid());
    hbt_meta_put("ppid", num, SIZE_MAX, 0);
    hbt_iso_time(h->start_real_ns, buf, sizeof buf);
    hbt_meta_put("start_time", buf, SIZE_MAX, 0);
    hbt_meta_put("clock", "CLOCK_MONOTONIC", SIZE_MAX, 0);
    hbt_meta_put("preload", (h->flags & HBT_FLAG_PRELOAD) ? "1" : "0", SIZE_MAX, 0);

    ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
    buf[n > 0 ? n : 0] = '\0';
    hbt_meta_put("exe", buf, HBT_META_MAX_EXE, HBT_META_RESERVE);

    hbt_cmdline(buf, sizeof buf);
    size_t used = h->meta_length + sizeof "cmdline=\n" - 1;
    size_t room = used + HBT_META_RESERVE < h->meta_capacity
        ? h->meta_capacity - used - HBT_META_RESERVE : 0;
    hbt_meta_put("cmdline", buf, room, HBT_META_RESERVE);
}
