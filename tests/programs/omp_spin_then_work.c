/*
 * omp_spin_then_work.c -- a thread that spins on a flag (`#pragma omp flush`)
 * and then works with no other flush before its next beat: each of STEPS
 * steps is a statically scheduled loop with nowait of two iterations; thread 0
 * works 6 ms (its own CPU time) and raises the flag, thread 1 spins until it is
 * raised, then works 3 ms. With libomp the tracer records thread 1's spins
 * (waits), each ended by its next record: the loop's beat, 3 ms later.
 *
 *   OMP_NUM_THREADS=2 omp_spin_then_work STEPS
 *
 * Prints "done" and exits 0.
 */
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

int main(int argc, char **argv)
{
    int steps = argc > 1 ? atoi(argv[1]) : 40;
    static volatile int flag;
#pragma omp parallel num_threads(2)
    for (int s = 1; s <= steps; s++) {
#pragma omp for schedule(static) nowait
        for (int i = 0; i < 2; i++) {
            if (i == 1) {
                while (flag < s) {
#pragma omp flush
                }
            }
            work(i == 0 ? 6.0 : 3.0);
            if (i == 0)
                __atomic_store_n(&flag, s, __ATOMIC_RELEASE);
        }
    }
    printf("done\n");
    return 0;
}
