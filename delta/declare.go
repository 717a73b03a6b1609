package delta

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// What a table declaration (a pipeline's YAML) may say in Delta's terms: the table
// properties a declaration may set, checked with the grammar this package reads them
// with, and identity columns. Callers outside this package never spell property keys.

// settable maps each delta.* property a declaration may set to its value check.
var settable = map[string]func(string) error{
	PropEnableChangeDataFeed:           checkBoolValue,
	PropEnableDeletionVectors:          checkBoolValue,
	PropAppendOnly:                     checkBoolValue,
	PropEnableExpiredLogCleanup:        checkBoolValue,
	PropCheckpointWriteStatsAsJSON:     checkBoolValue,
	PropLogRetentionDuration:           checkIntervalValue,
	PropDeletedFileRetentionDur:        checkIntervalValue,
	PropCheckpointInterval:             checkPositiveValue,
	PropEnableInCommitTimestamps:       checkBoolValue,
	PropCheckpointPolicy:               checkCheckpointPolicy,
	PropEnableRowTracking:              checkBoolValue,
	"delta.dataSkippingNumIndexedCols": checkIntValue,
	propColumnMappingMode:              checkColumnMappingMode,
}

func checkColumnMappingMode(v string) error {
	switch strings.ToLower(v) {
	case "none", "name", "id":
		return nil
	}
	return fmt.Errorf("%q: want none, name or id", v)
}

// ColumnMappingProperty is the property that sets a table's column mapping mode.
const ColumnMappingProperty = propColumnMappingMode

// ColumnMappingMode is the column mapping mode declared properties set ("" none set).
func ColumnMappingMode(props map[string]string) string {
	return strings.ToLower(props[propColumnMappingMode])
}

// SettableProperties lists the delta.* table properties a declaration may set, sorted.
func SettableProperties() []string {
	keys := make([]string, 0, len(settable))
	for k := range settable {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}

// IsDeltaProperty reports whether key is in Delta's namespace (delta.*), which only the
// keys SettableProperties lists may use in a declaration.
func IsDeltaProperty(key string) bool { return strings.HasPrefix(strings.ToLower(key), "delta.") }

// CheckProperty checks a declared table property: a delta.* key must be settable and its
// value read as this package reads it (the same grammar as ParseInterval for
// durations); other keys are the user's own and pass.
func CheckProperty(key, value string) error {
	if !IsDeltaProperty(key) {
		return nil
	}
	check, ok := settable[key]
	if !ok {
		return fmt.Errorf("unknown Delta property %q; expected one of %s", key, strings.Join(SettableProperties(), ", "))
	}
	return check(value)
}

// ChangeDataFeedOn reports whether declared properties turn the change data feed on.
func ChangeDataFeedOn(props map[string]string) bool {
	return strings.EqualFold(props[PropEnableChangeDataFeed], "true")
}

// ChangeDataFeedProperties are the properties that turn the change data feed on.
func ChangeDataFeedProperties() map[string]string {
	return map[string]string{PropEnableChangeDataFeed: "true"}
}

// IsIdentity reports whether f is an identity column.
func IsIdentity(f *StructField) bool {
	if f == nil || f.Metadata == nil {
		return false
	}
	_, ok := f.Metadata[IdentityStart]
	return ok
}

// SetIdentity makes f an identity column (GENERATED ALWAYS AS IDENTITY, or BY DEFAULT
// with allowExplicitInsert) starting at start with step step; it is not nullable.
func SetIdentity(f *StructField, start, step int64, allowExplicitInsert bool) {
	if f.Metadata == nil {
		f.Metadata = map[string]any{}
	}
	f.Nullable = false
	f.Metadata[IdentityStart] = start
	f.Metadata[IdentityStep] = step
	f.Metadata[IdentityAllowExplicitInsert] = allowExplicitInsert
}

func checkBoolValue(v string) error {
	if v != "true" && v != "false" {
		return fmt.Errorf("expected true or false, got %q", v)
	}
	return nil
}

func checkCheckpointPolicy(v string) error {
	if v != "classic" && v != CheckpointPolicyV2 {
		return fmt.Errorf("expected classic or v2, got %q", v)
	}
	return nil
}

func checkIntValue(v string) error {
	if _, err := strconv.Atoi(v); err != nil {
		return fmt.Errorf("expected a whole number, got %q", v)
	}
	return nil
}

func checkPositiveValue(v string) error {
	if n, err := strconv.Atoi(v); err != nil || n < 1 {
		return fmt.Errorf("expected a whole number of 1 or more, got %q", v)
	}
	return nil
}

func checkIntervalValue(v string) error {
	if _, err := ParseInterval(v); err != nil {
		return fmt.Errorf("expected an interval such as \"interval 30 days\": %v", err)
	}
	return nil
}
