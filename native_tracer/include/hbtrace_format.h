/*
 * hbtrace_format.h -- on-disk layout of an hbtrace heartbeat trace file.
 *
 * This header is the single source of truth for the format. docs/formats.md
 * mirrors it byte by byte, and tests/test_layout.py checks hbtool's Python
 * structs against the sizeof/offsetof values printed by tools/hbt_layout.c.
 *
 * One file per process, named  hbtrace-<host>-<pid>[-r<rank>][.<n>].hbt
 *
 *   offset 0                : struct hbt_file_header      (128 bytes)
 *   offset meta_offset      : metadata text, meta_length bytes used of
 *                             meta_capacity reserved ("key=value\n" lines, UTF-8)
 *   offset data_offset      : chunk area, data_length bytes, a whole number of
 *                             units of unit_size bytes each
 *
 * Version 2: chunks of several sizes, so that trace bytes follow records.
 * The chunk area is cut into units of unit_size bytes (256). A chunk is a
 * run of whole units that starts at a unit boundary and never crosses a
 * multiple of chunk_size (counted from data_offset); chunk_size is the
 * largest chunk. A thread's first chunk is one unit (a thread that records
 * only its start and end costs 256 bytes), each further chunk of the thread
 * twice the one before, up to chunk_size. When a thread ends, the unused
 * whole units at the end of its last chunk are given back: its chunk header's
 * capacity is lowered first, and the units freed may then hold a chunk of
 * another thread. A unit that begins no chunk and lies inside none is zero.
 * (Version 1: every chunk was chunk_size bytes; unit_size was reserved, 0.)
 *
 * A chunk belongs to one OS thread. It is an array of 32-byte slots: slot 0
 * is a struct hbt_chunk_header, slots 1.. are struct hbt_record. A unit
 * whose first slot has the chunk magic begins a chunk; magic 0 = no chunk
 * begins there. Records inside a chunk are filled
 * in order; the first record whose kind is 0 ends the chunk (the rest is
 * zero). The writer stores the last 4 bytes of a slot (kind+flags, or the
 * chunk magic) last, with release ordering, so a slot with a non-zero kind is
 * complete even if the process died while writing the next one.
 *
 * The file is written through a MAP_SHARED mapping: a record reaches the
 * kernel's page cache the moment it is stored, so it survives exit(), abort(),
 * a crash or SIGKILL of the process.
 *
 * All integers are in the byte order of the writer; `endian` holds
 * HBT_ENDIAN_MARK as written, so a reader tells the order from its bytes.
 * Readers must skip record kinds they do not know.
 */
#ifndef HBTRACE_FORMAT_H
#define HBTRACE_FORMAT_H

#include <stdint.h>

#define HBT_MAGIC          "HBTRACE"   /* 8 bytes with the trailing NUL */
#define HBT_VERSION        2u
#define HBT_ENDIAN_MARK    0x01020304u
#define HBT_HEADER_SIZE    128u
#define HBT_SLOT_SIZE      32u
#define HBT_CHUNK_MAGIC    0x4B434248u /* "HBCK" read as little-endian bytes */
#define HBT_META_CAPACITY  3968u       /* header + metadata fill the first 4 KiB page */
#define HBT_DATA_OFFSET    4096u
#define HBT_CHUNK_SIZE     65536u      /* largest chunk; the header says which is used */
#define HBT_UNIT_SIZE      256u        /* chunks are whole units; the header says which */

/* clock_id values: the clock behind every t_ns in the file */
#define HBT_CLOCK_MONOTONIC      1u   /* clock_gettime(CLOCK_MONOTONIC) */
#define HBT_CLOCK_MONOTONIC_RAW  4u   /* clock_gettime(CLOCK_MONOTONIC_RAW) */
#define HBT_CLOCK_SYNTHETIC      255u /* written by a converter, not a live clock */

