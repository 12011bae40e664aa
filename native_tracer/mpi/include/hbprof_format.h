/*
 * hbprof_format.h -- on-disk layout of the PMPI segment profiler's files.
 *
 * This header is the single source of truth for the format. docs/profile-format.md
 * mirrors it byte by byte; bin/hbprof_layout prints the sizeof/offsetof values
 * and every numeric #define below as JSON, for readers to check against.
 *
 * Two kinds of file share the header struct (hbp_file_header.flags says which):
 *
 *   per-rank file  hbprof-<host>-<pid>-r<rank>.hbp   HBP_FLAG_RANK_FILE
 *     written by every rank while the program runs, a stream of fixed-size
 *     records through a growing MAP_SHARED mapping (it survives SIGKILL, a
 *     crash or MPI_Abort up to the last completed record):
 *
 *       offset 0                   struct hbp_file_header   (256 bytes)
 *       offset metric_table_offset metric_count x struct hbp_metric_entry
 *       offset data_offset (4096)  records of HBP_RANK_RECORD_SIZE (48) bytes:
 *                                  struct hbp_segment_record, hbp_bin_record,
 *                                  hbp_inject_record (kind at byte 44)
 *
 *     A record is published by storing its last 4 bytes (kind + flags) last,
 *     with release ordering: a slot whose kind is 0 was not (completely)
 *     written and ends the stream. A file without HBP_FLAG_COMPLETE was left
 *     by a rank that did not reach MPI_Finalize; it may end in zero slots
 *     (preallocated space) or in a partial slot (a reader ignores a trailing
 *     piece shorter than a record).
 *
 *   run file       hbprof-<host>-<pid of rank 0>.hbp   HBP_FLAG_RUN_FILE
 *     written by rank 0 inside MPI_Finalize, appears complete (written under
 *     a temporary name, then renamed):
 *
 *       offset 0                   struct hbp_file_header
 *       offset metric_table_offset metric_count x struct hbp_metric_entry
 *       offset rank_table_offset   nranks x struct hbp_rank_entry
 *       offset bin_table_offset    metric_count x max_bins x struct hbp_bin
 *                                  (metric-major: bin b of metric m is entry
 *                                  m * max_bins + b)
 *       offset data_offset         segment_count x struct hbp_run_record,
 *                                  grouped by rank (rank table: first_record,
 *                                  segment_count), each rank's in segment order
 *
 * Bins (seed 004, SPEC 6). Every metric of a segment is stored as the index
 * of a bin, never as the raw value; the duration is exact. A per-rank table
 * holds at most HBP_RANK_BINS bins per metric: a value equal to a bin's value
 * joins that bin; otherwise it takes a free slot; when none is free, the two
 * nearest of the 257 candidates (the 256 bins and the new value) merge, where
 * nearest means the smallest relative distance |a-b| / min(|a|,|b|) (0 when
 * a == b, infinite when exactly one is 0) between neighbours in value order,
 * ties to the pair with the smaller values; the merged bin's value is the
 * count-weighted mean, its count the sum. Each change of a slot is logged
 * as a BIN_SET or BIN_MERGE record before the segment record that caused it.
 * A segment record's index means the bin that slot holds after every later
 * merge ("final bin"): see docs/profile-format.md for the replay (a backward
 * pass with a 256-entry map per metric). At MPI_Finalize the per-rank final
 * bins merge by the same rule into at most HBP_RUN_BINS program-wide bins
 * (sorted by value); run records hold their uint16 indices.
 *
 * All integers are fixed-width in the writer's byte order; `endian` holds
 * HBP_ENDIAN_MARK as written. Floating-point fields are IEEE 754 binary64 in
 * the same byte order. Readers must skip record kinds they do not know.
 */
#ifndef HBPROF_FORMAT_H
#define HBPROF_FORMAT_H

#include <stdint.h>

