// Package pipelines owns the pipeline file: its YAML schema, strict decoding, validation
// that reports every problem at once as file:line:col with what was expected, and the
// compilation of a valid pipeline into a Plan: its stages, each with the jobs stage of its
// kind, its retries, timeout and engine, in a dependency graph (Plan.Graph).
//
// Invariants:
//   - Unknown keys, wrong types, unknown stage kinds or tables, bad cron expressions or time
//     zones, missing or cyclic dependencies and history stages over tables without a change
//     feed are all errors; a Spec is only returned when there are none, so a pipeline that
//     does not validate never runs.
//   - ${VAR} and ${VAR:-default} expand from the environment in values (never in keys), so
//     secrets stay out of the file; an unset variable without a default is an error.
//     Spec.Source keeps the file as written, references unexpanded (a run record keeps
//     it), and a webhook's Display form is the URL as written.
//   - ${params.NAME}, ${run.slot} and ${run.slot_date} are run-time references: allowed
//     in stage values only, checked against the declared params at load, and expanded
//     when a run binds its values (Spec.Bind reads the definition again with them).
//   - Schedules are parsed and checked by package cron, which the scheduler
//     plans with too, so validation and planning never disagree; pipelines never
//     imports scheduler itself.
//   - Every stage has an engine once loaded (its own engine:, else the pipeline's, else
//     local), and a pipeline with a spark stage names its cluster (spark.remote);
//     a Plan says what runs and in which order, never how: the scheduler's runner builds
//     each attempt's environment and hands it to its engine (the executor's dispatcher),
//     and pipelines imports neither.
//   - A Spec is immutable once returned.
package pipelines
