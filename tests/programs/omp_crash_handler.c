/*
 * omp_crash_handler.c -- an OpenMP program with a crash handler as IQ-TREE has one: on a
 * fatal signal it prints a message, puts SIG_DFL back and returns, so that the faulting
 * instruction runs again and the process dies of the signal. With `abort`, the handler is
 * GraphicsMagick's kind instead: installed for SIGSEGV and SIGABRT, it prints its message
 * and calls abort() (caught by itself, it returns, and glibc's abort puts SIG_DFL back and
 * raises again: the process dies of SIGABRT).
 *
 *   omp_crash_handler STEPS [FAULT_STEP [abort]]
 *
 * STEPS parallel regions, each a dynamic loop (a chunk a beat) whose partial sums meet in a
 * reduction; with FAULT_STEP, OpenMP thread 1 writes to address 16 at that step (a real
 * fault of the program's own).
 */
#include <omp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

static void on_crash(int sig)
{
    static const char msg[] = "omp_crash_handler: CRASHES WITH A FATAL SIGNAL\n";
    (void)!write(2, msg, sizeof msg - 1);
    signal(sig, SIG_DFL);
}

static void on_crash_abort(int sig)
{
    static const char msg[] = "omp_crash_handler: abort due to a fatal signal\n";
    if (sig == SIGABRT)
        return;   /* abort() called from below: let it end the process */
    (void)!write(2, msg, sizeof msg - 1);
    abort();
}

static volatile uintptr_t bad = 16;

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 200;
    int fault = argc > 2 ? atoi(argv[2]) : -1;
    if (argc > 3 && argv[3][0] == 'a') {
        signal(SIGSEGV, on_crash_abort);
        signal(SIGABRT, on_crash_abort);
    } else {
        signal(SIGSEGV, on_crash);
    }
    double sum = 0;
    for (int s = 0; s < steps; s++) {
#pragma omp parallel reduction(+ : sum)
        {
            if (s == fault && omp_get_thread_num() == 1)
                *(volatile int *)bad = 0;
#pragma omp for schedule(dynamic, 64)
            for (int i = 0; i < 20000; i++)
                sum += (double)i * 1e-9 / (1 + s);
        }
    }
    printf("omp_crash_handler done %.6f\n", sum);
    return 0;
}
