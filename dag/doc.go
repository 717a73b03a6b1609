// Package dag owns the shape of a pipeline run: a graph of named nodes joined by
// depends_on edges, its validation (duplicate names, unknown dependencies, cycles), its
// ready order, and the executor that runs it with bounded parallelism, per-node retries
// with backoff, per-attempt timeouts, cancellation, and an event for every state change.
//
// dag knows nothing about stages, tables or YAML: a node's work is a Task, and callers in
// other packages (pipelines, scheduler) wrap their stages in one. dag imports no project
// package.
//
// Invariants:
//   - A *Graph exists only if it is valid: names are unique and non-empty, every dependency
//     names a node of the graph, there is no cycle, and every policy value is in range. New
//     reports every problem it finds at once, in a deterministic order, as a
//     *ValidationError. A Graph is immutable and safe for concurrent use.
//   - Ready order is deterministic: among nodes whose dependencies are all done, the one
//     declared first goes first. Graph.Order and the executor use the same rule, so with
//     MaxParallel 1 nodes start in exactly Graph.Order.
//   - Subgraph keeps only the nodes asked for (as Airflow and Dagu do when one task is run
//     by hand); dependencies on nodes left out are dropped and treated as already satisfied.
//     Upstream and Downstream widen a selection when the caller wants its neighbours too.
//   - In a run, every node goes queued → running → (retrying → running)* → one terminal
//     state (succeeded, failed, cancelled), or queued → skipped / cancelled without ever
//     running. A node starts only after all its dependencies succeeded. A failed node makes
//     every node downstream of it skipped; independent branches go on.
//   - Run owns every goroutine it starts and waits for all of them before it returns. When
//     the run's context is cancelled no new attempt starts, queued nodes become cancelled,
//     and running tasks see their context cancelled; a task that still finishes its work
//     (a safe point) is recorded as succeeded.
//   - Events reach the observer serially, from the goroutine that called Run, in the order
//     the state changes happened for each node. Time comes from Options.Now, waits between
//     attempts from Options.Sleep, and jitter from Options.Rand, so tests pin all three.
package dag
