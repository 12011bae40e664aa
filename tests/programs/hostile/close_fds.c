/*
 * close_fds.c -- a program that closes every descriptor it may have (up to
 * its RLIMIT_NOFILE), the tracer's included, then starts 4 threads that beat
 * and open, write and read back a file of their own. Its only output is the
 * exit status: 0 when every thread's file held what it wrote.
 */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "beat.h"

static const char *dir;

static void *worker(void *arg)
{
    long k = (long)arg;
    char path[4096], want[64], got[64] = {0};
    snprintf(path, sizeof path, "%s/close_fds.%ld", dir, k);
    snprintf(want, sizeof want, "thread %ld wrote this", k);
    for (unsigned i = 0; i < 200; i++)
        beat(i);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || write(fd, want, strlen(want)) != (ssize_t)strlen(want) || pread(fd, got, sizeof got - 1, 0) < 0)
        return (void *)1;
    close(fd);
    unlink(path);
    return (void *)(long)(strcmp(want, got) != 0);
}

int main(int argc, char **argv)
{
    dir = argc > 1 ? argv[1] : "/tmp";
    struct rlimit rl;
    long top = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < 65536 ? (long)rl.rlim_cur : 65536;
    for (long fd = 0; fd < top; fd++)
        close((int)fd);
    pthread_t t[4];
    for (long k = 0; k < 4; k++)
        if (pthread_create(&t[k], NULL, worker, (void *)k) != 0)
            return 1;
    long bad = 0;
    for (int k = 0; k < 4; k++) {
        void *r;
        pthread_join(t[k], &r);
        bad += (long)r;
    }
    return bad ? 1 : 0;
}