#define HBP_MAGIC             "HBPROF\0"  /* 8 bytes: "HBPROF" and two NULs */
#define HBP_VERSION           2u          /* 2: how each rank ended (end_how, end_detail) */
#define HBP_ENDIAN_MARK       0x01020304u
#define HBP_HEADER_SIZE       256u
#define HBP_RANK_DATA_OFFSET  4096u       /* data_offset of a per-rank file */
#define HBP_RANK_RECORD_SIZE  48u         /* every per-rank record */
#define HBP_RUN_RECORD_SIZE   64u         /* every run-file record */
#define HBP_METRIC_ENTRY_SIZE 40u
#define HBP_RANK_ENTRY_SIZE   128u
#define HBP_BIN_ENTRY_SIZE    16u
#define HBP_MAX_METRICS       22u         /* capacity of the bin[] arrays */
#define HBP_METRIC_COUNT      20u         /* metrics this version writes */
#define HBP_RANK_BINS         256u        /* bins per metric in a per-rank file */
#define HBP_RUN_BINS          512u        /* program-wide bins per metric */
#define HBP_NO_SLOT           65535u      /* from_slot of a BIN_SET */
#define HBP_NAME_SIZE         32u         /* metric name, NUL-padded */
#define HBP_HOST_SIZE         64u         /* host name, NUL-padded, truncated */

/* header flags */
#define HBP_FLAG_RANK_FILE    0x1u   /* per-rank stream */
#define HBP_FLAG_RUN_FILE     0x2u   /* program-wide profile */
#define HBP_FLAG_COMPLETE     0x4u   /* finished at MPI_Finalize: counts and
                                        lengths in the header are exact (set last) */
#define HBP_FLAG_INJECT       0x8u   /* the interference injector was active */
#define HBP_FLAG_PRELOAD      0x10u  /* the profiler was loaded with LD_PRELOAD */
#define HBP_FLAG_PARTIAL      0x20u  /* run file: some rank's records are missing
                                        (see hbp_rank_entry.flags) */
#define HBP_FLAG_ORPHANED     0x40u  /* version 2: the rank's parent process (the
                                        launcher's daemon, or mpirun) died before the
                                        rank ended (run file: before some rank did) */

/* end_how (version 2): how a rank ended, in its file's header and its rank
 * entry; end_detail says more. Stored when it happens, so a rank that dies
 * leaves it in its per-rank file (not for SIGKILL, which no one sees). */
#define HBP_END_UNKNOWN       0u  /* still running, or ended unseen (SIGKILL,
                                     _exit); version 1 files */
#define HBP_END_FINALIZED     1u  /* reached MPI_Finalize (replaces a signal whose
                                     handler let the rank go on) */
#define HBP_END_ABORT         2u  /* called MPI_Abort; detail: its error code */
#define HBP_END_SIGNAL        3u  /* a fatal signal; detail: its number */
#define HBP_END_EXIT          4u  /* exit() without MPI_Finalize; detail: status */
#define HBP_END_EXIT_NOW      5u  /* _exit() or _Exit() without MPI_Finalize (Open
                                     MPI's ranks when they lose mpirun); detail: its
                                     argument */

/* comp_source: what the computation metric counts */
#define HBP_COMP_NONE          0u  /* nothing measured (profiling off on that rank) */
#define HBP_COMP_INSTRUCTIONS  1u  /* user-space instructions retired by the main
                                      thread outside MPI and I/O (perf_event_open) */
#define HBP_COMP_CPUTIME       2u  /* CPU time in ns of the main thread outside MPI
                                      and I/O (CLOCK_THREAD_CPUTIME_ID) */

/* clock_id: the clock of start_mono_ns, durations and end_ns */
#define HBP_CLOCK_MONOTONIC    1u  /* clock_gettime(CLOCK_MONOTONIC) */

/* units of hbp_metric_entry.unit */
#define HBP_UNIT_COUNT         0u  /* number of calls */
#define HBP_UNIT_BYTES         1u
#define HBP_UNIT_INSTRUCTIONS  2u
#define HBP_UNIT_NS            3u

/* metrics: index into bin[] of a record and into the metric table, one per
 * line of hbprof_counters.def (HBP_M_COMPUTATION = 0, HBP_M_P2P_BLOCKING = 1,
 * ...); the metric table of every file repeats their names and units. */
