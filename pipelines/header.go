package pipelines

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"gopkg.in/yaml.v3"

	"github.com/orchestrator-io/orchestrator/objectstore/storeurl"
)

// ReadHeader reads of a pipeline file only what says where its runs are recorded — its
// name, warehouse and storage settings — even when the rest of the file is invalid, so
// that the runs commands find the run store of a pipeline whose file has an invalid
// edit (and run it as its last valid definition, which its records keep). The Spec it
// returns has no tables nor stages: it only opens stores. It fails when the file is
// not YAML, or names no pipeline.
func ReadHeader(path string, opts Options) (*Spec, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read pipeline: %w", err)
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(data, &doc); err != nil || doc.Kind == 0 || len(doc.Content) == 0 {
		return nil, errors.New("not a YAML mapping")
	}
	root := doc.Content[0]
	getenv := opts.LookupEnv
	if getenv == nil {
		getenv = osLookupEnv
	}
	ps := &problems{file: path}
	var head struct {
		Pipeline  string  `yaml:"pipeline"`
		Warehouse string  `yaml:"warehouse"`
		Storage   Storage `yaml:"storage"`
	}
	for _, key := range []string{"pipeline", "warehouse", "storage"} {
		if _, v := mapEntry(root, key); v != nil {
			expandEnv(ps, v, getenv, map[*yaml.Node]string{}, false)
		}
	}
	for i := 0; i+1 < len(root.Content); i += 2 {
		switch k, v := root.Content[i].Value, root.Content[i+1]; k {
		case "pipeline":
			head.Pipeline = v.Value
		case "warehouse":
			head.Warehouse = v.Value
		case "storage":
			decodeInto(&problems{file: path}, v, &head.Storage, "storage")
		}
	}
	if !nameRE.MatchString(head.Pipeline) {
		return nil, errors.New("it names no valid pipeline")
	}
	abs, _ := filepath.Abs(path)
	spec := &Spec{File: path, Dir: filepath.Dir(abs), Name: head.Pipeline, Storage: head.Storage, Source: data, opts: opts}
	if head.Warehouse == "" {
		spec.Warehouse = filepath.Join(spec.Dir, "warehouse")
	} else {
		spec.Warehouse = storeurl.Anchor(spec.Dir, head.Warehouse)
	}
	return spec, nil
}
