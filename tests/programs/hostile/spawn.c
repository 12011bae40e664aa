/*
 * spawn.c -- while 2 threads beat, start children with posix_spawn and with
 * vfork + execv, one after another (each is this program again, as
 * "spawn child K": it beats 1,000 times, prints a line, exits with status
 * K). Prints each child's status; exit 0 when every status is the child's.
 */
#include <pthread.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "beat.h"

extern char **environ;
static volatile int stop;

static void *beater(void *arg)
{
    (void)arg;
    for (unsigned i = 0; !__atomic_load_n(&stop, __ATOMIC_RELAXED); i++) {
        beat(i);
        usleep(200);
    }
    return NULL;
}

static int status_of(pid_t pid)
{
    int st;
    if (pid < 0 || waitpid(pid, &st, 0) != pid)
        return -1;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "child") == 0) {
        for (unsigned i = 0; i < 1000; i++)
            beat(i);
        printf("child %s ran\n", argv[2]);
        return atoi(argv[2]);
    }
    char self[4096];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n <= 0)
        return 1;
    self[n] = 0;
    pthread_t t[2];
    for (int k = 0; k < 2; k++)
        if (pthread_create(&t[k], NULL, beater, NULL) != 0)
            return 1;
    int bad = 0;
    for (int k = 1; k <= 8; k++) {
        char num[16];
        snprintf(num, sizeof num, "%d", k);
        char *args[] = {self, "child", num, NULL};
        fflush(stdout);
        pid_t pid;
        if (k <= 4) {
            if (posix_spawn(&pid, self, NULL, NULL, args, environ) != 0)
                pid = -1;
        } else {
            pid = vfork();
            if (pid == 0) {
                execv(self, args);
                _exit(127);
            }
        }
        int st = status_of(pid);
        printf("%s child %d: status %d\n", k <= 4 ? "posix_spawn" : "vfork", k, st);
        bad += st != k;
    }
    __atomic_store_n(&stop, 1, __ATOMIC_RELAXED);
    for (int k = 0; k < 2; k++)
        pthread_join(t[k], NULL);
    return bad ? 1 : 0;
}