enum hbp_metric {
#define HBP_COUNTER(id, name, description) id,
#include "hbprof_counters.def"
#undef HBP_COUNTER
    HBP_METRIC_END
};
_Static_assert(HBP_METRIC_END == HBP_METRIC_COUNT, "hbprof_counters.def and HBP_METRIC_COUNT");

/* the name of metric m in the metric table (NULL if there is none) */
static inline const char *hbp_metric_name(unsigned m)
{
    switch (m) {
#define HBP_COUNTER(id, name, description) case id: return name;
#include "hbprof_counters.def"
#undef HBP_COUNTER
    }
    return 0;
}

/* the unit of metric m in the metric table (HBP_UNIT_NS for the computation
 * in a file whose comp_source is HBP_COMP_CPUTIME) */
static inline uint32_t hbp_metric_unit(unsigned m)
{
    switch (m) {
    case HBP_M_COMPUTATION:
        return HBP_UNIT_INSTRUCTIONS;
    case HBP_M_BYTES_SENT: case HBP_M_BYTES_RECEIVED:
    case HBP_M_POSIX_READ_BYTES: case HBP_M_POSIX_WRITE_BYTES:
    case HBP_M_MPIIO_READ_BYTES: case HBP_M_MPIIO_WRITE_BYTES:
        return HBP_UNIT_BYTES;
    }
    return HBP_UNIT_COUNT;
}

/* collective codes: boundary_mask bit (1 << code); the boundary of a segment */
#define HBP_COLL_NONE                  0u
#define HBP_COLL_ALLTOALL              1u
#define HBP_COLL_ALLTOALLV             2u
#define HBP_COLL_ALLTOALLW             3u
#define HBP_COLL_ALLREDUCE             4u
#define HBP_COLL_ALLGATHER             5u
#define HBP_COLL_ALLGATHERV            6u
#define HBP_COLL_BARRIER               7u
#define HBP_COLL_REDUCE_SCATTER        8u
#define HBP_COLL_REDUCE_SCATTER_BLOCK  9u
#define HBP_COLL_FINALIZE             15u   /* the last segment, ended by MPI_Finalize */
#define HBP_BOUNDARY_DEFAULT       0x3FEu   /* codes 1..9 */

/* X(code, name) of the collectives that can end a segment (HBPROF_BOUNDARIES) */
#define HBP_COLL_LIST(X)                                                       \
    X(HBP_COLL_ALLTOALL, "Alltoall")                                           \
    X(HBP_COLL_ALLTOALLV, "Alltoallv")                                         \
    X(HBP_COLL_ALLTOALLW, "Alltoallw")                                         \
    X(HBP_COLL_ALLREDUCE, "Allreduce")                                         \
    X(HBP_COLL_ALLGATHER, "Allgather")                                         \
    X(HBP_COLL_ALLGATHERV, "Allgatherv")                                       \
    X(HBP_COLL_BARRIER, "Barrier")                                             \
    X(HBP_COLL_REDUCE_SCATTER, "Reduce_scatter")                               \
    X(HBP_COLL_REDUCE_SCATTER_BLOCK, "Reduce_scatter_block")

/* injector call families (inject_families bits, HBPROF_INJECT_CALLS) */
#define HBP_INJ_MPI    0x1u
#define HBP_INJ_POSIX  0x2u
#define HBP_INJ_MPIIO  0x4u

/* per-rank record kinds (byte 44); 0 = no record here, end of stream */
#define HBP_REC_SEGMENT    1u  /* struct hbp_segment_record; flags = HBP_COLL_* that ended it */
#define HBP_REC_BIN_SET    2u  /* struct hbp_bin_record; flags = HBP_BIN_NEW or HBP_BIN_ABSORB */
#define HBP_REC_BIN_MERGE  3u  /* struct hbp_bin_record: from_slot merged into slot
                                  (which now holds value/count); from_slot is free
                                  until a later BIN_SET NEW fills it */
#define HBP_REC_INJECT     4u  /* struct hbp_inject_record (injector active and at
                                  least one delayed call in the segment; written
                                  just before that segment's SEGMENT record) */

