// Package spilldir makes the private directories where stages over their memory budget
// write spill files, and removes those a killed process left behind.
//
// Each directory holds an owner file naming the process that made it: host, pid and
// the process's start time (so that a pid reused by another process is not taken for
// the owner). A stage removes its directory on every way out it sees; a process killed
// (SIGKILL, OOM, a machine stop) cannot, and its spill files (up to the size of a
// table's batch) would stay forever. Sweep removes every directory under a base whose
// owner is gone: `run` and `serve` call it when they start, and serve every few
// minutes. A directory of another host (a shared temporary directory) is left alone,
// and so is one without an owner file younger than a day (a process of a version that
// wrote none may still be spilling there).
package spilldir
