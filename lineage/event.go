package lineage

import (
	"crypto/sha1"
	"fmt"
	"path"
	"strings"
	"time"
)

// Schema URLs of the pinned spec version and of the facets used (as openlineage-python
// 1.54's generated models name them).
const (
	SpecVersion          = "2-0-2"
	RunEventSchemaURL    = "https://openlineage.io/spec/2-0-2/OpenLineage.json#/$defs/RunEvent"
	schemaFacetURL       = "https://openlineage.io/spec/facets/1-2-0/SchemaDatasetFacet.json#/$defs/SchemaDatasetFacet"
	columnLineageURL     = "https://openlineage.io/spec/facets/1-2-0/ColumnLineageDatasetFacet.json#/$defs/ColumnLineageDatasetFacet"
	versionFacetURL      = "https://openlineage.io/spec/facets/1-0-1/DatasetVersionDatasetFacet.json#/$defs/DatasetVersionDatasetFacet"
	outputStatisticsURL  = "https://openlineage.io/spec/facets/1-0-2/OutputStatisticsOutputDatasetFacet.json#/$defs/OutputStatisticsOutputDatasetFacet"
	parentFacetURL       = "https://openlineage.io/spec/facets/1-2-0/ParentRunFacet.json#/$defs/ParentRunFacet"
	jobTypeFacetURL      = "https://openlineage.io/spec/facets/2-0-4/JobTypeJobFacet.json#/$defs/JobTypeJobFacet"
	errorMessageFacetURL = "https://openlineage.io/spec/facets/1-0-1/ErrorMessageRunFacet.json#/$defs/ErrorMessageRunFacet"
	nominalTimeFacetURL  = "https://openlineage.io/spec/facets/1-0-1/NominalTimeRunFacet.json#/$defs/NominalTimeRunFacet"
	documentationURL     = "https://openlineage.io/spec/facets/1-1-0/DocumentationJobFacet.json#/$defs/DocumentationJobFacet"
)

// Producer names orchestrator in every event and facet.
const Producer = "https://github.com/orchestrator-io/orchestrator"

// EventType is a run's transition.
type EventType string

// Event types.
const (
	Start    EventType = "START"
	Complete EventType = "COMPLETE"
	Fail     EventType = "FAIL"
	Abort    EventType = "ABORT"
)

// Event is an OpenLineage RunEvent.
type Event struct {
	EventType EventType `json:"eventType"`
	EventTime string    `json:"eventTime"`
	Run       Run       `json:"run"`
	Job       Job       `json:"job"`
	Inputs    []Dataset `json:"inputs"`
	Outputs   []Dataset `json:"outputs"`
	Producer  string    `json:"producer"`
	SchemaURL string    `json:"schemaURL"`
}

// Run is an event's run: its id and facets.
type Run struct {
	RunID  string         `json:"runId"`
	Facets map[string]any `json:"facets,omitempty"`
}

// Job is an event's job.
type Job struct {
	Namespace string         `json:"namespace"`
	Name      string         `json:"name"`
	Facets    map[string]any `json:"facets,omitempty"`
}

// Dataset is an input or output dataset with its facets.
type Dataset struct {
	Namespace    string         `json:"namespace"`
	Name         string         `json:"name"`
	Facets       map[string]any `json:"facets,omitempty"`
	InputFacets  map[string]any `json:"inputFacets,omitempty"`
	OutputFacets map[string]any `json:"outputFacets,omitempty"`
}

// facet is the base of every facet: who made it and its schema.
type facet struct {
	Producer  string `json:"_producer"`
	SchemaURL string `json:"_schemaURL"`
}

func base(url string) facet { return facet{Producer: Producer, SchemaURL: url} }

type schemaField struct {
	Name        string `json:"name"`
	Type        string `json:"type"`
	Description string `json:"description,omitempty"`
}

type schemaFacet struct {
	facet
	Fields []schemaField `json:"fields"`
}

type versionFacet struct {
	facet
	DatasetVersion string `json:"datasetVersion"`
}

type outputStatistics struct {
	facet
	RowCount  *int64 `json:"rowCount,omitempty"`
	Size      int64  `json:"size"`
	FileCount int64  `json:"fileCount"`
}

// InputField is a column a column of an output comes from.
type InputField struct {
	Namespace       string           `json:"namespace"`
	Name            string           `json:"name"`
	Field           string           `json:"field"`
	Transformations []Transformation `json:"transformations,omitempty"`
}

// Transformation says how an output column comes from an input column.
type Transformation struct {
	Type        string `json:"type"` // DIRECT or INDIRECT
	Subtype     string `json:"subtype,omitempty"`
	Description string `json:"description,omitempty"`
}

type columnFields struct {
	InputFields []InputField `json:"inputFields"`
}

type columnLineageFacet struct {
	facet
	Fields map[string]columnFields `json:"fields"`
}

type parentFacet struct {
	facet
	Run  parentRun  `json:"run"`
	Job  parentJob  `json:"job"`
	Root *parentRef `json:"root,omitempty"`
}

type parentRun struct {
	RunID string `json:"runId"`
}

type parentJob struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
}

type parentRef struct {
	Run parentRun `json:"run"`
	Job parentJob `json:"job"`
}

type jobTypeFacet struct {
	facet
	ProcessingType string `json:"processingType"`
	Integration    string `json:"integration"`
	JobType        string `json:"jobType"`
}

type errorMessageFacet struct {
	facet
	Message             string `json:"message"`
	ProgrammingLanguage string `json:"programmingLanguage"`
}

type nominalTimeFacet struct {
	facet
	NominalStartTime string `json:"nominalStartTime"`
}

type documentationFacet struct {
	facet
	Description string `json:"description"`
}

// RunUUID is the OpenLineage run id of an attempt of a run (stage "": the run itself,
// else one of its stages): a name-based UUID (version 5 layout, SHA-1), so that every
// process derives the same id.
func RunUUID(runID string, attempt int, stage string) string {
	h := sha1.Sum([]byte(fmt.Sprintf("orchestrator-run\x00%s\x00%d\x00%s", runID, attempt, stage)))
	h[6] = h[6]&0x0f | 0x50
	h[8] = h[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", h[0:4], h[4:6], h[6:8], h[8:10], h[10:16])
}

func eventTime(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// cleanSourceName is an ingest source's dataset: an http(s) URL's scheme and host and
// its path (never its query, fragment or user info), or a glob's directory.
func sourceDataset(source string) (namespace, name string) {
	if rest, ok := strings.CutPrefix(source, "https://"); ok {
		return splitHTTP("https", rest)
	}
	if rest, ok := strings.CutPrefix(source, "http://"); ok {
		return splitHTTP("http", rest)
	}
	return "", globDir(source)
}

func splitHTTP(scheme, rest string) (string, string) {
	host, p, _ := strings.Cut(rest, "/")
	if i := strings.LastIndexByte(host, '@'); i >= 0 {
		host = host[i+1:]
	}
	p, _, _ = strings.Cut(p, "?")
	p, _, _ = strings.Cut(p, "#")
	return scheme + "://" + host, "/" + p
}

// globDir is the directory part of a glob before its first wildcard.
func globDir(glob string) string {
	i := strings.IndexAny(glob, "*?[{")
	if i < 0 {
		return path.Dir(glob)
	}
	return strings.TrimRight(path.Dir(glob[:i]+"x"), "/")
}