/* flags of HBP_REC_BIN_SET */
#define HBP_BIN_NEW        1u  /* a new bin in a free slot: value, count 1 */
#define HBP_BIN_ABSORB     2u  /* the new value joined the bin in slot: value is
                                  the new weighted mean, count the new count */

/* hbp_rank_entry.flags */
#define HBP_RANK_OK         0x1u  /* profiled from MPI_Init to MPI_Finalize */
#define HBP_RANK_FAILED     0x2u  /* the profiler failed on this rank: no records */
#define HBP_RANK_INCOMPLETE 0x4u  /* fewer records arrived than the rank declared:
                                     the missing ones are all-zero (flags 0) */
#define HBP_RANK_INJECT     0x8u  /* the injector was active on this rank */
#define HBP_RANK_ORPHANED   0x10u /* version 2: its parent died before it ended */

/* hbp_run_record.flags */
#define HBP_RUNREC_VALID    0x1u  /* 0 in a slot no record arrived for */

struct hbp_file_header {          /* 256 bytes, offset 0 of both kinds of file */
    char     magic[8];            /*   0: "HBPROF\0\0" */
    uint32_t version;             /*   8: HBP_VERSION */
    uint32_t endian;              /*  12: HBP_ENDIAN_MARK in writer byte order */
    uint32_t header_size;         /*  16: HBP_HEADER_SIZE */
    uint32_t flags;               /*  20: HBP_FLAG_* */
    int32_t  rank;                /*  24: MPI rank (per-rank file), -1 (run file) */
    uint32_t nranks;              /*  28: size of MPI_COMM_WORLD */
    uint32_t comp_source;         /*  32: HBP_COMP_* */
    uint32_t metric_count;        /*  36: metrics per record, <= HBP_MAX_METRICS */
    uint32_t max_bins;            /*  40: HBP_RANK_BINS or HBP_RUN_BINS */
    uint32_t index_size;          /*  44: bytes per bin index: 1 (rank), 2 (run) */
    uint32_t record_size;         /*  48: HBP_RANK_RECORD_SIZE or HBP_RUN_RECORD_SIZE */
    uint32_t boundary_mask;       /*  52: bit (1 << HBP_COLL_x) set if x ends segments */
    uint32_t clock_id;            /*  56: HBP_CLOCK_* */
    uint32_t pid;                 /*  60: writer's pid (run file: rank 0's) */
    uint64_t start_mono_ns;       /*  64: clock at the end of MPI_Init (segment 0 starts) */
    int64_t  start_real_ns;       /*  72: CLOCK_REALTIME at the same moment */
    uint64_t run_ns;              /*  80: rank: MPI_Init..MPI_Finalize of this rank, 0
                                          until complete; run: max over ranks */
    uint64_t segment_count;       /*  88: segment records (rank: advisory until complete) */
    uint64_t metric_table_offset; /*  96 */
    uint32_t metric_entry_size;   /* 104: HBP_METRIC_ENTRY_SIZE */
    uint32_t rank_entry_size;     /* 108: HBP_RANK_ENTRY_SIZE (run), 0 (rank) */
    uint64_t rank_table_offset;   /* 112: run file; 0 in a per-rank file */
    uint64_t bin_table_offset;    /* 120: run file; 0 in a per-rank file */
    uint32_t bin_entry_size;      /* 128: HBP_BIN_ENTRY_SIZE (run), 0 (rank) */
    uint32_t inject_families;     /* 132: HBP_INJ_* bits, 0 when not injecting */
    uint64_t data_offset;         /* 136: first record */
    uint64_t data_length;         /* 144: bytes of records (rank: advisory until complete) */
    uint64_t inject_mean_ns;      /* 152: injector: mean delay */
    uint64_t inject_sd_ns;        /* 160: injector: standard deviation */
    double   inject_prob;         /* 168: injector: probability per call */
    uint64_t inject_seed;         /* 176: injector: HBPROF_INJECT_SEED */
    uint32_t end_how;             /* 184: HBP_END_* (version 2; 0 in version 1) */
    int32_t  end_detail;          /* 188: error code, signal or exit status */
    char     host[64];            /* 192: host name, NUL-padded */
};

