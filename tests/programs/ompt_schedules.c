/*
 * ompt_schedules.c -- OpenMP constructs whose automatic beats are known in advance
 * (tests/test_ompt_beats.py; issue 15). `ompt_schedules CASE` runs one case with 4 threads
 * and prints what the tracer must record, as the program itself saw it:
 *
 *   expect EVENT THREAD N   THREAD (OpenMP thread number in the outermost team) must have
 *                           exactly N beats of EVENT (chunk, ws, task, implicit)
 *   owners C O0 O1 ...      the case's one dynamically scheduled loop: iteration i (its
 *                           normalized number) was run by thread Oi; C its fixed chunk size,
 *                           0 when the runtime picks the chunk sizes
 *   barriers THREAD N       THREAD passed exactly N barriers (explicit and implicit)
 *
 * Counting is done with atomics by the threads themselves; no heartbeat API is called.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NT 4
#define MAXT 64
#define N 100

static int exp_ws[MAXT], exp_impl[MAXT], exp_task[MAXT], exp_chunk[MAXT], exp_bar[MAXT];
static int owner[N * N];
static int n_owner, chunk_size, have_bar;
static volatile double sink;

/* the OpenMP thread number in the outermost team */
static int T(void)
{
    return omp_get_level() >= 1 ? omp_get_ancestor_thread_num(1) : 0;
}

static void add(int *a)
{
    __atomic_add_fetch(&a[T()], 1, __ATOMIC_RELAXED);
}

static void work(int i)
{
    double s = 0;
    for (int k = 0; k < 200 + (i % 7) * 50; k++)
        s += k * 1e-9;
    sink += s;
}

static void nap_ms(int ms)
{
    struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
    nanosleep(&ts, NULL);
}

/* a region of NT threads around the construct under test */
#define REGION_BEGIN                                    \
    _Pragma("omp parallel num_threads(NT)")             \
    {                                                   \
        add(exp_impl);
#define REGION_END                                      \
        add(exp_bar);   /* the region's end barrier */  \
    }

static void dyn_loop(void)
{
    n_owner = N;
    chunk_size = 3;
    REGION_BEGIN
#pragma omp for schedule(dynamic, 3)
        for (int i = 0; i < N; i++) {
            owner[i] = T();
            work(i);
        }
        add(exp_bar);
    REGION_END
}

