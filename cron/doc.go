// Package cron owns the meaning of a pipeline's schedule: it parses cron expressions
// (through robfig/cron/v3's parser, behind the one-method Parser interface; robfig's
// runner and its Next are never used) and plans their slots with its own Next, which
// follows an explicit daylight saving time policy (ISC cron's).
//
// Expressions: 5 fields (minute hour day-of-month month day-of-week), 6 fields with a
// leading seconds field, the descriptors @yearly, @annually, @monthly, @weekly, @daily,
// @midnight and @hourly, and @every <duration> (whole seconds, at least 1s), which fires
// by elapsed time from an anchor the caller gives (Schedule.Anchored). Day-of-month and
// day-of-week combine as in standard cron: when both are restricted a day matching
// either fires.
//
// Invariants:
//   - Parse refuses what could mislead: a TZ= or CRON_TZ= prefix (the zone is the
//     pipeline's timezone key), an expression that can never fire (0 0 30 2 *), an @every
//     under a second or with a fraction of a second. It never panics.
//   - Next(after) is the first slot strictly after after, a whole second, and depends
//     only on its arguments (no clock): the same inputs always give the same slot.
//   - DST policy. A fixed-time expression (its minute and hour fields both without a
//     wildcard or step) whose local time does not exist on a spring-forward day fires
//     once, at the transition instant; one whose local time occurs twice on a fall-back
//     day fires once, at the first occurrence. Any other expression fires by elapsed
//     time: at every real instant whose local time matches, so at both 01:00s of a
//     repeated hour and at nothing extra in a skipped hour.
//
// cron imports no project package, so that pipelines (which validates schedules) and
// scheduler (which plans them) can both use it.
package cron
