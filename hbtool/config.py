"""Tunables with their documented defaults (docs/methods.md).

Every threshold, window and cap lives here rather than as a literal in an
analyzer or reader.
"""

#: heart-rate window in beats (SPEC 1): hr_i = w / (t_i - t_{i-w})
HEART_RATE_WINDOW = 10

#: readers: largest metadata block accepted from a binary trace (bytes)
MAX_METADATA_BYTES = 1 << 20
#: readers: largest chunk size accepted from a binary trace header (bytes)
MAX_CHUNK_BYTES = 64 << 20
#: readers: largest legacy text line considered (characters); longer is malformed
MAX_LEGACY_LINE = 4096
#: readers: most bytes copied from standard input ('-'), which is spooled to a temporary file
MAX_STDIN_BYTES = 4 << 30
#: readers: a binary trace's record time stamp further than this from the tracer's start is
#: corrupted, and the record is skipped with a warning (100 years, in ns; pandas' clocks end
#: at 292 years)
MAX_TRACE_SPAN_NS = 100 * 365 * 86400 * 10**9
#: readers: bytes of a binary trace read at a time by the bounded-memory reader (info,
#: diagnose): its memory does not grow with the trace
HBT_READ_WINDOW_BYTES = 32 << 20
#: convert: beats of one thread of a binary trace written at a time (a thread beating 100 M
#: times is written in pieces: memory follows this, not the thread)
STREAM_PIECE_ROWS = 1 << 18
#: readers: a parquet table of beats of this many rows or more, laid out as `convert` writes
#: one, is read in bounded memory by info, diagnose and the other analyses (hbtool.io.
#: parquet_stream); a smaller one, or one laid out otherwise, is read whole
TABLE_STREAM_ROWS = 1 << 20
#: ... when its row groups hold at most this many rows (a row group is read at a time)
TABLE_STREAM_GROUP_ROWS = 1 << 22
#: readers: most rows accepted from the waits table beside a parquet table of beats
MAX_WAIT_ROWS = 200_000_000
#: diagnose: bytes of beat times and heart rates of a streamed trace's threads kept in
#: memory at once (threads read from the file again when needed; at least two are kept)
SERIES_CACHE_BYTES = 256 << 20
#: a streamed trace's thread of more beats than this is never held whole: diagnose, features
#: and train gather its features from its beat times read in pieces (two passes over it),
#: behavior makes its timeline a segment at a time
WHOLE_THREAD_BEATS = 1 << 22
#: readers: warnings of one kind printed before they are summarised
MAX_WARNINGS_SHOWN = 10

#: plot: largest number of points drawn per thread (longer curves are decimated)
PLOT_MAX_POINTS = 4000

#: numba: the options of every @njit kernel (hbtool.analyzers.kernels), set here only.
#: cache=True keeps compiled kernels on disk (__pycache__, or NUMBA_CACHE_DIR) so a
#: second run pays no compile; nogil lets threads share the kernels; no fastmath, so
#: NaNs and infinities keep their IEEE meaning and gaps stay visible.
NUMBA_OPTIONS = dict(cache=True, nogil=True, fastmath=False, error_model="numpy")

#: DTW (SPEC 3): sequences longer than this many points are mean-pooled down to it
DTW_MAX_POINTS = 512

# ---- HSA features and classification (SPEC 2-4; docs/methods.md) ----
#: LTR window (beats) and LHR grid: points over the overlap, window in grid points
LTR_WINDOW = 10
LHR_POINTS = 200
LHR_WINDOW = 10
#: LTRmax (hbtool's addition): windows of equal beats whose largest time ratio it takes
PEAK_WINDOWS = 10
#: polynomial alignment: target R^2 and the highest degree tried
POLY_R2_TARGET = 0.9
POLY_MAX_DEGREE = 12
#: Sakoe-Chiba half-width of the DTW feature (points), None: no band
DTW_BAND = None
#: LB_Keogh envelope half-width (points of the pooled sequences)
LB_RADIUS = 10
#: confidence levels `train` chooses from, and the level used with normal data only
#: a range is the central `level` share of the normal training values, each end moved
#: away from the median by `margin` times its distance to it; `train` chooses both
HSA_LEVELS = (0.9, 0.95, 1.0)
HSA_MARGINS = (0.5, 1.0, 1.5, 2.0)
HSA_DEFAULT_LEVEL = 0.95
HSA_DEFAULT_MARGIN = 1.0
#: folds of the cross-validation that chooses the level
HSA_CV_FOLDS = 5
HSA_CV_REPEATS = 3
#: floor of a range's half-width on the fitting (log) scale: identical training values
HSA_MIN_SPREAD = 0.01
#: ranges used when `diagnose` has no model (lower, upper; None: unbounded)
HSA_DEFAULT_RANGES = {
    # from the normal threads of a data set of benchmarks/make_dataset.py (seed 2026, all three
    # benchmarks pooled), central 99 % widened by a quarter on a linear scale, rounded; they
    # did better on a second data set (seed 7) than the same fit on the log scale
    # (docs/methods.md; the README gives their accuracy on a third, seed 11)
    "GTR": (0.68, 1.28),
    "LTR": (0.8, 1.86),
    "GHR": (0.63, 1.66),
    "LHR": (0.58, 2.22),
    "DTW": (None, 342.0),
    "LB": (None, 438.0),
    "LTRmax": (None, 3.2),
    "progress": (0.95, None),
    # hbtool's work ratio (docs/methods.md): three times its reference's own work in the
    # parallel regions, a round bound, not fitted
    "WR": (None, 3.0),
}