/* lost_why bits: why the tracer dropped records (lost_records) */
#define HBT_LOST_CAP       0x1u  /* the file reached HBTRACE_MAX_MB */
#define HBT_LOST_NOSPACE   0x2u  /* the file could not grow: no space on the device (ENOSPC, EDQUOT) */
#define HBT_LOST_FSIZE     0x4u  /* the file could not grow: file size limit (EFBIG, RLIMIT_FSIZE) */
#define HBT_LOST_IO        0x8u  /* the file could not grow or be mapped: another error (lost_errno) */
#define HBT_LOST_LOCK     0x10u  /* the tracer's lock was held too long by a thread that died in it */

/* header flags */
#define HBT_FLAG_PRELOAD   0x1u  /* tracer was loaded with LD_PRELOAD */
#define HBT_FLAG_CONVERTED 0x2u  /* file written by `hbtool convert`, not by a run */

struct hbt_file_header {          /* 128 bytes, offset 0 */
    char     magic[8];            /*   0: "HBTRACE\0" */
    uint32_t version;             /*   8: HBT_VERSION */
    uint32_t endian;              /*  12: HBT_ENDIAN_MARK in writer byte order */
    uint32_t header_size;         /*  16: sizeof(struct hbt_file_header) */
    uint32_t slot_size;           /*  20: HBT_SLOT_SIZE */
    uint32_t chunk_size;          /*  24: bytes of the largest chunk, a multiple of
                                           4096 and of unit_size */
    uint32_t flags;               /*  28: HBT_FLAG_* */
    uint32_t meta_offset;         /*  32: offset of the metadata text */
    uint32_t meta_length;         /*  36: bytes of metadata text in use */
    uint32_t meta_capacity;       /*  40: bytes reserved for metadata text */
    uint32_t clock_id;            /*  44: HBT_CLOCK_* */
    uint64_t data_offset;         /*  48: offset of the first chunk */
    uint64_t data_length;         /*  56: bytes of chunk area allocated so far, a
                                           multiple of unit_size */
    uint64_t start_mono_ns;       /*  64: clock value at tracer start: t = t_ns - this */
    int64_t  start_real_ns;       /*  72: CLOCK_REALTIME at tracer start, ns since epoch */
    uint32_t clock_res_ns;        /*  80: clock_getres of clock_id */
    uint32_t pid;                 /*  84: process id */
    int32_t  rank;                /*  88: MPI rank, -1 when none */
    uint32_t unit_size;           /*  92: HBT_UNIT_SIZE: chunks start at and are
                                           multiples of it (version 1: reserved, 0) */
    uint64_t lost_records;        /*  96: records dropped (file size cap reached, disk
                                           full, file gone); why: HBT_LOST_* in lost_why */
    uint32_t lost_why;            /* 104: HBT_LOST_* bits: why records were dropped */
    uint32_t lost_errno;          /* 108: errno of the first failure to grow the file, 0 none */
    uint64_t reserved[2];         /* 112..127 */
};

struct hbt_chunk_header {         /* 32 bytes, slot 0 of every chunk */
    uint64_t os_tid;              /*   0: gettid() of the owning thread */
    uint32_t thread_slot;         /*   8: order in which the thread registered, from 0 */
    uint32_t chunk_seq;           /*  12: n-th chunk of this thread, from 0 */
    int32_t  user_thread;         /*  16: user thread number when the chunk began, -1 unknown */
    uint32_t reserved;            /*  20 */
    uint32_t capacity;            /*  24: slots in this chunk including this header: a
                                           multiple of unit_size / 32, at most chunk_size / 32;
                                           lowered when the thread ends and gives back units */
    uint32_t magic;               /*  28: HBT_CHUNK_MAGIC, stored last; 0 = unused chunk */
};

