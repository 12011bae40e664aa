/*
 * common.h -- command line, seeded random numbers and checkpoints shared by
 * the bulk-synchronous MPI examples (stencil.c, transpose.c). Each example
 * includes it once, from its only source file.
 *
 * Iteration i is "heavy" when --heavy-every K > 0 and i % K == K - 1: it does
 * --heavy-factor (default 3) times the work. Iteration i writes a checkpoint
 * when --checkpoint-every C > 0 and (i + 1) % C == 0, before the collective
 * that ends the iteration, so the checkpoint falls into segment i:
 *   posix : every rank open()s <dir>/ckpt-<prog>-r<rank>.bin (O_CREAT|O_TRUNC),
 *           write()s its n doubles in one call, close()s it
 *   mpiio : MPI_File_open of <dir>/ckpt-<prog>.bin on MPI_COMM_WORLD,
 *           MPI_File_write_at_all of its n doubles at rank * n * 8,
 *           MPI_File_close
 * --die-at I makes rank --die-rank (default 1) end at the start of
 * iteration I (after I complete iterations), as --die-how says: kill
 * (SIGKILL itself, the default), segv (a segmentation fault), abort
 * (MPI_Abort(MPI_COMM_WORLD, 3)) or exit (exit(4), without MPI_Finalize).
 */
#ifndef HBPROF_EXAMPLES_COMMON_H
#define HBPROF_EXAMPLES_COMMON_H

#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif

#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <mpi.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

struct opts {
    long   iterations;
    long   work;          /* sweeps per iteration */
    long   n;             /* local points (stencil) */
    long   heavy_every;
    double heavy_factor;
    long   halo;          /* bytes */
    int    vary_halo;
    double jitter;
    long   checkpoint_every;
    int    mpiio;
    const char *ckpt_dir;
    uint64_t seed;
    int    blocking;      /* stencil: MPI_Sendrecv instead of Isend/Irecv */
    long   die_at;
    int    die_rank;
    int    die_how;       /* 0 kill, 1 segv, 2 abort, 3 exit */
};

static const char *prog_name = "example";

static inline void usage_common(FILE *f)
{
    fprintf(f,
            "  --iterations N        iterations, each ending in the boundary collective (100)\n"
            "  --work W              computation sweeps per iteration (50)\n"
            "  --heavy-every K       every K-th iteration (i %% K == K-1) does more work (0: none)\n"
            "  --heavy-factor F      work multiplier of a heavy iteration (3)\n"
            "  --halo BYTES          bytes per exchange, a multiple of 8 (1024)\n"
            "  --vary-halo           iteration i exchanges a random multiple of 8 in [8, BYTES],\n"
            "                        the same on every rank\n"
            "  --jitter J            per-rank random work factor in [1-J, 1+J] per iteration (0)\n"
            "  --checkpoint-every C  checkpoint in every C-th iteration (0: never)\n"
            "  --io posix|mpiio      checkpoint with POSIX I/O or MPI-IO (posix)\n"
            "  --ckpt-dir DIR        where checkpoints go (.)\n"
            "  --seed S              seed of the data and the random knobs (1)\n"
            "  --die-at I            rank --die-rank SIGKILLs itself at the start of iteration I\n"
            "  --die-rank R          (1)\n"
            "  --die-how H           kill (default), segv, abort (MPI_Abort 3) or exit (exit(4))\n"
            "  --help                this text\n");
}

static inline uint64_t mix64(uint64_t z)
{
    z += 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* uniform [0,1) from (seed, a, b) */
static inline double urand(uint64_t seed, uint64_t a, uint64_t b)
{
    return (double)(mix64(seed ^ mix64(a ^ mix64(b))) >> 11) * 0x1.0p-53;
}

static inline int parse_long(const char *s, long lo, long *out)
{
    char *e;
    errno = 0;
    long v = strtol(s, &e, 10);
    if (errno || *e || v < lo)
        return -1;
    *out = v;
    return 0;
}

/* returns 0, or exits: 0 after --help (rank 0 prints usage_head and the
 * common options), 2 on a bad option (rank 0 explains) */
static inline void parse_opts(int argc, char **argv, struct opts *o, int rank, int stencil,
                              const char *usage_head)
{
    *o = (struct opts){ .iterations = 100, .work = 50, .n = 4096, .heavy_factor = 3.0,
                        .halo = 1024, .ckpt_dir = ".", .seed = 1, .die_at = -1, .die_rank = 1 };
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, takes = 1;
        long l;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            if (rank == 0) {
                fputs(usage_head, stdout);
                usage_common(stdout);
            }
            MPI_Finalize();
            exit(0);
        } else if (!strcmp(a, "--vary-halo")) {
            o->vary_halo = 1;
            takes = 0;
        } else if (!v) {
            bad = 1;
        } else if (!strcmp(a, "--iterations")) {
            bad = parse_long(v, 0, &o->iterations);
        } else if (!strcmp(a, "--work")) {
            bad = parse_long(v, 0, &o->work);
        } else if (!strcmp(a, "--n") && stencil) {
            bad = parse_long(v, 2, &o->n);
        } else if (!strcmp(a, "--heavy-every")) {
            bad = parse_long(v, 0, &o->heavy_every);
        } else if (!strcmp(a, "--heavy-factor")) {
            o->heavy_factor = atof(v);
            bad = !(o->heavy_factor > 0);
        } else if (!strcmp(a, "--halo")) {
            bad = parse_long(v, 8, &o->halo) || o->halo % 8;
        } else if (!strcmp(a, "--jitter")) {
            o->jitter = atof(v);
            bad = !(o->jitter >= 0 && o->jitter < 1);
        } else if (!strcmp(a, "--checkpoint-every")) {
            bad = parse_long(v, 0, &o->checkpoint_every);
        } else if (!strcmp(a, "--io")) {
            o->mpiio = !strcmp(v, "mpiio");
            bad = !o->mpiio && strcmp(v, "posix");
        } else if (!strcmp(a, "--ckpt-dir")) {
            o->ckpt_dir = v;
        } else if (!strcmp(a, "--seed")) {
            bad = parse_long(v, 0, &l);
            o->seed = (uint64_t)l;
        } else if (!strcmp(a, "--p2p") && stencil) {
            o->blocking = !strcmp(v, "blocking");
            bad = !o->blocking && strcmp(v, "nonblocking");
        } else if (!strcmp(a, "--die-at")) {
            bad = parse_long(v, 0, &o->die_at);
        } else if (!strcmp(a, "--die-how")) {
            static const char *const hows[] = { "kill", "segv", "abort", "exit" };
            bad = 1;
            for (int k = 0; k < 4; k++)
                if (!strcmp(v, hows[k])) {
                    o->die_how = k;
                    bad = 0;
                }
        } else if (!strcmp(a, "--die-rank")) {
            bad = parse_long(v, 0, &l);
            o->die_rank = (int)l;
        } else {
            bad = 1;
        }
        if (bad) {
            if (rank == 0)
                fprintf(stderr, "%s: bad option or value: %s%s%s (try --help)\n", prog_name, a,
                        v && takes ? " " : "", v && takes ? v : "");
            MPI_Finalize();
            exit(2);
        }
        i += takes;
    }
}