struct hbp_metric_entry {         /* 40 bytes */
    char     name[32];            /*   0: e.g. "bytes_sent", NUL-padded */
    uint32_t unit;                /*  32: HBP_UNIT_* */
    uint32_t bins_used;           /*  36: run file: bins in use (entries 0..n-1 of
                                          this metric in the bin table); rank file: 0 */
};

struct hbp_rank_entry {           /* 128 bytes, run file only */
    int32_t  rank;                /*   0 */
    uint32_t flags;               /*   4: HBP_RANK_* */
    uint64_t run_ns;              /*   8: MPI_Init..MPI_Finalize of this rank */
    uint64_t segment_count;       /*  16: records of this rank in the data section */
    uint64_t first_record;        /*  24: index of its first record there */
    int64_t  start_real_ns;       /*  32: CLOCK_REALTIME at its segment 0 start */
    uint64_t start_mono_ns;       /*  40: CLOCK_MONOTONIC at its segment 0 start */
    uint32_t pid;                 /*  48 */
    uint32_t comp_source;         /*  52: HBP_COMP_* on this rank */
    uint32_t end_how;             /*  56: HBP_END_* (version 2; 0 in version 1) */
    int32_t  end_detail;          /*  60 */
    char     host[64];            /*  64: NUL-padded */
};

struct hbp_bin {                  /* 16 bytes, run file bin table */
    double   value;               /*   0: bin value (count-weighted mean) */
    uint64_t count;               /*   8: segment records (rank, segment) in the bin;
                                          0 = unused entry */
};

struct hbp_segment_record {       /* 48 bytes, kind HBP_REC_SEGMENT */
    uint64_t duration_ns;         /*   0: exact wall time of the segment */
    uint64_t end_ns;              /*   8: its end, ns after start_mono_ns */
    uint32_t segment;             /*  16: segment number, from 0 */
    uint8_t  bin[22];             /*  20: slot per metric (metric_count used, rest 0) */
    uint16_t reserved;            /*  42 */
    uint16_t kind;                /*  44: HBP_REC_SEGMENT */
    uint16_t flags;               /*  46: HBP_COLL_* that ended the segment */
};

struct hbp_bin_record {           /* 48 bytes, kinds HBP_REC_BIN_SET, HBP_REC_BIN_MERGE */
    double   value;               /*   0: value of `slot` after the change */
    uint64_t count;               /*   8: count of `slot` after the change */
    uint32_t segment;             /*  16: segment whose value caused the change */
    uint16_t metric;              /*  20: HBP_M_* */
    uint16_t slot;                /*  22: 0..255 */
    uint16_t from_slot;           /*  24: BIN_MERGE: the slot merged into `slot`;
                                          BIN_SET: HBP_NO_SLOT */
    uint16_t reserved0;           /*  26 */
    uint8_t  reserved[16];        /*  28 */
    uint16_t kind;                /*  44 */
    uint16_t flags;               /*  46: BIN_SET: HBP_BIN_*; BIN_MERGE: 0 */
};

struct hbp_inject_record {        /* 48 bytes, kind HBP_REC_INJECT */
    uint64_t injected_ns;         /*   0: wall time spent in injected sleeps */
    uint32_t segment;             /*   8 */
    uint32_t delayed_calls;       /*  12: calls that were delayed */
    uint8_t  reserved[28];        /*  16 */
    uint16_t kind;                /*  44: HBP_REC_INJECT */
    uint16_t flags;               /*  46: 0 */
};

struct hbp_run_record {           /* 64 bytes, run file data section */
    uint64_t duration_ns;         /*   0: exact */
    uint32_t segment;             /*   8 */
    int32_t  rank;                /*  12 */
    uint16_t bin[22];             /*  16: program-wide bin per metric (metric_count used) */
    uint16_t boundary;            /*  60: HBP_COLL_* that ended the segment */
    uint16_t flags;               /*  62: HBP_RUNREC_VALID */
};

#endif /* HBPROF_FORMAT_H */