int main(int argc, char **argv)
{
    const char *c = argc > 1 ? argv[1] : "";
    if (!strcmp(c, "static")) {
        have_bar = 1;
        REGION_BEGIN
#pragma omp for schedule(static)
            for (int i = 0; i < N; i++)
                work(i);
            add(exp_ws);
            add(exp_bar);
        REGION_END
    } else if (!strcmp(c, "static_chunked")) {
        REGION_BEGIN
#pragma omp for schedule(static, 7)
            for (int i = 0; i < N; i++)
                work(i);
            add(exp_ws);
        REGION_END
    } else if (!strcmp(c, "dynamic")) {
        dyn_loop();
    } else if (!strcmp(c, "guided")) {
        n_owner = N;
        REGION_BEGIN
#pragma omp for schedule(guided, 2)
            for (int i = 0; i < N; i++) {
                owner[i] = T();
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "runtime")) {
        omp_set_schedule(omp_sched_dynamic, 4);
        n_owner = N;
        chunk_size = 4;
        REGION_BEGIN
#pragma omp for schedule(runtime)
            for (int i = 0; i < N; i++) {
                owner[i] = T();
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "nonmonotonic")) {
        n_owner = N;
        REGION_BEGIN
#pragma omp for schedule(nonmonotonic : dynamic, 5)
            for (int i = 0; i < N; i++) {
                owner[i] = T();
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "ull")) {
        n_owner = N;
        chunk_size = 3;
        REGION_BEGIN
#pragma omp for schedule(dynamic, 3)
            for (unsigned long long i = 0; i < N; i++) {
                owner[i] = T();
                work((int)i);
            }
        REGION_END
    } else if (!strcmp(c, "ordered")) {
        n_owner = N;
        chunk_size = 2;
        REGION_BEGIN
#pragma omp for ordered schedule(dynamic, 2)
            for (int i = 0; i < N; i++) {
                owner[i] = T();
#pragma omp ordered
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "ordered_static")) {
        n_owner = N;
        REGION_BEGIN
#pragma omp for ordered schedule(static)
            for (int i = 0; i < N; i++) {
                owner[i] = T();
#pragma omp ordered
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "collapse")) {
        n_owner = 10 * 10;
        chunk_size = 4;
        REGION_BEGIN
#pragma omp for collapse(2) schedule(dynamic, 4)
            for (int i = 0; i < 10; i++)
                for (int j = 0; j < 10; j++) {
                    owner[i * 10 + j] = T();
                    work(i + j);
                }
#pragma omp for collapse(2) schedule(static)
            for (int i = 0; i < 10; i++)
                for (int j = 0; j < 10; j++)
                    work(i * j);
            add(exp_ws);
        REGION_END
    } else if (!strcmp(c, "nowait")) {
        have_bar = 1;
        n_owner = N;
        chunk_size = 5;
        REGION_BEGIN
#pragma omp for schedule(static) nowait
            for (int i = 0; i < N; i++)
                work(i);
            add(exp_ws);
#pragma omp for schedule(dynamic, 5) nowait
            for (int i = 0; i < N; i++) {
                owner[i] = T();
                work(i);
            }
        REGION_END
    } else if (!strcmp(c, "sections")) {
        REGION_BEGIN
#pragma omp sections
            {
#pragma omp section
                work(1);
#pragma omp section
                work(2);
#pragma omp section
                work(3);
            }
            add(exp_ws);
#pragma omp sections nowait
            {
#pragma omp section
                work(4);
#pragma omp section
                work(5);
            }
            add(exp_ws);
        REGION_END
    } else if (!strcmp(c, "single")) {
        REGION_BEGIN
#pragma omp single
            work(1);
            add(exp_ws);
#pragma omp single nowait
            work(2);
            add(exp_ws);
        REGION_END
    } else if (!strcmp(c, "tasks")) {
        REGION_BEGIN
#pragma omp single
            {
                for (int k = 0; k < 20; k++) {
#pragma omp task
                    {
                        work(k);
                        add(exp_task);
                    }
                }
#pragma omp taskwait
#pragma omp taskgroup
                {
                    for (int k = 0; k < 10; k++) {
#pragma omp task
                        {
                            work(k);
                            add(exp_task);
                        }
                    }
                }
            }
            add(exp_ws);
        REGION_END
    } else if (!strcmp(c, "nested")) {
        omp_set_max_active_levels(2);
        REGION_BEGIN
#pragma omp parallel num_threads(2)
            {
                add(exp_impl);
#pragma omp for schedule(static)
                for (int i = 0; i < N; i++)
                    work(i);
                add(exp_ws);
#pragma omp for schedule(dynamic, 10)
                for (int i = 0; i < N; i++)
                    work(i);
                /* two inner threads share the instance's 10 chunks, both under T() */
                if (omp_get_thread_num() == 0)
                    for (int k = 0; k < 10; k++)
                        add(exp_chunk);
            }
        REGION_END
    } else if (!strcmp(c, "teamsize")) {
        for (int n = 2; n <= 4; n += 2) {
            omp_set_num_threads(n);
#pragma omp parallel
            {
                add(exp_impl);
#pragma omp for schedule(static)
                for (int i = 0; i < N; i++)
                    work(i);
                add(exp_ws);
            }
        }
#pragma omp parallel num_threads(3)
        {
            add(exp_impl);
#pragma omp single
            work(0);
            add(exp_ws);
        }
    } else if (!strcmp(c, "critical")) {
        REGION_BEGIN
            for (int k = 0; k < 5; k++) {
#pragma omp critical
                nap_ms(1);
            }
        REGION_END
    } else if (!strcmp(c, "barrier")) {
        /* thread t arrives at the explicit barrier t * 30 ms late */
        have_bar = 1;
        REGION_BEGIN
            nap_ms(30 * omp_get_thread_num());
#pragma omp barrier
            add(exp_bar);
        REGION_END
    } else {
        fprintf(stderr, "usage: ompt_schedules CASE\n");
        return 2;
    }
    for (int t = 0; t < MAXT; t++) {
        if (exp_impl[t])
            printf("expect implicit %d %d\n", t, exp_impl[t]);
        if (exp_ws[t])
            printf("expect ws %d %d\n", t, exp_ws[t]);
        if (exp_task[t])
            printf("expect task %d %d\n", t, exp_task[t]);
        if (exp_chunk[t])
            printf("expect chunk %d %d\n", t, exp_chunk[t]);
        if (have_bar && exp_bar[t])
            printf("barriers %d %d\n", t, exp_bar[t]);
    }
    if (n_owner) {
        printf("owners %d", chunk_size);
        for (int i = 0; i < n_owner; i++)
            printf(" %d", owner[i]);
        printf("\n");
    }
    return 0;
}