/* the start of every example: MPI_Init, this rank, the number of ranks
 * and the options (see parse_opts) */
static inline void example_init(int *argc, char ***argv, const char *name, int stencil,
                                const char *usage_head, struct opts *o, int *rank, int *size)
{
    prog_name = name;
    MPI_Init(argc, argv);
    MPI_Comm_rank(MPI_COMM_WORLD, rank);
    MPI_Comm_size(MPI_COMM_WORLD, size);
    parse_opts(*argc, *argv, o, *rank, stencil, usage_head);
}

static inline int is_heavy(const struct opts *o, long i)
{
    return o->heavy_every > 0 && i % o->heavy_every == o->heavy_every - 1;
}

/* sweeps of iteration i on this rank */
static inline long sweeps_of(const struct opts *o, long i, int rank)
{
    double w = (double)o->work * (is_heavy(o, i) ? o->heavy_factor : 1.0);
    if (o->jitter > 0)
        w *= 1.0 + o->jitter * (2.0 * urand(o->seed, 0x6a69747465720000ull + (uint64_t)rank,
                                            (uint64_t)i) - 1.0);
    return (long)(w + 0.5);
}

/* bytes exchanged in iteration i (the same on every rank) */
static inline long halo_of(const struct opts *o, long i)
{
    if (!o->vary_halo)
        return o->halo;
    long k = o->halo / 8;
    return 8 * (1 + (long)(urand(o->seed, 0x68616c6full, (uint64_t)i) * (double)k));
}

static inline void maybe_die(const struct opts *o, long i, int rank)
{
    if (o->die_at == i && rank == o->die_rank) {
        fflush(stdout);
        if (o->die_how == 1) {
            volatile int *nowhere = NULL;
            *nowhere = 1;
        } else if (o->die_how == 2) {
            MPI_Abort(MPI_COMM_WORLD, 3);
        } else if (o->die_how == 3) {
            exit(4);
        }
        kill(getpid(), SIGKILL);
    }
}

static inline int do_checkpoint(const struct opts *o, long i)
{
    return o->checkpoint_every > 0 && (i + 1) % o->checkpoint_every == 0;
}

static inline void checkpoint(const struct opts *o, const double *data, long n, int rank)
{
    char path[4096];
    if (!o->mpiio) {
        snprintf(path, sizeof path, "%s/ckpt-%s-r%d.bin", o->ckpt_dir, prog_name, rank);
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        if (fd < 0) {
            fprintf(stderr, "%s: rank %d: cannot create %s: %s\n", prog_name, rank, path,
                    strerror(errno));
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        size_t len = (size_t)n * sizeof *data;
        ssize_t w = write(fd, data, len);
        if (w != (ssize_t)len) {
            fprintf(stderr, "%s: rank %d: short checkpoint write\n", prog_name, rank);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        close(fd);
    } else {
        snprintf(path, sizeof path, "%s/ckpt-%s.bin", o->ckpt_dir, prog_name);
        MPI_File fh;
        if (MPI_File_open(MPI_COMM_WORLD, path, MPI_MODE_CREATE | MPI_MODE_WRONLY, MPI_INFO_NULL,
                          &fh) != MPI_SUCCESS) {
            fprintf(stderr, "%s: rank %d: cannot open %s\n", prog_name, rank, path);
            MPI_Abort(MPI_COMM_WORLD, 1);
        }
        MPI_File_write_at_all(fh, (MPI_Offset)rank * n * (MPI_Offset)sizeof *data, data, (int)n,
                              MPI_DOUBLE, MPI_STATUS_IGNORE);
        MPI_File_close(&fh);
    }
}

static inline double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif /* HBPROF_EXAMPLES_COMMON_H */
