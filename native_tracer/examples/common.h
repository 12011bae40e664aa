/*
 * common.h -- command line, ground truth and anomaly injection shared by the
 * hbtrace example programs (jacobi_omp, pi_pthread, matmul_pthread).
 *
 * Every example includes this header first; the code is in common.c (and
 * util.c), which keeps the one run state (struct hb_run).
 *
 * How a worker thread uses it, once per unit of work (one beat):
 *
 *     struct hb_thread ts;
 *     hb_thread_init(&ts, tid);
 *     for (int b = 0; b < o->beats; b++) {
 *         hb_work_begin(&ts);
 *         ...one unit of real work...
 *         hb_work_end(&ts);          // leak / busy-wait while injected
 *         <heartbeat API call>(tid, 1, b);
 *         int act = hb_after_beat(&ts, b);   // injection point check
 *         if (act != HB_CONTINUE) ...stop as the action says...
 *     }
 *
 * The injection point of the chosen thread T is right after its beat B was
 * recorded: beats 0..B are never affected; the first affected interval is
 * the one between beat B and beat B+1.
 *
 * Compile with -DHBT_NO_HEARTBEAT to turn every heartbeat API call into a
 * no-op at compile time (the uninstrumented baseline; no tracer linked).
 */
#ifndef HB_EXAMPLES_COMMON_H
#define HB_EXAMPLES_COMMON_H

#include "util.h"
#include "hbtrace.h"

#ifdef HBT_NO_HEARTBEAT
/* Every heartbeat call compiles away (arguments are still evaluated, as in a
 * call, so the rest of the code is unchanged and warning-free). */
static inline int  hb_nohb_int(void)          { return 0; }
static inline int  hb_nohb_init(const char *n) { (void)n; return -1; }
static inline int  hb_nohb_int3(int t, int l, int i) { (void)t; (void)l; (void)i; return 0; }
static inline void hb_nohb_void3(int t, int l, int i) { (void)t; (void)l; (void)i; }
#define hbt_init(name)                            hb_nohb_init(name)
#define hbt_set_thread(t)                         ((void)(t))
#define hbt_beat(tag)                             ((void)(tag))
#define hbt_beat_ex(t, l, i)                      hb_nohb_void3((t), (l), (i))
#define hbt_finish()                              ((void)0)
#define hbt_trace_path()                          ((const char *)NULL)
#define L_Heartbeat_OpenMP_Init()                 hb_nohb_int()
#define L_Heartbeat_OpenMP_Generate(t, l, i)      hb_nohb_int3((t), (l), (i))
#define L_Heartbeat_OpenMP_Finished()             ((void)0)
#define Heartbeat_OpenMP_Init(type)               hb_nohb_int3((type), 0, 0)
#define Heartbeat_OpenMP_Generate(t, l, i)        hb_nohb_void3((t), (l), (i))
#define Heartbeat_OpenMP_Finished()               hb_nohb_int()
#define Heartbeat_MultiPthread_Init(type)         hb_nohb_int3((type), 0, 0)
#define Heartbeat_MultiPthread_Generate(t, l, i)  hb_nohb_void3((t), (l), (i))
#define Heartbeat_MultiPthread_Finished()         hb_nohb_int()
#endif

/* Exit statuses. */
#define HB_EXIT_OK       EX_EXIT_OK       /* normal run (also when a thread was injected) */
#define HB_EXIT_INJECTED 1                /* --inject shutdown --shutdown-mode exit */
#define HB_EXIT_USAGE    EX_EXIT_USAGE    /* bad argument, or the truth file cannot be written */
#define HB_EXIT_RUNTIME  EX_EXIT_RUNTIME  /* out of memory, thread creation failed, ... */

/* ---------------------------------------------------------------- options */

enum hb_inject {
    HB_INJ_NONE, HB_INJ_LEAK, HB_INJ_SHUTDOWN, HB_INJ_BUSYWAIT,
    HB_INJ_CONDWAIT, HB_INJ_EARLYEXIT, HB_INJ_COUNT
};
extern const char *const hb_inject_names[HB_INJ_COUNT];

enum hb_shutdown_mode {
    HB_SD_THREAD, HB_SD_EXIT, HB_SD_ABORT, HB_SD_SEGV, HB_SD_CANCEL, HB_SD_VANISH,
    HB_SD_COUNT
};
extern const char *const hb_shutdown_names[HB_SD_COUNT];

/* Program-specific parts of the command line. */
struct hb_program {
    const char *name;        /* program name (truth "program", messages) */
    const char *summary;     /* one line: what it computes */
    const char *work_help;   /* meaning of --work */
    const char *work_alias;  /* another name of --work, or NULL */
    long        work_default;
    const char *size_help;   /* meaning of --size, NULL: no --size option */
    long        size_default;
    long        size_min;
    int         openmp;      /* an OpenMP program: no --shutdown-mode cancel/vanish */
};

