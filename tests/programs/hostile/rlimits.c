/*
 * rlimits.c -- a program that lowers its own limits, then starts beating
 * threads (and, for nofile, a forked child):
 *
 *   rlimits fsize   RLIMIT_FSIZE = 1 MiB (SIGXFSZ left at its default, which
 *                   kills): writes a 512 KiB file of its own, 4 threads beat
 *                   200,000 times each (a trace would pass 1 MiB)
 *   rlimits nofile  RLIMIT_NOFILE = 32, every descriptor taken until EMFILE,
 *                   then a forked child with 2 threads beats and exits 4;
 *                   then 4 threads beat
 *   rlimits as      RLIMIT_AS = what is mapped now + 256 MiB: 4 threads beat
 *                   200,000 times each, then 1 MiB blocks are allocated until
 *                   malloc fails and are freed
 *
 * Prints one line per step (no counts that the tracer's own descriptors or
 * mappings would change); exit 0.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "beat.h"

static void *worker(void *arg)
{
    long n = (long)arg;
    for (long i = 0; i < n; i++)
        beat((unsigned)i);
    return NULL;
}

static int team(int k, long beats)
{
    pthread_t t[8];
    for (int i = 0; i < k; i++)
        if (pthread_create(&t[i], NULL, worker, (void *)beats) != 0)
            return 1;
    for (int i = 0; i < k; i++)
        pthread_join(t[i], NULL);
    return 0;
}

static int lower(int what, rlim_t to)
{
    struct rlimit rl = {to, to};
    return setrlimit(what, &rl);
}

static long mapped_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    long pages = 0;
    if (f) {
        if (fscanf(f, "%ld", &pages) != 1)
            pages = 0;
        fclose(f);
    }
    return pages * sysconf(_SC_PAGESIZE);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 2 ? argv[1] : "";
    const char *dir = argc > 2 ? argv[2] : "";
    if (strcmp(mode, "fsize") == 0) {
        if (lower(RLIMIT_FSIZE, 1 << 20) != 0)
            return 1;
        char path[4096];
        snprintf(path, sizeof path, "%s/rlimits.fsize", dir);
        static char block[512 << 10];
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
        if (fd < 0 || write(fd, block, sizeof block) != (ssize_t)sizeof block)
            return 1;
        close(fd);
        unlink(path);
        printf("wrote 512 KiB under a 1 MiB file size limit\n");
        if (team(4, 200000) != 0)
            return 1;
        printf("4 threads beat 200000 times each\n");
        return 0;
    }
    if (strcmp(mode, "nofile") == 0) {
        if (lower(RLIMIT_NOFILE, 32) != 0)
            return 1;
        int fds[64], n = 0, err = 0;
        while (n < 64) {
            int fd = open("/dev/null", O_RDONLY);
            if (fd < 0) {
                err = errno;
                break;
            }
            fds[n++] = fd;
        }
        printf("descriptors ran out: %s\n", strerror(err));
        fflush(stdout);
        pid_t pid = fork();
        if (pid == 0)
            _exit(team(2, 20000) == 0 ? 4 : 1);
        int st;
        if (pid < 0 || waitpid(pid, &st, 0) != pid || !WIFEXITED(st))
            return 1;
        printf("the child with no descriptor left exited with status %d\n", WEXITSTATUS(st));
        while (n > 0)
            close(fds[--n]);
        if (team(4, 20000) != 0)
            return 1;
        printf("4 threads beat 20000 times each\n");
        return 0;
    }
    if (strcmp(mode, "as") == 0) {
        if (lower(RLIMIT_AS, (rlim_t)mapped_bytes() + (256L << 20)) != 0)
            return 1;
        if (team(4, 200000) != 0)
            return 1;
        printf("4 threads beat 200000 times each under the address space limit\n");
        void *blocks[4096];
        int n = 0;
        while (n < 4096 && (blocks[n] = malloc(1 << 20)) != NULL)
            memset(blocks[n++], 1, 4096);
        printf("malloc %s\n", n < 4096 ? "failed at the limit, cleanly" : "never failed");
        while (n > 0)
            free(blocks[--n]);
        return 0;
    }
    fprintf(stderr, "usage: %s fsize|nofile|as FOLDER\n", argv[0]);
    return 2;
}
