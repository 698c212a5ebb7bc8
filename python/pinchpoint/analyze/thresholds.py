"""Every number the verdict decides by, in one table: what it marks, and where it came from.

"Hand" means chosen by reasoning and kept because the diagnosis matrix (bench/
diagnosis_matrix.py) judged it right on seeds drawn after it was set; a seed named is the
run that showed the need. Change one only with a matrix run on a held-out seed beside it.
"""

from __future__ import annotations

# --- Growth: when latency counts as grown ----------------------------------------------------
# Latency grows when it rises by more than this share of its lightest step's value...
GROWTH_SHARE = 0.25  # hand: a quarter is past the noise of a 2 s step on a shared host
# ...and by more than this, so sub-millisecond jitter on fast endpoints is not a finding.
GROWTH_MIN_MS = 1.0  # hand: below the scheduling jitter of a busy 2-core host
# A closed loop whose users grew this many times while its throughput per user fell to this
# share has saturated, however fast its requests (Little's law, not jitter).
SCALING_LOAD = 2.0  # hand: static pages under a millisecond (the generator class)
SCALING_SHARE = 0.5
# A closed-loop step whose users each get less than this share of the lightest step's
# throughput wait somewhere: a full pool whose every user has a slot already limits.
PER_USER_SLOWED = 0.85  # hand: a demo pool of 2 at 2 users served each user 0.70 of one user's
# Tiers whose own time grew by this share of the latency's growth are findings too.
OTHER_TIER_SHARE = 0.1  # hand
# A tier named for its time alone must explain at least this share of the growth.
EXPLAINS = 0.25  # hand: no verdict names a tier that grew 0-3% of the latency's growth
# How much a finding with no saturated resource behind it counts, against 1 for one with.
WEAK_EVIDENCE = 0.3  # hand: ranks "time" findings below any resource
# A neighbour's finding follows the others with this confidence.
NEIGHBOUR_CONFIDENCE = 0.5  # hand

# --- The knee: where latency bends, measured against a closed loop where every added user
# only queues (latency ÷ load: latency grows in proportion to the users) --------------------
# A fitted knee (analyze/knee.py): past it, latency's slope rises by at least this share of
# latency ÷ load at the knee. A fit over every step, its bend tested for significance.
KNEE_LATENCY_BEND = 0.25  # hand
# The knee search (analyze/knee_search.py), from one probed level to the next: latency's relative
# growth over the users' (1 when the added users only queue). Twice the fitted bend's share:
# one pair of levels, no significance test, and the slope before any knee counted in it.
LEVEL_LATENCY_BEND = 0.5  # hand

# --- Worker pools (USE: utilisation = Little's-law concurrency ÷ slots) ----------------------
# A pool is full when its concurrency reaches this share of its slots...
POOL_FULL = 0.8  # hand: Little's law over logged times reads a full pool at 0.85-0.98
# ...or this share while the queue before it, not its own time, grows: the logged time
# leaves out what a worker does between requests (a dispatching thread waiting for a core,
# connections spread unevenly over its processes).
POOL_QUEUED = 0.6  # seed 59: gthread pools of few processes read 0.62-0.75 when full
# The queue's growth must be this many times the tier's own time's growth, and a millisecond.
QUEUE_OVER_SERVICE = 2.0  # hand: queueing, not slower work
QUEUE_GROWTH_MS = 1.0
# A pool's size inferred: concurrency flat within this ratio over the heaviest steps...
POOL_FLAT_RATIO = 1.2  # hand: the spread of a full pool's concurrency between 2 s steps
# ...while the load grew at least this many times over them.
POOL_LOAD_GROWTH = 1.3  # recorded gthread-pool-hog: 9 -> 13 users, the pool full at both
HELD_OVER = 1.5  # hand: requests inside a tier past the level its callee serves at once
HELD_LEAST = 0.5  # hand: one connection held reads 0.85-0.95 at the callee
# A plateau this close below a whole number is that number (a worker's time between
# requests is not logged, so a full pool reads a little low).
POOL_READS_LOW = 0.25  # recorded runs: full pools of 2, 4, 5, 6 read 1.94, 3.98, 4.87, 5.42
# The tier behind a refusing proxy idles below this share of its workers.
IDLE_POOL = 0.8  # hand, as POOL_FULL

# --- CPU ------------------------------------------------------------------------------------
# Busy workers that want this share of a core each (used + waited for) compute.
CPU_BOUND = 0.7  # hand: a sync worker computing all the time wants 0.9-1.0
# Busy workers that use or wait for less than this share of a core each do not compute: a
# neighbour's CPU cannot be what slows them.
CPU_NEED = 0.25  # hand: workers waiting on I/O read 0.03-0.05 per busy worker
# A callee that used this share of the stack's CPU on a full host is what a pool of waiting
# workers above it waits on.
COMPUTES_MOST = 0.5  # hand: a database scanning for its callers used 0.70 of the stack's
# A server that runs its work on one thread (Redis's main thread) at this share of a core is
# saturated at that core.
ONE_CORE_SATURATED = 0.9  # hand: Redis's own latency doctor calls a main thread near 100% busy
# The host has room for another computing worker when this much of a core is idle.
IDLE_CORE = 0.3  # hand
# A host is CPU-saturated above this share of its cores (less what neighbours took)...
CPU_SATURATED = 0.85  # USE method: utilisation past ~85% queues (Gregg)
# ...or when tasks wait for a core (PSI "some") this share of the time, having waited at
# least CPU_PRESSURE_RISE less at the lightest step: the rise is the load's own.
CPU_PRESSURE_SATURATED = 0.4  # hand: PSI on the 2-core hosts of the matrix
CPU_PRESSURE_RISE = 0.2
# A cgroup CPU quota limits when the kernel throttled at least this share of its periods...
THROTTLED = 0.2  # hand: a quota that binds throttles most periods
# ...and this much more than at the lowest load, or while using this share of the quota...
THROTTLED_GROWTH = 0.1
AT_QUOTA = 0.85  # as CPU_SATURATED
# ...or throttled from the lightest step on while using at least this share of it.
HALF_USED = 0.5  # hand: a quota used in bursts is throttled in the few periods it runs

