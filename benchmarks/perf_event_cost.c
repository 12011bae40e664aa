/*
 * perf_event_cost.c -- what opening the monitor's register-sampling event costs
 * (docs/methods.md, "What the twenty-eighth session changed"): a software
 * task-clock event with PERF_SAMPLE_REGS_USER on the calling thread, opened
 * disabled and closed, N times. The first open on a machine with no perf event
 * open makes the kernel turn on its scheduler hooks (milliseconds); the next
 * ones take microseconds. Run it twice in a row to see both.
 *
 *   gcc -O2 benchmarks/perf_event_cost.c -o perf_event_cost && ./perf_event_cost 3
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now_us(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 3;
    for (int i = 0; i < n; i++) {
        struct perf_event_attr a;
        memset(&a, 0, sizeof a);
        a.size = sizeof a;
        a.type = PERF_TYPE_SOFTWARE;
        a.config = PERF_COUNT_SW_TASK_CLOCK;
        a.sample_period = 250000;
        a.sample_type = PERF_SAMPLE_REGS_USER;
        a.sample_regs_user = 0xff01ffu;   /* x86-64: ax..ip, r8..r15 */
        a.disabled = 1;
        a.exclude_kernel = 1;
        a.exclude_hv = 1;
        double t0 = now_us();
        int fd = (int)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
        double t1 = now_us();
        if (fd < 0) {
            printf("perf_event_open: %s (the monitor then judges by CPU time alone)\n", strerror(errno));
            return 0;
        }
        close(fd);
        printf("open %d: %.1f us\n", i + 1, t1 - t0);
    }
    return 0;
}
