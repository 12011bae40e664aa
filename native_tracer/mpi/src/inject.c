/*
 * inject.c -- the interference injector (like seed 004's intM).
 *
 * HBPROF_INJECT="MEAN_US,SD_US,PROB": before each intercepted call of the
 * families in HBPROF_INJECT_CALLS made by the profiled thread (outermost
 * calls only, between MPI_Init and MPI_Finalize; MPI_Init and MPI_Finalize
 * themselves are never delayed), draw u ~ U[0,1); if u < PROB draw
 * d ~ N(MEAN_US, SD_US); if d > 0, sleep d microseconds with clock_nanosleep
 * (CLOCK_MONOTONIC, relative, resumed after signals). The delay is outside
 * the computation metric (it happens inside the wrapper) and inside the
 * segment's wall time. The truth is the measured wall time of the sleeps
 * (slightly more than d: the kernel's timer slack) and the number of calls
 * slept before, per segment (HBP_REC_INJECT records, then the CSV).
 *
 * Random numbers: xoshiro256** seeded through splitmix64 from
 * (HBPROF_INJECT_SEED, rank), two draws per delayed call (Box-Muller), one
 * per call otherwise, so a rank's delays depend only on the seed, the rank
 * and its sequence of intercepted calls.
 */
#include "internal.h"

#include <errno.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static inline uint64_t rotl(uint64_t x, int k)
{
    return (x << k) | (x >> (64 - k));
}

static uint64_t next_u64(uint64_t *s)
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* uniform in [0, 1) with 53 random bits */
static double next_double(uint64_t *s)
{
    return (double)(next_u64(s) >> 11) * 0x1.0p-53;
}

static int parse_families(const char *s, unsigned *out)
{
    unsigned f = 0;
    while (s && *s) {
        while (*s == ',' || *s == ' ')
            s++;
        const char *e = s;
        while (*e && *e != ',' && *e != ' ')
            e++;
        size_t len = (size_t)(e - s);
        if (len == 0)
            break;
        if (len == 3 && strncasecmp(s, "mpi", 3) == 0)
            f |= HBP_INJ_MPI;
        else if (len == 5 && strncasecmp(s, "posix", 5) == 0)
            f |= HBP_INJ_POSIX;
        else if (len == 5 && strncasecmp(s, "mpiio", 5) == 0)
            f |= HBP_INJ_MPIIO;
        else
            return -1;
        s = e;
    }
    *out = f;
    return 0;
}

void hbp_inject_config(void)
{
    struct hbp_inject *in = &hbp_g.inj;
    memset(in, 0, sizeof *in);
    const char *spec = hbp_getenv(HBPROF_INJECT);
    if (!spec || !*spec)
        return;
    char *e1, *e2, *e3;
    errno = 0;
    double mean = strtod(spec, &e1);
    double sd = *e1 == ',' ? strtod(e1 + 1, &e2) : (e2 = e1, NAN);
    double prob = *e2 == ',' ? strtod(e2 + 1, &e3) : (e3 = e2, NAN);
    if (errno || *e3 != '\0' || !(mean >= 0) || !(sd >= 0) || !(prob >= 0 && prob <= 1) ||
        !isfinite(mean) || !isfinite(sd)) {
        hbp_warn("%s=%s: expected MEAN_US,SD_US,PROB (non-negative, PROB <= 1); "
                 "no interference injected", hbprof_env_name(HBPROF_INJECT), spec);
        return;
    }
    unsigned fam = HBP_INJ_MPI | HBP_INJ_POSIX | HBP_INJ_MPIIO;
    const char *calls = hbp_getenv(HBPROF_INJECT_CALLS);
    if (calls && *calls && parse_families(calls, &fam) != 0) {
        hbp_warn("%s=%s: expected a comma list of mpi, posix, mpiio; "
                 "no interference injected", hbprof_env_name(HBPROF_INJECT_CALLS), calls);
        return;
    }
    uint64_t seed = 1;
    const char *ss = hbp_getenv(HBPROF_INJECT_SEED);
    if (ss && *ss) {
        char *end;
        errno = 0;
        unsigned long long v = strtoull(ss, &end, 0);
        if (errno || *end != '\0')
            hbp_warn("%s=%s: not an integer; using 1", hbprof_env_name(HBPROF_INJECT_SEED), ss);
        else
            seed = v;
    }
    in->mean_ns = mean * 1000.0;
    in->sd_ns = sd * 1000.0;
    in->prob = prob;
    in->seed = seed;
    uint64_t x = seed ^ (0xD1B54A32D192ED03ull * ((uint64_t)(uint32_t)hbp_g.rank + 1));
    for (int i = 0; i < 4; i++)
        in->s[i] = splitmix64(&x);
    in->families = fam;
}

int hbp_inject_hit(void)
{
    return next_double(hbp_g.inj.s) < hbp_g.inj.prob;
}

void hbp_inject_delay(void)
{
    if (hbp_inject_hit())
        hbp_inject_sleep();
}

void hbp_inject_sleep(void)
{
    struct hbp_inject *in = &hbp_g.inj;
    double u1 = 1.0 - next_double(in->s);   /* (0, 1] */
    double u2 = next_double(in->s);
    double z = sqrt(-2.0 * log(u1)) * cos(2.0 * M_PI * u2);
    double d = in->mean_ns + in->sd_ns * z;
    if (!(d >= 1.0))
        return;   /* clipped at 0: no delay */
    uint64_t ns = (uint64_t)(d + 0.5);
    uint64_t t1 = hbp_now_ns();
    struct timespec req = { (time_t)(ns / 1000000000u), (long)(ns % 1000000000u) }, rem;
    while (clock_nanosleep(CLOCK_MONOTONIC, 0, &req, &rem) == EINTR)
        req = rem;
    in->seg_ns += hbp_now_ns() - t1;
    in->seg_calls++;
}