# --- Database locks -------------------------------------------------------------------------
# PostgreSQL backends waiting for a lock, on average, that make lock waits the finding.
LOCK_WAITS = 0.5  # hand: sampled titles at 2 Hz; one hot row keeps 1-8 waiting

# --- Proxies that refuse --------------------------------------------------------------------
# At least this share of requests fail at the highest load...
PROXY_ERRORS = 0.05  # hand
# ...most of them (this share) refusals...
REFUSED_SHARE = 0.8  # hand
# ...failing faster than this share of an answered request's latency.
FAST_ERRORS = 0.5  # hand: a refusal takes microseconds, an answer the service time

# --- Disk, memory, network (host gauges) ----------------------------------------------------
# The device busy this share of the time, or tasks stalled on I/O this share of it...
DISK_UTIL, DISK_UTIL_RISE = 0.8, 0.3  # USE: %util near 100 on one device queues
IO_PRESSURE, IO_PRESSURE_RISE = 0.3, 0.2  # hand
# ...with the tier's processes doing at least this share of the host's disk traffic.
DISK_SHARE = 0.25  # hand
# Some task stalled on memory (reclaim, swap-in) this share of the time.
MEMORY_PRESSURE, MEMORY_PRESSURE_RISE = 0.1, 0.1  # hand: PSI memory "some"
# The busiest link at this share of its speed.
NET_UTIL, NET_UTIL_RISE = 0.85, 0.3  # as CPU_SATURATED, for a shaped link's rate
# The link carries between these multiples of the bytes the client received (a response
# crosses a link once per hop; far more is another's traffic).
LINK_SHARE, LINK_HOPS = 0.5, 4.0  # hand
# A ceiling in bytes: within this ratio past the onset while the users grew this much,
# with responses of at least this many bytes (below, transfer time is no limit worth naming).
FLAT_SPREAD = 1.1  # hand
FLAT_LOAD_GROWTH = 1.5  # hand
LARGE_RESPONSE = 16 * 1024  # hand: a 16 KiB response takes 13 ms on a 10 Mbit/s link

# --- The generator and the neighbours -------------------------------------------------------
# The generator is saturated when the cores its threads wanted (used, or waited for) reach
# this share of the threads it runs on...
GENERATOR_SATURATED = 0.9  # hand
# ...or its host is (CPU_SATURATED of the cores busy), this share of them the generator's...
GENERATOR_SHARE = 0.25  # hand
# ...or its threads waited for a core this share of the time they wanted one (and at least
# this many cores' worth): a generator starved of CPU sends late and reads late...
STARVED_SHARE = 0.5  # starved_generator class: 0.6-0.9 when two hogs share its core
STARVED_CORES = 0.1
# ...and that wait, spread over the requests of the step, is this share of their latency...
STARVED_DELAY = 0.2  # hand
# ...or most of the client's latency was spent outside every tier (when a tier logged it).
OUTSIDE_SHARE = 0.5  # hand
MOSTLY_ANSWERED = 0.02
# Processes outside the stack that used this share of the host's cores are a finding.
NEIGHBOUR_SHARE = 0.25  # hand: half a core of a 2-core host

# --- One request among several --------------------------------------------------------------
# A request carrying at least this share of the growth of the mean latency, while every
# other request stays flat, is where the limit lives.
CARRIES = 0.5  # hand: a majority of the growth
# ...and it grew, against its median at the lightest step, at least this many times as
# much as any other request that grew: a queue all requests wait in adds the same
# milliseconds to each (the most to the cheapest, relatively), a busy CPU about the same
# share to each; a limit inside one request grows only that one.
DOMINATES = 3.0  # hand: 7-11x for a serialized checkout beside a hog or the parallel tests
# Peak throughput × shortest time below this is about one served at once: serialized.
ONE_AT_ONCE = 1.5  # hand: a lock held by one request at a time reads 0.95-1.05
# An event loop is judged blocked only once the users outnumber its loops this many times.
LOOP_LOAD = 2  # hand: each user keeps a request in flight in closed loop
# A request's throughput reaches a ceiling when its heaviest step gains on the best step
# before it less than this share of what the load gained since that step (at least
# LOAD_STEP): a closed loop at flat latency gains all of it...
CEILING_SHARE = 0.375  # hand: under 15% gained over a load 1.4 times as heavy (0.15 ÷ 0.4)
LOAD_STEP = 0.2
# ...and flat latency says "no ceiling" only once the load grew this many times over.
LOAD_RANGE = 2.0  # hand

# --- Consistency: what a verdict may not say against its evidence ---------------------------
# The bottleneck named for its time carries at least this share (%) of the growth...
BOTTLENECK_SHARE = 25  # = EXPLAINS, in percent as the evidence prints it
# ...and any further finding named for its time this much.
FINDING_SHARE = 10  # = OTHER_TIER_SHARE

# --- Predictions -----------------------------------------------------------------------------
# The CPU's ceiling this close to the load's leaves the load (the users' own cycle) as what
# bounds a change.
LOAD_BOUND = 0.9  # hand
