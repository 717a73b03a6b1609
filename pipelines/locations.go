package pipelines

import (
	"errors"
	"fmt"
	"strings"

	"github.com/orchestrator-io/orchestrator/jobs"
	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

// StoreOptions are the storage section's settings as storeurl takes them.
func (s Storage) StoreOptions() storeurl.Options {
	return storeurl.Options{
		Endpoint:     s.Endpoint,
		Region:       s.Region,
		AccessKey:    s.AccessKeyID,
		SecretKey:    s.SecretAccessKey,
		SessionToken: s.SessionToken,
		PathStyle:    s.PathStyle != nil && *s.PathStyle,
		Insecure:     s.Insecure,
	}
}

// ErrUndeclaredTable is what TableLocation's error wraps when the pipeline declares no
// table of the name.
var ErrUndeclaredTable = errors.New("table not declared")

// undeclaredTable is the error of an undeclared name: its message, and
// ErrUndeclaredTable to errors.Is.
type undeclaredTable string

func (e undeclaredTable) Error() string        { return string(e) }
func (e undeclaredTable) Is(target error) bool { return target == ErrUndeclaredTable }

// TableLocation resolves a declared table's name against the pipeline: the declaration
// and the table's location (the warehouse joined with the table's path). Its error
// names the declared tables when name is not one of them (ErrUndeclaredTable), and
// refuses a warehouse that lives only inside a running process (mem://), where no other
// process finds the table.
func (s *Spec) TableLocation(name string) (*jobs.Table, string, error) {
	t := s.Table(name)
	if t == nil {
		names := make([]string, len(s.Tables))
		for i, t := range s.Tables {
			names[i] = t.Name
		}
		return nil, "", undeclaredTable(fmt.Sprintf("table %q is not declared in %s; declared: %s", name, s.File, strings.Join(names, ", ")))
	}
	if storeurl.InProcess(s.Warehouse) {
		return nil, "", fmt.Errorf("table %s: the warehouse of %s is %s, which lives only inside a running process", name, s.File, s.Warehouse)
	}
	return t, storeurl.Join(s.Warehouse, t.Path), nil
}
