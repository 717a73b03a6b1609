package decode_test

import (
	"context"
	"fmt"
	"strings"

	dschema "github.com/orchestrator-io/orchestrator/delta/schema"
	"github.com/orchestrator-io/orchestrator/jobs/decode"
)

func ExampleNewReader() {
	schema := &dschema.StructType{Fields: []*dschema.StructField{
		{Name: "id", Type: &dschema.PrimitiveType{Name: dschema.TypeString}},
		{Name: "amount", Type: &dschema.DecimalType{Precision: 10, Scale: 2}, Nullable: true},
	}}
	in := "amount,id\n12.50,a\n\"12,50\",b\n7,c\n"
	r, err := decode.NewReader(context.Background(), strings.NewReader(in), "sales/2026-01-14.csv", decode.Options{
		Format:      decode.CSV,
		Schema:      schema,
		OnError:     decode.Skip,
		OnBadRecord: func(e *decode.Error) { fmt.Println("skipped:", e) },
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer r.Release()
	for r.Next() {
		rec := r.RecordBatch()
		fmt.Println(rec.NumRows(), "rows:", rec.Column(0), rec.Column(1))
	}
	fmt.Println(r.Rows(), "rows,", r.BadRecords(), "bad, err:", r.Err())
	// Output:
	// skipped: sales/2026-01-14.csv:3: column amount (1): "12,50" is not a decimal(10,2)
	// 2 rows: ["a" "c"] [12.5 7]
	// 2 rows, 1 bad, err: <nil>
}
