/*
 * omp_task_tree.c -- recursive OpenMP tasks, the way an alignment guide tree is
 * walked (kalign): one thread of the team (single nowait) walks a binary tree of
 * DEPTH levels; each inner node makes a task of each child, waits for them
 * (taskwait), then does its own work; a leaf does LEAF_MS milliseconds of its
 * thread's CPU time, in a nested parallel region (a team of one where nesting is
 * off, as kalign's alignments run: a thread that takes tasks in the barrier that
 * closes the region opens regions from there). The inner nodes of a level share LEVEL_MS between them, so
 * the levels near the root (one node, then two) are work for one or two threads
 * only: the run ends with one thread at work and the others waiting, as kalign's
 * does. The other threads take the tasks in the region's closing barrier, the
 * walking thread in its taskwaits.
 *
 *   omp_task_tree DEPTH LEAF_MS [LEVEL_MS [ROUNDS [TAIL [WALKER [LAST]]]]]
 *
 * ROUNDS parallel regions, each a walk of the whole tree (default 1), then TAIL
 * tasks of LEAF_MS each that only the walking thread can run, while the others
 * wait: made in a nested parallel region, a team of one where nesting is off
 * (kalign's last merges), every other one undeferred (if(0)). WALKER: the
 * thread that walks (default: whichever comes first, single nowait). A last region in
 * which every thread works LEAF_MS ends the run (as kalign's do: every thread's
 * last beat is at the run's end), unless LAST is 0: then the run ends with the walk,
 * the other threads waiting in its region's closing barrier with no task to take.
 * Prints "done N" (N: the leaves and tail tasks run) and exits 0.
 */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>

#include "cpu_work.h"

static double leaf_ms, level_ms;
static long leaves;

static void node(int level, int depth)
{
    if (level == depth) {
#pragma omp parallel num_threads(2)
        if (omp_get_thread_num() == 0)
            work(leaf_ms);
        __atomic_add_fetch(&leaves, 1, __ATOMIC_RELAXED);
        return;
    }
#pragma omp task
    node(level + 1, depth);
#pragma omp task
    node(level + 1, depth);
#pragma omp taskwait
    if (level_ms > 0)
        work(level_ms / (double)(1L << level));
}

/* the walking thread's part: the tree, then the tail */
static void walk(int depth, int tail)
{
    node(0, depth);
    if (tail) {
#pragma omp parallel num_threads(2)
        for (int k = 0; k < tail; k++) {
#pragma omp task if(k % 2)
            node(depth, depth);
        }
    }
}

int main(int argc, char **argv)
{
    int depth = argc > 1 ? atoi(argv[1]) : 6;
    leaf_ms = argc > 2 ? atof(argv[2]) : 2.0;
    level_ms = argc > 3 ? atof(argv[3]) : 0.0;
    int rounds = argc > 4 ? atoi(argv[4]) : 1;
    int tail = argc > 5 ? atoi(argv[5]) : 0;
    int walker = argc > 6 ? atoi(argv[6]) : -1;
    int last = argc > 7 ? atoi(argv[7]) : 1;
    if (depth < 0 || depth > 20 || rounds < 1 || tail < 0) {
        fprintf(stderr, "usage: omp_task_tree DEPTH(0-20) LEAF_MS [LEVEL_MS [ROUNDS [TAIL [WALKER [LAST]]]]]\n");
        return 2;
    }
    for (int r = 0; r < rounds; r++) {
#pragma omp parallel
        {
            int walks = walker < 0 ? 0 : omp_get_thread_num() == walker;
            if (walker < 0) {
#pragma omp single nowait
                walks = 1;
            }
            if (walks)
                walk(depth, tail);
        }
    }
    if (last) {
#pragma omp parallel
        work(leaf_ms);
    }
    printf("done %ld\n", leaves);
    return 0;
}
