/*
 * beat.h -- the heartbeat API as a weak symbol: these programs are not linked
 * with the tracer, so that the same binary runs with and without it. Under
 * LD_PRELOAD=libhbtrace.so beat() records a beat; without it, it does nothing.
 */
#ifndef HOSTILE_BEAT_H
#define HOSTILE_BEAT_H

void hbt_beat(unsigned tag) __attribute__((weak));

static inline void beat(unsigned tag)
{
    if (hbt_beat)
        hbt_beat(tag);
}

#endif
