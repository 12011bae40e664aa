/*
 * omp_beats.c -- an OpenMP program with a known number of chunks and
 * constructs per thread, for tests/test_openmp_beats.py (built with
 * gcc -fopenmp, traced with the tracer preloaded).
 *
 *   omp_beats all       every schedule kind and construct; prints its truth:
 *                         loop <base> <n> <chunk|0> <owner of each iteration>
 *                         count <thread> <implicit> <workshare> <tasks>
 *                         sleep <t_start_ns> <ns>   (thread 0 before a barrier)
 *                         result <checksum>         (the program's own output)
 *   omp_beats fork      a region, fork: the child runs a region and exits 5;
 *                       the parent one more region, exit status of the child
 *   omp_beats big N     one region of N threads with a dynamic loop
 *   omp_beats steps     loops of steps other than 1, up and down, long and unsigned long
 *                       long, dynamic and guided, in a region and a combined parallel
 *                       loop; prints per loop, in order: steps <first> <step> <trips>
 * Exit status 3 (all), so that a test sees it unchanged.
 */
#define _GNU_SOURCE
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAXT 64
#define N 240

static int implicit_[MAXT], ws_[MAXT], tasks_[MAXT];
static char owner[N * 60 + 1];
static long checksum;

static int outer(void)
{
    return omp_get_level() > 1 ? omp_get_ancestor_thread_num(1) : omp_get_thread_num();
}

#define ADD(a) __atomic_add_fetch(&a[outer()], 1, __ATOMIC_RELAXED)
#define OWN(i) (owner[(i)] = (char)('0' + outer()), __atomic_add_fetch(&checksum, (long)(i), __ATOMIC_RELAXED))

static void show(long base, long n, long chunk)
{
    printf("loop %ld %ld %ld ", base, n, chunk);
    fwrite(owner, 1, (size_t)n, stdout);
    printf("\n");
    memset(owner, '.', sizeof owner);
}

static void spin(int us)
{
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    do
        clock_gettime(CLOCK_MONOTONIC, &b);
    while ((b.tv_sec - a.tv_sec) * 1000000L + (b.tv_nsec - a.tv_nsec) / 1000 < us);
}

static int all(void)
{
    memset(owner, '.', sizeof owner);
    omp_set_num_threads(3);
    long sleep_start = 0;
#pragma omp parallel
    {
        int t = omp_get_thread_num();
        /* 1: dynamic, chunk 4 (nonmonotonic in gcc >= 9) */
#pragma omp for schedule(dynamic, 4)
        for (long i = 1000000; i < 1000000 + N; i++) { OWN(i - 1000000); if (t == 1) spin(20); }
#pragma omp single
        show(1000000, N, 4);
        ADD(ws_);   /* the single's barrier */
        /* 2: monotonic dynamic, chunk 3, nowait, then an explicit barrier */
#pragma omp for schedule(monotonic: dynamic, 3) nowait
        for (long i = 2000000; i < 2000000 + N; i++) OWN(i - 2000000);
#pragma omp barrier
        ADD(ws_);
#pragma omp single
        show(2000000, N, 3);
        ADD(ws_);
        /* 3: guided (nonmonotonic) and monotonic guided */
#pragma omp for schedule(guided, 2)
        for (long i = 3000000; i < 3000000 + N; i++) { OWN(i - 3000000); if (t == 0) spin(10); }
#pragma omp single
        show(3000000, N, 0);
        ADD(ws_);
#pragma omp for schedule(monotonic: guided)
        for (long i = 3100000; i < 3100000 + N; i++) OWN(i - 3100000);
#pragma omp single
        show(3100000, N, 0);
        ADD(ws_);
        /* 4: runtime (OMP_SCHEDULE) */
#pragma omp for schedule(runtime)
        for (long i = 4000000; i < 4000000 + N; i++) OWN(i - 4000000);
#pragma omp single
        {
            omp_sched_t kind;
            int chunk;
            omp_get_schedule(&kind, &chunk);
            show(4000000, N, (kind & ~omp_sched_monotonic) == omp_sched_dynamic ? chunk : 0);
        }
        ADD(ws_);
        /* 5: unsigned long long loop, dynamic 5 */
#pragma omp for schedule(dynamic, 5)
        for (unsigned long long i = 5000000ULL; i < 5000000ULL + N; i++) OWN((long)(i - 5000000ULL));
#pragma omp single
        show(5000000, N, 5);
        ADD(ws_);
        /* 6: ordered, dynamic 2, with an ordered block */
#pragma omp for schedule(dynamic, 2) ordered
        for (long i = 6000000; i < 6000000 + N; i++) {
            OWN(i - 6000000);
#pragma omp ordered
            __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        }
#pragma omp single
        show(6000000, N, 2);
        ADD(ws_);
        /* 7: ordered static, chunk 6 (chunks through libgomp too) */
#pragma omp for schedule(static, 6) ordered
        for (long i = 7000000; i < 7000000 + N; i++) {
            OWN(i - 7000000);
#pragma omp ordered
            __atomic_add_fetch(&checksum, 2, __ATOMIC_RELAXED);
        }
#pragma omp single
        show(7000000, N, 6);
        ADD(ws_);
        /* 8: collapse(2), dynamic 7: libgomp counts the collapsed space from 0 */
#pragma omp for collapse(2) schedule(dynamic, 7)
        for (long i = 0; i < 12; i++)
            for (long j = 0; j < 20; j++) OWN(i * 20 + j);
#pragma omp single
        show(0, N, 7);
        ADD(ws_);
        /* 9: static loops: one beat each at the closing barrier; nowait: none */
#pragma omp for schedule(static)
        for (long i = 0; i < N; i++) __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        ADD(ws_);
#pragma omp for schedule(static, 4)
        for (long i = 0; i < N; i++) __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        ADD(ws_);
#pragma omp for schedule(static) nowait
        for (long i = 0; i < N; i++) __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        /* 10: sections, sections nowait, single nowait */
#pragma omp sections
        {
#pragma omp section
            __atomic_add_fetch(&checksum, 10, __ATOMIC_RELAXED);
#pragma omp section
            __atomic_add_fetch(&checksum, 20, __ATOMIC_RELAXED);
        }
        ADD(ws_);
#pragma omp sections nowait
        {
#pragma omp section
            __atomic_add_fetch(&checksum, 10, __ATOMIC_RELAXED);
#pragma omp section
            __atomic_add_fetch(&checksum, 20, __ATOMIC_RELAXED);
        }
        ADD(ws_);
#pragma omp single nowait
        __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        /* 11: tasks, taskwait, critical */
#pragma omp single
        {
            for (int k = 0; k < 30; k++) {
#pragma omp task
                {
                    ADD(tasks_);
                    __atomic_add_fetch(&checksum, k, __ATOMIC_RELAXED);
                }
            }
#pragma omp taskwait
        }
        ADD(ws_);
#pragma omp critical
        __atomic_add_fetch(&checksum, 1, __ATOMIC_RELAXED);
        /* 12: thread 0 arrives 200 ms late at a barrier */
        if (t == 0) {
            struct timespec ts;
            clock_gettime(CLOCK_MONOTONIC, &ts);
            sleep_start = ts.tv_sec * 1000000000L + ts.tv_nsec;
            usleep(200000);
        }
#pragma omp barrier
        ADD(ws_);
        ADD(implicit_);
    }
    printf("sleep %ld %ld\n", sleep_start, 200000000L);
    /* 13: a combined parallel loop (no _start: the first chunk comes from _next) */
    omp_set_num_threads(2);
    int team = 0;
#pragma omp parallel for schedule(dynamic, 8)
    for (long i = 8000000; i < 8000000 + N; i++) {
        OWN(i - 8000000);
        if (i == 8000000)
            team = omp_get_num_threads();
    }
    show(8000000, N, 8);
    for (int k = 0; k < team; k++)   /* that region's implicit tasks */
        implicit_[k]++;
    /* 14: nested: 2 outer threads x 2 inner, a dynamic loop inside each */
    omp_set_max_active_levels(2);
#pragma omp parallel num_threads(2)
    {
        int o = omp_get_thread_num();
#pragma omp parallel num_threads(2)
        {
#pragma omp for schedule(dynamic, 10)
            for (long i = 9000000 + o * N / 2; i < 9000000 + (o + 1) * N / 2; i++)
                OWN(i - 9000000);
            ADD(implicit_);
        }
        ADD(implicit_);
    }
    show(9000000, N, 10);
    /* 15: a team of 1 thread */
#pragma omp parallel num_threads(1)
    {
#pragma omp for schedule(guided)
        for (long i = 10000000; i < 10000000 + N; i++) OWN(i - 10000000);
        ADD(implicit_);
    }
    show(10000000, N, 0);
    for (int k = 0; k < MAXT; k++)
        if (implicit_[k] || ws_[k] || tasks_[k])
            printf("count %d %d %d %d\n", k, implicit_[k], ws_[k], tasks_[k]);
    printf("result %ld\n", checksum);
    return 3;
}

