/*
 * bins_harness -- drive src/bins.c alone, for tests against a naive reference
 * (tests/test_mpi_profiler.py). Not installed; the test builds it.
 *
 *   bins_harness online  < values      one unsigned value per line; prints per
 *                                      value the log records it caused
 *                                      ("B kind flags slot from_slot value count")
 *                                      and then "S slot"
 *   bins_harness offline MAXBINS < pairs   "value count" per line; prints
 *                                      "N bins", the bins ("V value count") and
 *                                      the map ("M index") in input order
 */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__thread struct hbp_tls hbp_tls __attribute__((tls_model("initial-exec")));
struct hbp_global hbp_g;

int hbp_file_put(const void *record)
{
    struct hbp_bin_record r;
    memcpy(&r, record, sizeof r);
    printf("B %u %u %u %u %.17g %llu\n", r.kind, r.flags, r.slot, r.from_slot, r.value,
           (unsigned long long)r.count);
    return 0;
}

void hbp_fail(const char *what, int err)
{
    fprintf(stderr, "fail: %s %d\n", what, err);
    exit(1);
}

int main(int argc, char **argv)
{
    if (argc >= 2 && strcmp(argv[1], "online") == 0) {
        __atomic_store_n(&hbp_g.state, HBP_S_ON, __ATOMIC_RELAXED);
        hbp_bins_reset(&hbp_g.bins[0]);
        unsigned long long v;
        while (scanf("%llu", &v) == 1) {
            int s = hbp_bins_add(0, v);
            printf("S %d\n", s);
            hbp_g.segment++;
        }
        return 0;
    }
    if (argc >= 3 && strcmp(argv[1], "offline") == 0) {
        unsigned maxbins = (unsigned)atoi(argv[2]);
        size_t cap = 1024, n = 0;
        double *val = malloc(cap * sizeof *val);
        uint64_t *cnt = malloc(cap * sizeof *cnt);
        double v;
        unsigned long long c;
        while (scanf("%lg %llu", &v, &c) == 2) {
            if (n == cap) {
                cap *= 2;
                val = realloc(val, cap * sizeof *val);
                cnt = realloc(cnt, cap * sizeof *cnt);
            }
            val[n] = v;
            cnt[n++] = c;
        }
        double *ov = malloc((n + 1) * sizeof *ov);
        uint64_t *oc = malloc((n + 1) * sizeof *oc);
        uint16_t *map = malloc((n + 1) * sizeof *map);
        int k = hbp_bins_merge_offline(val, cnt, n, maxbins, ov, oc, map);
        printf("N %d\n", k);
        for (int i = 0; i < k; i++)
            printf("V %.17g %llu\n", ov[i], (unsigned long long)oc[i]);
        for (size_t i = 0; i < n; i++)
            printf("M %u\n", map[i]);
        return 0;
    }
    fprintf(stderr, "usage: bins_harness online | offline MAXBINS\n");
    return 2;
}
