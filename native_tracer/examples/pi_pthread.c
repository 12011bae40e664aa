/*
 * pi_pthread -- pi by the midpoint rule on 4/(1+x^2) over [0,1], split over
 * POSIX threads, instrumented with the multi-pthread heartbeat API of the
 * HBTM paper (Heartbeat_MultiPthread_*).
 *
 * Thread t integrates the t-th of --threads equal slices of [0,1] with
 * beats * work points; one beat per --work points.
 */
#include "common.h"

#include <stdlib.h>
#include <string.h>

static const struct hb_program program = {
    .name = "pi_pthread",
    .summary = "pi = integral of 4/(1+x^2) on [0,1] by the midpoint rule, one slice per\n"
               "pthread, one heartbeat (Heartbeat_MultiPthread_Generate) per --work points.",
    .work_help = "integration points per beat",
    .work_default = 320000,
    .size_help = NULL,
};

struct worker {
    pthread_t thread;
    int tid;
    double h;          /* width of one point's interval */
    double sum;        /* this thread's part of pi (what it completed) */
    char pad[64];
};

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    const struct hb_opts *o = &hb_run.o;
    struct hb_thread ts;
    hb_thread_init(&ts, w->tid);
    double h = w->h;
    /* first point of this thread, counted over the whole of [0,1] */
    double base = (double)w->tid * (double)o->beats * (double)o->work;
    double total = 0.0;

    for (int iter = 0; iter < o->beats; iter++) {
        hb_work_begin(&ts);
        double x0 = (base + (double)iter * (double)o->work + 0.5) * h;
        double s = 0.0;
        for (long k = 0; k < o->work; k++) {
            double x = x0 + (double)k * h;
            s += 4.0 / (1.0 + x * x);
        }
        total += s * h;
        hb_work_end(&ts);
        Heartbeat_MultiPthread_Generate(w->tid, 1, iter);
        int act = hb_after_beat(&ts, iter);
        if (act != HB_CONTINUE) {
            w->sum = total;
            hb_stop(act);
            return NULL;
        }
    }
    w->sum = total;
    return NULL;
}

int main(int argc, char **argv)
{
    struct hb_opts *o = hb_setup(argc, argv, &program);
    struct worker *ws = ex_xmalloc(sizeof *ws * (size_t)o->threads);
    double h = 1.0 / ((double)o->threads * (double)o->beats * (double)o->work);

    Heartbeat_MultiPthread_Init(0);
    for (int t = 0; t < o->threads; t++) {
        ws[t] = (struct worker){ .tid = t, .h = h };
        ex_thread(&ws[t].thread, worker_main, &ws[t]);
    }
    for (int t = 0; t < o->threads; t++)
        pthread_join(ws[t].thread, NULL);
    Heartbeat_MultiPthread_Finished();

    double pi = 0.0;
    for (int t = 0; t < o->threads; t++)
        pi += ws[t].sum;
    printf("%s checksum %.15f elapsed_s %.3f\n", program.name, pi, hb_elapsed_s());
    hb_finish_run();
    return HB_EXIT_OK;
}
