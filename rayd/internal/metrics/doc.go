// Package metrics measures the sandbox rayd runs in, for HealthService's
// Metrics and MetricsHistory.
//
// # What is measured
//
// rayd is PID 1 of the sandbox's pid namespace, on a microVM as on the
// local platform, so the sandbox is rayd and its descendants. A [Sampler]
// reads /proc/[pid]/stat of every visible process, keeps rayd and its
// descendants (kernel threads, and anything else a rayd outside its own
// pid namespace sees, are left out) and derives:
//
//   - CPU: the sandbox's CPU time is the sum of utime, stime, cutime and
//     cstime over those processes. A process's own time moves into its
//     parent's cutime and cstime when the parent reaps it (and into rayd's
//     for orphans, which rayd reaps), so the sum does not drop when a
//     process ends. CPU % is the growth of that sum over the monotonic time
//     between two readings, divided by the number of CPUs, in 0..100.
//   - CPUs: runtime.NumCPU, the CPUs rayd may run on (its affinity mask,
//     which a cpuset narrows).
//   - Memory: with the sandbox's memory limit known (the platform gave
//     -memory-limit), the total is that limit and the use is the sum of the
//     processes' resident sets, at most the limit (pages shared between
//     processes count once per process); the cache is 0. Without it the
//     kernel is taken to be the sandbox's own (a microVM): the total is
//     MemTotal, the use MemTotal − MemAvailable, as free(1) shows it
//     (kernel memory and tmpfs included), and the cache Cached, all from
//     /proc/meminfo.
//   - Disk: statfs of /home/user (/ where there is none): used and total
//     bytes of that file system.
//   - Processes: the number of processes in the sandbox other than rayd:
//     every process rayd started (commands, terminals, kernels) and all
//     their descendants, those that outlived their parent too (rayd, PID
//     1 or a child subreaper, adopts them: a command's background
//     "sleep 100 &" counts after the command ended). Only when /proc
//     cannot be read is it the processes and PTYs rayd supervises
//     (Options.Processes), a lower bound. Tasks: the same processes with
//     rayd (0 when /proc cannot be read).
//
// # Sampling
//
// Between Start and Stop a goroutine takes a reading every 5 s and keeps
// the samples in a ring of 5760 (8 h). A frozen sandbox takes no readings
// and nothing is filled in afterwards, so a suspension leaves a gap. A
// reading that spans a freeze (more than two intervals of monotonic time
// since the previous one, or a wall clock that moved more than a second
// apart from the monotonic one, as after a microVM's restore) is not used
// as a baseline: the sampler measures a fresh 100 ms window instead, so no
// sample averages CPU over a freeze. Samples are kept in ascending wall
// clock order: one taken after the wall clock went back replaces the
// samples that now lie in its future.
//
// [Sampler.Current] takes a fresh reading: its CPU % is the average since
// the background's latest reading (at most one interval old), over at
// least 100 ms (it waits for the rest when that reading is younger); when
// there is no usable reading (before Start, or across a freeze) it
// measures a 100 ms window.
//
// A reading costs one open, read and close per process (see the
// package's benchmark); concurrent readings are serialised.
//
// The parsers of /proc text are pure functions with fuzz targets: only the
// kernel writes /proc, but rayd's rule is that every parser of input it
// does not produce has one.
package metrics
