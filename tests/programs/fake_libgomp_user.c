/* fake_libgomp_user.c -- a program built with gcc -fopenmp and linked against
 * fake_libgomp.c's libgomp.so.1 (tests/test_openmp_beats.py). */
#include <stdio.h>

void GOMP_future_region(void (*fn)(void *), void *data);

static void body(void *arg)
{
    *(int *)arg += 1;
}

int main(void)
{
    int n = 0;
#pragma omp parallel
    {
#pragma omp atomic
        n += 10;
#pragma omp barrier
    }
    GOMP_future_region(body, &n);   /* an entry point the tracer does not know */
    printf("result %d\n", n);
    return 4;
}