# ---- the memory signal in diagnose (docs/methods.md "Memory"; hbtool's, not the seed's) ----
#: a thread leaks when, between its first and last memory record, it retained (allocated
#: and did not free) at least all of: this many bytes, ...
LEAK_MIN_BYTES = 4 * 2**20
#: ... this share of its process's largest resident size (a leak that matters) ...
LEAK_MIN_SHARE = 0.05
#: ... this many times what its reference retained (the same thread of a reference run or
#: of the model's normal runs, else the median of its team's other threads) ...
LEAK_FACTOR = 2.0
#: ... in at least this many steps (records whose balance rose: one large buffer is one) ...
LEAK_MIN_RISES = 3
#: ... while its process's heap (or resident size) grew by at least this share of it (what
#: another thread frees leaves the allocating thread's balance up, not the process's)
LEAK_PROCESS_SHARE = 0.5

# ---- thread behavior (SPEC 5, seed 001; docs/methods.md "Thread behavior") ----
#: the rate around each beat: the mean interval over at least this many intervals ...
BEHAVIOR_SMOOTH = 9
#: ... and at least this many seconds (a thread that shares a core runs and waits in
#: time slices of a few ms: the window averages them out)
BEHAVIOR_WINDOW_S = 0.05
#: the thread's usual ("running") level: this quantile of the smoothed level
BEHAVIOR_REF_QUANTILE = 0.1
#: busy-waiting: the smoothed interval is at least this many times the usual one ...
BEHAVIOR_SLOW_FACTOR = 2.0
#: ... for at least this many consecutive intervals and this many seconds (threads here
#: slow down 2x for up to ~70 ms with no fault of their own: memory contention, the
#: hypervisor)
BEHAVIOR_MIN_SLOW_BEATS = 4
BEHAVIOR_MIN_BUSY_S = 0.15
#: ... and the rest of the team did not slow down as much at the same time (then it is
#: the machine, not the thread): team slowdown above this share of the thread's
BEHAVIOR_TEAM_SHARE = 0.6
#: conditional waiting: one interval at least this many times the local usual one ...
BEHAVIOR_GAP_FACTOR = 3.0
#: ... and at least this long (seconds). Shorter stalls are the machine's: on this
#: project's VM a thread can stop beating for up to ~100 ms with no fault of its own
#: (while on the CPU, by the online monitor's reading: the hypervisor)
BEHAVIOR_MIN_WAIT_S = 0.15
#: online reports match an offline interval when their onsets differ by at most
#: this many usual intervals (or this share of the interval's length, if larger)
BEHAVIOR_MATCH_BEATS = 5
BEHAVIOR_MATCH_SHARE = 0.25
#: "messages per window": a window is this many beats per monitored thread (seed 001)
BEHAVIOR_WINDOW_BEATS = 100
#: a gap in a thread's beats that recorded waits (a barrier...) cover at least this share of is
#: waiting for its team (idle), not conditional waiting of its own
BEHAVIOR_EXPLAINED_SHARE = 0.5
#: a gap in which a thread used at least this share of a CPU (the tracer's `cpu` records) was
#: spent spinning or working, not blocked (a blocked thread uses next to none; one that spins
#: on a loaded machine gets only its share of the cores): busy-waiting when its team waited
#: for it meanwhile
BEHAVIOR_SPIN_SHARE = 0.1
#: a gap in which a thread used less than this share of a CPU was spent blocked
#: (conditional-waiting), whatever its team did; from this share to BEHAVIOR_SPIN_SHARE it was
#: on a CPU now and then: a teammate silent too (in no recorded wait) with less than half its
#: share was blocked and this one waited for it, as it did when a teammate beat on (idle);
#: else the machine starved the team (running)
BEHAVIOR_BLOCKED_SHARE = 0.02
#: a gap through which a thread used a CPU while its teammates beat on, none waiting for it, is
#: busy-waiting when it took the gap factor times the CPU time of the longest units of its
#: construct (their 99th percentile), from at least this many units with their CPU time
BEHAVIOR_OUTLIER_UNITS = 50
#: ... or when its work took this many times the longest unit of its construct that ended
#: before it (its own or a teammate's, halved for each BEHAVIOR_OVERDUE_HALF_S since it ended),
#: from at least BEHAVIOR_OVERDUE_WARM units: the online monitor's overdue chunk
#: (HBT_UNIT_OVER in native_tracer/src/monitor.h, HBT_UNIT_HALF_MS and HBT_UNIT_WARM in autobeat.h),
#: judged after the fact
BEHAVIOR_OVERDUE = 8.0
BEHAVIOR_OVERDUE_HALF_S = 1.0
BEHAVIOR_OVERDUE_WARM = 32
#: ... from at least this many of a task construct's, never halved (HBT_TASK_WARM in
#: native_tracer/src/autobeat.h: the monitor's bar for a task in progress)
BEHAVIOR_OVERDUE_TASK_WARM = 8