/* record kinds (struct hbt_record.kind); 0 marks the end of a chunk */
#define HBT_REC_BEAT           1u  /* seq, thread, loop, iter, aux = tag */
#define HBT_REC_THREAD_START   2u  /* a thread began (LD_PRELOAD or first API use); aux = creator's thread_slot or UINT32_MAX */
#define HBT_REC_THREAD_END     3u  /* a thread ended: aux = HBT_END_* */
#define HBT_REC_INIT           4u  /* the program called an Init API; aux = its type argument */
#define HBT_REC_FINISHED       5u  /* the program called a Finished API */
#define HBT_REC_PROCESS_EXIT   6u  /* exit()/return from main/_exit; aux = exit status, flags = HBT_EXIT_* */
#define HBT_REC_SIGNAL         7u  /* the process got a fatal signal; aux = signal number */
#define HBT_REC_LOST           8u  /* the tracer dropped records; aux = how many */
#define HBT_REC_BEHAVIOR       9u  /* the online monitor saw a thread change behavior
                                      (written by the thread that detected it: the
                                      central monitor thread, a ring neighbour, or
                                      the caller of Monitor/Finished/exit):
                                      t_ns   = when it was detected,
                                      seq    = the monitored thread's beat count at the
                                               onset, i.e. the index of its last beat
                                               before the onset plus one (low 32 bits),
                                      thread = the monitored thread's user thread number
                                               (the number its beats record; -1 for a
                                               thread that never beat nor set one),
                                      loop   = the new behavior, HBT_BHV_*,
                                      iter   = detection lag in microseconds: t_ns minus
                                               the onset, the time the behavior began
                                               according to the beats (saturated at
                                               INT32_MAX); onset = t_ns - iter us:
                                               BUSY/COND_WAITING, and FAILED for a thread
                                               that vanished: its last beat;
                                               EXITED, and FAILED when cancelled: its last
                                               beat (its end time if it never beat);
                                               RUNNING again: the first beat after the gap
                                               (estimated at the baseline rate when the
                                               checker saw several new beats at once), one
                                               baseline interval earlier after COND_WAITING;
                                               at exit: EXITED at the last beat (status 0),
                                               FAILED at the exit (other status),
                                      aux    = the monitored thread's thread_slot,
                                      flags  = HBT_MON_* mode of the monitor */