struct hb_opts {
    int         threads;        /* --threads */
    int         beats;          /* --beats (per thread) */
    long        work;           /* --work */
    long        size;           /* --size (0 when the program has none) */
    uint64_t    seed;           /* --seed */
    int         inject;         /* --inject, enum hb_inject */
    int         inject_thread;  /* --inject-thread as given (-1: from the seed) */
    int         inject_beat;    /* --inject-beat as given (-1: from the seed) */
    double      inject_time;    /* --inject-time, < 0 when not given */
    int         shutdown_mode;  /* --shutdown-mode, enum hb_shutdown_mode */
    long        leak_bytes;     /* --leak-bytes */
    int         busy_beats;     /* --busy-beats, -1: to the end */
    double      busy_factor;    /* --busy-factor */
    long        wait_ms;        /* --wait-ms */
    const char *truth;          /* --truth, NULL: none */
};

/* One cache line per thread so that per-beat counters never share a line. */
struct hb_padded { volatile long v; char pad[64 - sizeof(long)]; };

/* The run: options, the resolved injection plan and what happened. */
struct hb_run {
    const struct hb_program *prog;
    struct hb_opts o;
    int      target_thread;     /* resolved thread T, -1 for inject none */
    int      target_beat;       /* resolved beat B, -1 when chosen by time */
    volatile int      injected; /* the injection happened */
    volatile int      inj_beat; /* beat after which it happened */
    volatile uint64_t inj_ns;   /* CLOCK_MONOTONIC at the injection point */
    volatile long     leaked;   /* bytes leaked so far */
    struct hb_padded *done;     /* beats recorded per thread */
};

extern struct hb_run hb_run;

/* Seconds since program start. */
static inline double hb_elapsed_s(void)
{
    return (double)(ex_now_ns() - ex_start_ns) * 1e-9;
}

/* A generator for one purpose (stream) of one thread, derived from --seed. */
uint64_t hb_rand_stream(uint64_t stream, uint64_t tid);

/* Parse the command line, resolve the injection plan from --seed, and write
 * the first version of the truth file. Exits with status 2 on a bad argument. */
struct hb_opts *hb_setup(int argc, char **argv, const struct hb_program *prog);

/* ----------------------------------------------------------- per thread */

enum hb_action {
    HB_CONTINUE,      /* go on with the next beat */
    HB_STOP_RETURN,   /* earlyexit: leave the loop and end the thread normally */
    HB_STOP_EXIT,     /* shutdown thread: pthread_exit(NULL) (OpenMP: leave the loop,
                         do nothing more) */
};

struct hb_thread {
    int      tid;
    int      target;      /* this thread is the one to inject */
    int      fired;
    int      leaking;
    int      busy_left;   /* busy beats still to slow; -1: to the end; 0: not busy */
    uint64_t cpu0;        /* thread CPU time at hb_work_begin, while busy */
};

void hb_thread_init(struct hb_thread *ts, int tid);
void hb_spin_cpu(uint64_t ns);      /* spin until this thread used ns more CPU time */
void hb_leak_once(void);            /* leak --leak-bytes */
int  hb_inject_point(struct hb_thread *ts, int b);

static inline void hb_work_begin(struct hb_thread *ts)
{
    if (ts->busy_left != 0)
        ts->cpu0 = ex_clock_ns(CLOCK_THREAD_CPUTIME_ID);
}

static inline void hb_work_end(struct hb_thread *ts)
{
    if (ts->leaking)
        hb_leak_once();
    if (ts->busy_left != 0) {
        /* This beat's work took w of CPU; spin (F-1)*w more, so the beat takes
         * F times as long: a steady, smooth drop of the beat rate. */
        uint64_t w = ex_clock_ns(CLOCK_THREAD_CPUTIME_ID) - ts->cpu0;
        hb_spin_cpu((uint64_t)((hb_run.o.busy_factor - 1.0) * (double)w));
        if (ts->busy_left > 0)
            ts->busy_left--;
    }
}

/* Call right after the thread recorded beat b. Performs the injection when
 * this is the injection point and says what the thread must do next. */
static inline int hb_after_beat(struct hb_thread *ts, int b)
{
    hb_run.done[ts->tid].v = b + 1;
    if (!ts->target || ts->fired)
        return HB_CONTINUE;
    return hb_inject_point(ts, b);
}

/* A pthread worker told to stop by hb_after_beat: HB_STOP_EXIT ends the
 * thread here (shutdown: the thread dies); otherwise it returns, and the
 * worker returns normally (earlyexit). */
static inline void hb_stop(int act)
{
    if (act == HB_STOP_EXIT)
        pthread_exit(NULL);
}

/* Call at the end of a normal run, after all threads ended: rewrites the truth
 * file with what happened and reports the injection on stderr. */
void hb_finish_run(void);

#endif /* HB_EXAMPLES_COMMON_H */