# ---- interference (SPEC 6, seed 004; docs/methods.md "Interference") ----
#: relative distance at which the computation clustering starts a new cluster
INTERFERENCE_REL_DISTANCE = 0.1
#: groups with fewer segments are not judged
INTERFERENCE_MIN_GROUP = 5
#: a segment is interfered above median + this many MADs of its group
INTERFERENCE_MADS = 4.0
#: classes: low below, high above (percent of the run's time)
INTERFERENCE_LOW = 7.5
INTERFERENCE_HIGH = 15.0
#: logistic probability of a highly interfered run: midpoint and steepness
INTERFERENCE_MIDPOINT = 11.25
INTERFERENCE_STEEPNESS = 0.35
#: warn when segments come this often (per second): too short to judge (seed 004: ~300 Hz)
INTERFERENCE_MAX_RATE_HZ = 200.0
#: beyond the seed: a group's best segments are this low quantile of its time per unit of work
INTERFERENCE_BEST_QUANTILE = 0.1
#: beyond the seed: a segment loses time only beyond this share above its expected time
#: (its work at the best or the reference's time per unit of work)
INTERFERENCE_TOLERANCE = 0.05
#: beyond the seed: a group is judged by its work only when its best segments do work at this
#: share at least of the run's fastest rate of work (else communication, not work, sets its time)
INTERFERENCE_MIN_WORK_SHARE = 0.5
#: readers: most rows accepted from a segment table or profile (processes x segments)
MAX_PROFILE_ROWS = 200_000_000

# ---- service rate (SPEC 7, seed 002; docs/methods.md "Service rate") ----
#: non-blocked samples in the sliding window the quantile is taken over
SERVICE_WINDOW = 32
#: the discrete Gaussian filter over the window: radius (no padding) and sigma
SERVICE_FILTER_RADIUS = 2
SERVICE_FILTER_SIGMA = 1.0
#: the quantile of the filtered window: mean + z * sd
SERVICE_Z = 1.0
#: convergence: the Gaussian(radius 1)+Laplacian filtered running sd must stay within
#: tolerance * q-bar over this many values
SERVICE_CONV_WINDOW = 16
SERVICE_TOLERANCE = 1e-3
#: fewest quantile values averaged before an estimate can converge
SERVICE_MIN_VALUES = 32
#: converged estimates further than this (relative) from the current phase's rate start a new phase
SERVICE_PHASE_CHANGE = 0.125
#: this many phases or more, resting on fewer converged estimates each than SERVICE_ESTIMATES_PER_PHASE
#: on average, are called noise, not changes of rate
SERVICE_NOISY_PHASES = 3
SERVICE_ESTIMATES_PER_PHASE = 2.5
#: readers: most rows accepted from a sample table
MAX_QUEUE_SAMPLE_ROWS = 50_000_000