#define HBT_REC_MONITOR       10u  /* monitor statistics, cumulative since the monitor
                                      started (written every second by the central
                                      monitor thread, and at Finished and exit in
                                      both modes by the thread calling them):
                                      seq    = messages exchanged (reads of another
                                               thread's heartbeat entry), low 32 bits,
                                      aux    = messages exchanged, high 32 bits,
                                      thread = threads being monitored (beating, not
                                               ended or reported gone),
                                      loop   = detection passes (central passes, ring
                                               checks, Monitor calls, final passes),
                                               saturated at INT32_MAX,
                                      iter   = monitor period in microseconds: central,
                                               the mean time between its passes (over the
                                               last second, or since it started at
                                               Finished and exit); ring, the mean over the
                                               checkers of the time between their checks;
                                               saturated,
                                      flags  = HBT_MON_* mode */
#define HBT_REC_ADJUST        11u  /* Heartbeat_HeartRate_Adjust (or HBTRACE_HEART_RATE)
                                      changed how many calls make one beat: from now on
                                      every aux-th Generate/beat call of a thread is
                                      recorded; seq = the previous value, iter = the
                                      target rate in milli-beats/s (saturated), loop =
                                      the observed mean rate per thread in milli-beats/s
                                      (saturated), thread = the caller's user thread
                                      number or -1, flags = 1 when automatic
                                      (HBTRACE_HEART_RATE), 0 for an API call */

#define HBT_REC_QUEUE_OPEN    12u  /* an instrumented queue was created (hbtrace_queue.h):
                                      thread = queue id (per process, from 0),
                                      seq    = capacity in items,
                                      aux    = item size in bytes,
                                      iter   = initial sampling period in microseconds,
                                      loop   = 0; its name is in NAME records
                                      (HBT_NAME_QUEUE) */
#define HBT_REC_QUEUE_SAMPLE  13u  /* one sample of one end of a queue, written by the
                                      queue monitor thread every period T:
                                      t_ns   = when the counters were taken (the end of
                                               the period; the realized period is the
                                               time since the previous sample of the
                                               same queue and end, or since QUEUE_OPEN),
                                      seq    = non-blocking transactions of this end in
                                               the period (pushes that found room,
                                               pops that found an item),
                                      thread = queue id,
                                      loop   = HBT_QEND_*,
                                      iter   = the period T the monitor aimed for, in
                                               microseconds,
                                      aux    = item size in bytes,
                                      flags  = HBT_QFLAG_* */
#define HBT_REC_NAME          14u  /* a fragment of a name (queue, probe): bytes 0..23 of
                                      the slot (t_ns, seq, thread, loop, iter) hold up to
                                      24 bytes of UTF-8 text, NUL-padded;
                                      aux    = HBT_NAME_* << 24 | id,
                                      flags  = fragment index from 0, | HBT_NAME_LAST
                                               on the last fragment */
#define HBT_REC_PROBE         15u  /* one statistic of one timing probe for one thread
                                      (hbtrace_probe.h), written when the thread's
                                      statistics are merged (its thread end, or
                                      process exit for the threads still alive, once
                                      per thread); a complete set is the four
                                      statistics of HBT_PSTAT_*:
                                      t_ns   = the value (NOT a time stamp): a count,
                                               or nanoseconds,
                                      seq    = probe id (per process, from 0),
                                      thread = the measured thread's user thread number
                                               or -1,
                                      loop   = the measured thread's thread_slot,
                                      iter   = 0, aux = 0,
                                      flags  = HBT_PSTAT_* */
#define HBT_REC_STATUS        16u  /* one metric of one machine-status sample:
                                      t_ns   = when the sample was taken,
                                      seq    = the value, low 32 bits,
                                      aux    = the value, high 32 bits,
                                      loop   = sample number from 0,
                                      thread = -1, iter = 0,
                                      flags  = HBT_STAT_*; counters are cumulative
                                               since the sampler started, and already
                                               corrected for the wrap of the kernel's
                                               per-interface counters */

#define HBT_REC_WAIT          17u  /* the thread left a synchronisation it waited in
                                      (automatic beats, issue 15; src/autobeat.h):
                                      t_ns   = when it left,
                                      seq    = the thread's automatic beats so far,
                                      thread = OpenMP thread number in the outermost
                                               team (MPI: the rank's thread slot),
                                      loop   = construct id (0 unknown),
                                      iter   = the wait in ns, high 32 bits,
                                      aux    = the wait in ns, low 32 bits,
                                      flags  = source | sync kind << 4 */

#define HBT_REC_CPU           18u  /* a thread's CPU time in a gap between its records
                                      (no beat, wait or other automatic record for at
                                      least HBT_CPU_GAP_NS), written by that thread with
                                      the record that ended the gap (src/autobeat.h):
                                      t_ns   = the gap's end,
                                      seq    = CPU ns the thread used in the gap, low 32 bits,
                                      aux    = the same, high 32 bits,
                                      thread = as for the record that ended the gap,
                                      loop   = construct id of that record (0 unknown),
                                      iter   = the gap in microseconds (saturated),
                                      flags  = source of that record (bits 0..3);
                                               HBT_CPU_QUEUED set when bits 4..14
                                               hold the share of the gap the thread
                                               was runnable, waiting for a CPU (its
                                               run-queue delay, from
                                               /proc/thread-self/schedstat), in
                                               1/HBT_CPU_QUEUED_MAX of the gap */
#define HBT_CPU_GAP_NS      2000000ull  /* 2 ms */
#define HBT_CPU_QUEUED        0x8000u
#define HBT_CPU_QUEUED_SHIFT  4u
#define HBT_CPU_QUEUED_MAX    2047u

#define HBT_REC_MEMORY        19u  /* the memory signal (src/memory.c), written by a thread
                                      that records, at most every 20 ms while its counts
                                      change, and at its end; scope in flags bits 4..7:
                                      HBT_MEM_THREAD: that thread's allocator counts since
                                        it started (usable sizes of the blocks):
                                        seq, aux = bytes it allocated, low, high 32 bits;
                                        loop, iter = bytes it freed, low, high 32 bits: of
                                        blocks under 64 KiB, whoever allocated them; of
                                        larger ones, its own, whoever freed them;
                                      HBT_MEM_OWNED (at exit, by the exiting thread, for
                                        each thread whose blocks of 64 KiB or more others
                                        freed after its last record): that thread's counts
                                        as HBT_MEM_THREAD's, with those bytes freed too;
                                        thread = its thread number (not the writer's);
                                      HBT_MEM_PROCESS (at most every 200 ms, and at exit):
                                        seq, aux = the process's resident bytes;
                                        loop, iter = bytes in use in glibc's heap
                                        (mallinfo2 uordblks + hblkhd);
                                        all ones: unknown (not read, another allocator);
                                      t_ns   = when they were read,
                                      thread = the writer's thread number as its latest
                                               record had it,
                                      flags  = source of that record | scope << 4 */
#define HBT_MEM_THREAD         0u
#define HBT_MEM_PROCESS        1u
#define HBT_MEM_OWNED          2u

#define HBT_REC_SCHED         20u  /* a thread's CPU time and run-queue delay over a span
                                      of its run, written by that thread from its cold
                                      path (src/autobeat.c) while it records, at most
                                      every HBT_SCHED_NS or a 1/HBT_SCHED_PARTS of its
                                      time since its first reading, whichever is
                                      longer, where /proc/thread-self/schedstat can be
                                      read; the spans of one thread follow each other
                                      with no hole from its first such reading:
                                      t_ns   = the span's end,
                                      seq    = CPU microseconds it used in the span,
                                      aux    = microseconds it was runnable, waiting for
                                               a CPU (run-queue delay) in the span,
                                      thread = as for the record that ended the span,
                                      loop   = construct id of that record (0 unknown),
                                      iter   = the span in microseconds (saturated),
                                      flags  = source of that record (bits 0..3) */
#define HBT_SCHED_NS       20000000ull  /* 20 ms */
#define HBT_SCHED_PARTS    512u

/* flags of automatic beats (HBT_REC_BEAT) and of HBT_REC_WAIT: bits 0..3 the source,
 * bits 4..15 the event (beats) or the sync kind (waits). API beats have flags 0. */
#define HBT_SRC_MASK           0xFu
#define HBT_EV_SHIFT           4u
#define HBT_BEATSRC_API        0u
#define HBT_BEATSRC_OPENMP     1u
#define HBT_BEATSRC_MPI        2u

/* ends of a queue (loop of HBT_REC_QUEUE_SAMPLE) */
#define HBT_QEND_PRODUCER      0u  /* the tail: pushes (the stage that writes into it) */
#define HBT_QEND_CONSUMER      1u  /* the head: pops (the stage that reads from it) */

/* flags of HBT_REC_QUEUE_SAMPLE */
#define HBT_QFLAG_BLOCKED      0x1u /* this end blocked at least once in the period
                                       (producer: queue full; consumer: queue empty) */
#define HBT_QFLAG_FINAL        0x2u /* the last sample, taken when the queue closed */
#define HBT_QFLAG_STAGE_BLOCKED 0x4u /* the thread at this end (its stage) blocked on
                                       any of its queues in the period, this one or
                                       another (seed 002: blocking per kernel), or
                                       cannot be told (its first sample, a change of
                                       thread); set whenever HBT_QFLAG_BLOCKED is.
                                       Traces written before it never set it. */

/* name spaces (aux >> 24 of HBT_REC_NAME) and flags */
#define HBT_NAME_QUEUE         1u
#define HBT_NAME_PROBE         2u  /* text: "<file>:<line>\t<label>" */
#define HBT_NAME_CONSTRUCT     3u  /* text: "<kind>\t<symbol>\t<object>+0x<offset>" */
#define HBT_NAME_LAST          0x8000u

/* statistics of HBT_REC_PROBE (flags) */
#define HBT_PSTAT_COUNT        0u  /* completed uses (begin/end pairs) */
#define HBT_PSTAT_TOTAL_NS     1u  /* sum of their durations */
#define HBT_PSTAT_MIN_NS       2u  /* shortest duration */
#define HBT_PSTAT_MAX_NS       3u  /* longest duration */

/* metrics of HBT_REC_STATUS (flags); from /proc/stat (ticks of sysconf(_SC_CLK_TCK),
 * metadata key status_clk_tck), /proc/meminfo (KiB), /proc/net/dev (bytes, all
 * interfaces but lo), getrusage and /proc/self/statm */
#define HBT_STAT_CPU_USER      0u  /* user + nice, ticks, all CPUs */
#define HBT_STAT_CPU_SYSTEM    1u  /* system + irq + softirq, ticks */
#define HBT_STAT_CPU_IDLE      2u  /* idle, ticks */
#define HBT_STAT_CPU_IOWAIT    3u  /* iowait, ticks */
#define HBT_STAT_CPU_STEAL     4u  /* steal (time a hypervisor gave to others), ticks */
#define HBT_STAT_MEM_TOTAL_KB  5u  /* MemTotal */
#define HBT_STAT_MEM_AVAIL_KB  6u  /* MemAvailable (MemFree + Buffers + Cached if absent) */
#define HBT_STAT_SWAP_TOTAL_KB 7u  /* SwapTotal */
#define HBT_STAT_SWAP_FREE_KB  8u  /* SwapFree */
#define HBT_STAT_NET_RX_BYTES  9u  /* received, cumulative since the sampler started */
#define HBT_STAT_NET_TX_BYTES 10u  /* sent, cumulative since the sampler started */
#define HBT_STAT_PROC_USER_US 11u  /* this process's user CPU time, microseconds */
#define HBT_STAT_PROC_SYS_US  12u  /* this process's system CPU time, microseconds */
#define HBT_STAT_PROC_RSS_KB  13u  /* this process's resident set */

/* behaviors (loop of HBT_REC_BEHAVIOR) */
#define HBT_BHV_RUNNING        0u  /* beats at the thread's usual rate */
#define HBT_BHV_BUSY_WAITING   1u  /* late, but on the CPU: spinning instead of beating
                                      (it used CPU time while late) */
#define HBT_BHV_COND_WAITING   2u  /* late and off the CPU: blocked */
#define HBT_BHV_EXITED         3u  /* the thread ended normally */
#define HBT_BHV_FAILED         4u  /* the thread vanished or was cancelled, or the
                                      process is ending with it still at work */

/* monitor modes (flags of HBT_REC_BEHAVIOR and HBT_REC_MONITOR; the type argument
 * of Heartbeat_OpenMP_Init and Heartbeat_MultiPthread_Init) */
#define HBT_MON_CENTRAL        0u  /* one monitor thread checks every worker */
#define HBT_MON_RING           1u  /* each worker checks its live neighbour on its beats */

/* aux of HBT_REC_THREAD_END */
#define HBT_END_RETURN         0u  /* start routine returned */
#define HBT_END_PTHREAD_EXIT   1u  /* pthread_exit() */
#define HBT_END_CANCELLED      2u  /* cancelled */

/* flags of HBT_REC_PROCESS_EXIT */
#define HBT_EXIT_NORMAL        0u  /* exit() or return from main */
#define HBT_EXIT_UNDERSCORE    1u  /* _exit()/_Exit() */
#define HBT_EXIT_CALLED        2u  /* exit() was called here, its handlers begin; the
                                      process's end is the PROCESS_EXIT without it */

struct hbt_record {               /* 32 bytes */
    uint64_t t_ns;                /*   0: clock value (clock_id) in ns */
    uint32_t seq;                 /*   8: beats: per-thread sequence number from 0, low 32 bits */
    int32_t  thread;              /*  12: user thread number (threadnum argument), -1 none */
    int32_t  loop;                /*  16: loop number argument */
    int32_t  iter;                /*  20: iteration argument */
    uint32_t aux;                 /*  24: kind-specific: tag, status, signal, ... */
    uint16_t kind;                /*  28: HBT_REC_*; 0 = no record here */
    uint16_t flags;               /*  30: kind-specific */
};

#endif /* HBTRACE_FORMAT_H */
