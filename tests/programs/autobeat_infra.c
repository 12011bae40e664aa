/*
 * autobeat_infra.c -- a test of the automatic-beat infrastructure
 * (native_tracer/src/autobeat.c), linked with the tracer's objects so that
 * it can call the hidden entry points. tests/test_openmp_beats.py builds it,
 * runs it and reads its trace.
 *
 *   autobeat_infra enabled      print hbt_auto_enabled of api, openmp, mpi
 *   autobeat_infra records      4 threads x (3 beats + 1 wait) on 2 constructs,
 *                               ids checked for agreement across 8 racing threads,
 *                               one MPI beat through the exported entry, a fork
 *                               child that beats once on construct 1
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "autobeat.h"

static void construct_a(void) {}
static void construct_b(void) {}

static uint32_t ids[8][3];

static void *racer(void *arg)
{
    long k = (long)arg;
    ids[k][0] = hbt_construct_id(HBT_CK_PARALLEL, (const void *)construct_a);
    ids[k][1] = hbt_construct_id(HBT_CK_LOOP, (const void *)construct_b);
    ids[k][2] = hbt_construct_id(HBT_CK_LOOP, (const void *)construct_a);   /* another kind */
    return NULL;
}

static void *worker(void *arg)
{
    int k = (int)(long)arg;
    uint32_t a = hbt_construct_id(HBT_CK_PARALLEL, (const void *)construct_a);
    uint32_t b = hbt_construct_id(HBT_CK_LOOP, (const void *)construct_b);
    hbt_auto_beat(HBT_SRC_OPENMP, HBT_EV_CHUNK, k, b, 100 * k);
    hbt_auto_beat(HBT_SRC_OPENMP, HBT_EV_CHUNK, k, b, 100 * k + 10);
    hbt_auto_beat(HBT_SRC_OPENMP, HBT_EV_IMPLICIT, k, a, 1);
    hbt_auto_wait(HBT_SRC_OPENMP, HBT_SYNC_BARRIER, k, b, 5000000000ull + (uint64_t)k);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "enabled") == 0) {
        printf("%d %d %d\n", hbt_auto_enabled(HBT_SRC_API), hbt_auto_enabled(HBT_SRC_OPENMP),
               hbt_auto_enabled(HBT_SRC_MPI));
        return 0;
    }
    if (argc > 1 && strcmp(argv[1], "gomp_known") == 0) {
        /* the names given: which are unknown, against the GOMP_ wrappers this program exports */
        static const char *ours[2048], *out[64];
        size_t nours = hbt_elf_exports((const void *)main, "GOMP_", ours, 2048);
        size_t n = hbt_gomp_unknown((const char **)argv + 2, (size_t)argc - 2, ours, nours, out, 64);
        printf("ours %zu unknown %zu", nours, n);
        for (size_t k = 0; k < n && k < 64; k++)
            printf(" %s", out[k]);
        printf("\n");
        return 0;
    }
    if (argc > 2 && strcmp(argv[1], "gomp_check") == 0) {
        /* a library loaded as libgomp would be: what the check of the first wrapped call says */
        void *h = dlopen(argv[2], RTLD_NOW | RTLD_LOCAL);
        void *real = h ? dlsym(h, argc > 3 ? argv[3] : "GOMP_parallel") : NULL;
        if (!real) {
            printf("FAIL %s\n", dlerror());
            return 1;
        }
        static const char *theirs[2048], *first[4];
        const char *object;
        size_t exported = hbt_elf_exports(real, "GOMP_", theirs, 2048);
        size_t n = hbt_gomp_check(real, first, 4, &object);
        printf("object %s exports %zu unknown %zu", object, exported, n);
        for (size_t k = 0; k < n && k < 4; k++)
            printf(" %s", first[k]);
        printf("\n");
        return 0;
    }
    pthread_t th[8];
    for (long k = 0; k < 8; k++)
        pthread_create(&th[k], NULL, racer, (void *)k);
    for (int k = 0; k < 8; k++)
        pthread_join(th[k], NULL);
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 3; j++)
            if (ids[k][j] != ids[0][j] || ids[k][j] == 0) {
                printf("FAIL ids differ\n");
                return 1;
            }
    if (ids[0][0] == ids[0][1] || ids[0][0] == ids[0][2] || ids[0][1] == ids[0][2]) {
        printf("FAIL ids not distinct\n");
        return 1;
    }
    printf("ids %u %u %u\n", ids[0][0], ids[0][1], ids[0][2]);
    for (long k = 0; k < 4; k++)
        pthread_create(&th[k], NULL, worker, (void *)k);
    for (int k = 0; k < 4; k++)
        pthread_join(th[k], NULL);
    void (*mpi)(int, const void *, const char *, uint64_t) =
        (void (*)(int, const void *, const char *, uint64_t))dlsym(RTLD_DEFAULT, "hbtrace_mpi_beat");
    if (mpi)
        mpi(HBT_EV_COLLECTIVE, (const void *)construct_b, "MPI_Allreduce", 1234);
    else
        printf("no hbtrace_mpi_beat\n");
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        hbt_auto_beat(HBT_SRC_OPENMP, HBT_EV_WORKSHARE, 0,
                      hbt_construct_id(HBT_CK_PARALLEL, (const void *)construct_a), 1);
        exit(0);
    }
    int st;
    waitpid(pid, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}
