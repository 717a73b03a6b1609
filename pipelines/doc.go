// Package pipelines owns the pipeline file: its YAML schema, strict decoding, validation
// that reports every problem at once as file:line:col with what was expected, and the
// compilation of a valid pipeline into a dag.Graph of jobs stages.
//
// Invariants:
//   - Unknown keys, wrong types, unknown stage kinds or tables, bad cron expressions or time
//     zones, missing or cyclic dependencies and history stages over tables without a change
//     feed are all errors; a Spec is only returned when there are none, so a pipeline that
//     does not validate never runs.
//   - ${VAR} and ${VAR:-default} expand from the environment in values (never in keys), so
//     secrets stay out of the file; an unset variable without a default is an error.
//   - A Spec is immutable once returned.
package pipelines