static int forking(void)
{
    long sum = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum) num_threads(2)
    for (long i = 0; i < 100; i++)
        sum += i;
    fflush(stdout);
    pid_t pid = fork();
    if (pid == 0) {
        /* libgomp cannot start a team in a fork child (the parent's pool): a team of 1 */
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum) num_threads(1)
        for (long i = 0; i < 100; i++)
            sum += i;
        printf("child %ld\n", sum);
        fflush(stdout);
        _exit(5);
    }
    int st;
    waitpid(pid, &st, 0);
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum) num_threads(2)
    for (long i = 0; i < 100; i++)
        sum += i;
    printf("parent %ld\n", sum);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

static int big(int n)
{
    long sum = 0;
#pragma omp parallel for schedule(dynamic, 1) reduction(+ : sum) num_threads(n)
    for (long i = 0; i < 2L * n; i++)
        sum += i;
    printf("result %ld\n", sum);
    return 0;
}

static int steps(void)
{
    long sum = 0;
#pragma omp parallel num_threads(3) reduction(+ : sum)
    {
#pragma omp for schedule(dynamic, 4)
        for (long i = 10; i < 10 + 3 * 100; i += 3)
            sum += i;
#pragma omp for schedule(guided, 2)
        for (long i = 500; i > 500 - 2 * 90; i -= 2)
            sum += i;
#pragma omp for schedule(dynamic, 3)
        for (unsigned long long i = 7ULL; i < 7ULL + 5 * 50; i += 5)
            sum += (long)i;
#pragma omp for schedule(dynamic, 2)
        for (unsigned long long i = 900ULL; i > 900ULL - 4 * 40; i -= 4)
            sum += (long)i;
    }
#pragma omp parallel for schedule(guided) num_threads(3) reduction(+ : sum)
    for (long i = 0; i < 7 * 120; i += 7)
        sum += i;
    printf("steps 10 3 100\nsteps 500 -2 90\nsteps 7 5 50\nsteps 900 -4 40\nsteps 0 7 120\n");
    printf("result %ld\n", sum);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "steps") == 0)
        return steps();
    if (argc > 1 && strcmp(argv[1], "fork") == 0)
        return forking();
    if (argc > 2 && strcmp(argv[1], "big") == 0)
        return big(atoi(argv[2]));
    return all();
}