# ---- the work shift in diagnose (docs/methods.md "Work shift"; hbtool's, not the seed's) ----
#: a thread's beats are cut into this many windows (fewer when it has fewer beats) ...
SHIFT_WINDOWS = 20
#: ... of at least this many beats each (no shift under six windows): a window's median of
#: units of work rests on at least 4 of them (NPB IS, 24 beats a thread: ten iterations of two
#: constructs whose work the machine splits 2:1 between two threads one way or the other,
#: iteration by iteration; 7 windows of 3 beats read as a shift of 2.3-5.1 in 4 of 12 normal
#: class A runs with gcc) ...
SHIFT_MIN_BEATS = 4
#: ... and it slowed down in its own work when, from some window on, its work against its
#: team's is more than this many times what it was before (a round bound, not fitted: twice
#: as long over the same units of work as its own earlier self, beside the same teammates)
SHIFT_MAX = 2.0
#: diagnose: the iteration ratio (summary._iteration_ratio) of a thread with fewer loop
#: chunks of known iterations than this, in the loops compared, is not known (one chunk the
#: machine stretched is not a slow-down)
ITERATION_RATIO_MIN_CHUNKS = 4
#: ... and a loop counts in it where its chunks' first iterations spread over this many
#: iterations per thread of the team at least (a loop of 2 iterations hands each of 2
#: threads the same one every time: GROMACS's, whose second iteration costs 3x its first)
ITERATION_RATIO_MIN_SPAN = 8
#: ... and of a thread's chunks, those that went on from its chunk before count, and its first
#: chunk after a wait (a loop's start, a barrier) only where it took this long at least: such
#: a chunk also holds the thread's waking and the runtime's hand-over, tens of microseconds
#: (a dynamic loop of 60 us chunks: its worker's first chunks took 88 us, its later 61 us)
ITERATION_RATIO_FIRST_CHUNK_NS = 1_000_000
#: ... and a loop's chunks in a window of time are compared with its teammates' there where
#: both hold this many iterations at least: a median of fewer is one of iterations, not of a
#: pace (cd-hit's loop has iterations of 70 ms among its iterations of 10 us: in windows where a
#: thread ran little else, its median was one such iteration)
ITERATION_RATIO_MIN_ITERATIONS = 16
#: UR, a thread's units of work against the same constructs' in the model's normal runs (or a
#: reference run; diagnosis.unit_ratio): a construct counts where the thread had this many
#: units of it at least (a median of fewer says little: a task construct's units range over
#: orders of magnitude, kalign's from a leaf's merge to the root's). A thread whose UR is more
#: than SHIFT_MAX, and more than SHIFT_MAX times its teammates' (a machine that ran the whole
#: team slower than the model's runs moves them all), slowed down in its own work: its units
#: took longer than the same units do, whenever it ran them -- for teams whose threads share
#: too few windows of any construct for the work shift (kalign's recursive tasks)
UNIT_RATIO_MIN_UNITS = 16
#: ... where the change from some window on is not a step but an excursion that ends (windows
#: [a, b) at one level, those before a and from b on at another; summary.shift_segment): the
#: excursion is taken against the windows around it when it leaves this share or less of the
#: absolute deviation the best step leaves. ImageMagick's leaking thread (1 MiB a unit, slowed
#: 15-80x until the injector's cap, then at work as before): 0.28-0.64, where the step at its
#: recovery read its teammate 5-6x slower (memoryleak); its normal runs' best excursions
#: 0.72-1.22. A bound between those, not fitted to more: a lasting step stays a step ...
SHIFT_EXCURSION_FIT = 0.7
#: ... and the excursion lasts this many windows or more: of an even count the middle value
#: nearer the windows around it counts, so a stall of two windows is no excursion (as the
#: step's two windows at either end are no shift)
SHIFT_EXCURSION_WINDOWS = 4
#: diagnose: a share shift (summary._share_shifts: a thread's units of work per window of its
#: team's time against its teammates', later against earlier) under this is a thread that
#: stopped working while its team went on: shutdown. A round figure, not fitted: cd-hit's
#: stopped threads fell to 0.001-0.002, its slowed, spinning and blocked ones to 0.17 at the
#: least, normal ones 0.43 (docs/methods.md, "SS")
SHARE_SHIFT_MIN = 0.05
#: ... judged in the windows where its teammates (the lower median of them) spent at least
#: this share of the window in units of shared work: its team went on working (heat_omp's
#: master, at 3 threads on 2 CPUs with a leaking teammate, took none of the chunks that a
#: teammate awake took in 3-5 % of its time while the team waited for the leaking one)
SHARE_TEAM_BUSY = 0.25
#: ... and where fewer than six windows of the team's time hold enough shared units for it
#: (a team whose chunks come in bursts: GraphicsMagick, 100 beats a thread, most of its chunks
#: in 4 of 20 windows), windows of the team's units instead: each window of time in this many
#: parts, joined in time order until the team holds SHIFT_MIN_BEATS units a thread
SHARE_FINE_BINS = 16
#: ... and the team's units in a group at least its shared units over this many (a share
#: counted as (its units + 1) over (its teammates' + 1) reads 1/9 where they did 8 units and
#: it none: a group must hold some 10 of them, counted as (units + 0.5) there, before a thread
#: that took none of them can read under SHARE_SHIFT_MIN)
SHARE_GROUPS = 8
#: summary.work_shifts, a team cut into windows of its time: a window in which a thread waited
#: for a CPU (its run-queue delay, the tracer's sched records) longer than the least-waiting
#: thread of its team by more than this share of the window is one the machine, not the
#: thread, decided: its share shift leaves it out (a round figure: heat_omp's crowded-out
#: master 0.19-0.33 over its teammates; threads sharing the CPUs evenly within 0.07 of each
#: other)
SHIFT_CROWDED_SHARE = 0.10
#: ... and its team's work shifts leave out a window crowded for a thread that took fewer than
#: this many units in it (the median of many units holds: the few the machine preempted are its
#: slow tail; heat_omp's crowded master took 14-15 units a window, one a step, and its median
#: doubled; a thread sharing its CPU with another program took hundreds, its median unmoved)
SHIFT_CROWDED_UNITS = 32
#: a team's threads "made as many beats" for summary.work_shifts when the most is at most this
#: many times the fewest (static loops give one thread an iteration more than another)
SHIFT_SAME_BEATS = 1.02
#: summary._own_part: a thread's work shift up is its teammates' doing (their own work fell:
#: a teammate slow from the run's start that recovered) when their own work fell by at least
#: this share of the shift (in log) and by more than its own rose. A round share: GROMACS's
#: recovered teammate fell by all of its 64x; with none of them moving (a thread slowed 3x
#: beside a teammate whose own work stayed within 2 %), the noise of two flat medians decided
SHIFT_OWN_FALL = 0.5
#: in a team of more threads than this, each is compared with the median of the whole team
SHIFT_WHOLE_TEAM = 8
#: a construct whose units of work (median, ns) are shorter than this is noise to
#: summary.work_shifts, not work (a flag's check, an empty single)
SHIFT_UNIT_FLOOR_NS = 1_000
#: summary.work_shifts compares the constructs found in at least this share of the windows
SHIFT_CONSTRUCT_SHARE = 0.5
#: ... or holding at least this share of the team's work, however few windows its beats fill:
#: the run's main work is no set-up (MUSCLE 5: its pairs' alignments, 98 % of the work in a
#: third of the beats, 7 windows of 20; a lighter phase's beats filled the rest)
SHIFT_MAIN_WORK = 0.5
#: ... and that hold at least this share of the team's work (the sum of its units over the
#: run): the few microseconds from a region's last construct to its end, beat at each region,
#: are the runtime's, and would vote as much as the sections or loop that hold the work
SHIFT_CONSTRUCT_WORK = 0.01
#: windows of less work than this (ns) are noise to summary.work_shifts, not work (a run too
#: short to compare its constructs: its windows' whole work is compared)
SHIFT_WINDOW_FLOOR_NS = 10_000
#: summary.work_shifts' unit-work histograms: bins to the octave (medians within 2.2 %)
SHIFT_BINS_PER_OCTAVE = 16
#: summary.work_shifts: a construct's unit in a window is the median of its units weighted
#: by their length (the length that holds its work: NPB MG's constructs run at every level of
#: its V-cycle, units of microseconds to milliseconds), a unit weighing at most the window's
#: unit at this quantile (a rare long one, a stall, does not become the construct's unit)
SHIFT_UNIT_CAP = 0.9
#: summary.work_shifts measures a construct's units in CPU time when the trace has the CPU
#: time of at least this share of them, in every thread of the team (the tracer's cpu
#: records: units of 2 ms or more with no other record inside); else in wall time
SHIFT_CPU_COVER = 0.9
#: a cpu record is a unit's when its gap is the unit's interval within this (the gap is
#: recorded in microseconds)
SHIFT_CPU_SLACK_NS = 2_000
