/* A region whose body ends with a barrier: gcc -O2 makes that call a tail call (jmp), so
 * GOMP_barrier sees the tracer's region trampoline as its caller (tests/test_blame.py). */
#include <omp.h>
#include <stdio.h>
double a[4096];
void step(int k) {
#pragma omp for
  for (int i = 0; i < 4096; i++) a[i] += i * 0.5 + k;
#pragma omp barrier
}
int main(void){
  for (int k = 0; k < 20; k++) {
#pragma omp parallel
    step(k);
  }
  printf("%f\n", a[7]); return 0; }
