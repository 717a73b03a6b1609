package sparkconnect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/apache/arrow-go/v18/arrow"
	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"
	"google.golang.org/genproto/googleapis/rpc/errdetails"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/orchestrator-io/orchestrator/internal/sparkconnect/pb"
)

// Session is one Spark Connect session: its confs (SET) hold for its later statements.
// Statements of one session may run concurrently.
type Session struct {
	c  *Client
	id string
}

// ID is the session id (with an operation id, enough to interrupt from elsewhere).
func (s *Session) ID() string { return s.id }

// Result is what a statement returned: column names and rows of Go values (nil, bool,
// int64, float64, string, []byte, time.Time for timestamps and dates, and decimals as
// their text).
type Result struct {
	Columns []string
	Rows    [][]any
}

// Value returns the value of the named column in row i (nil when absent).
func (r *Result) Value(i int, column string) any {
	for j, c := range r.Columns {
		if c == column && i < len(r.Rows) {
			return r.Rows[i][j]
		}
	}
	return nil
}

// interruptTimeout bounds the Interrupt sent after a statement's context ended.
const interruptTimeout = 10 * time.Second

// Execute runs one SQL statement under operationID (NewOperationID; "" makes one) and
// returns its result. Commands (INSERT, MERGE, VACUUM, ...) run when sent; their result
// is what Spark returns for them (MERGE: its metrics row). When ctx ends before the
// statement does, the operation is interrupted on the server and ctx's error returned.
func (s *Session) Execute(ctx context.Context, operationID, query string) (*Result, error) {
	if operationID == "" {
		operationID = NewOperationID()
	}
	ct := clientType
	req := &pb.ExecutePlanRequest{
		SessionId:   s.id,
		UserContext: s.c.user,
		OperationId: &operationID,
		ClientType:  &ct,
		Plan: &pb.Plan{OpType: &pb.Plan_Root{Root: &pb.Relation{
			RelType: &pb.Relation_Sql{Sql: &pb.SQL{Query: query}},
		}}},
	}
	res, err := s.execute(ctx, req)
	if ctx.Err() != nil {
		ictx, cancel := context.WithTimeout(context.WithoutCancel(ctx), interruptTimeout)
		defer cancel()
		if _, ierr := s.Interrupt(ictx, operationID); ierr != nil {
			return nil, fmt.Errorf("%w (interrupting operation %s on the server failed: %v)", context.Cause(ctx), operationID, ierr)
		}
		return nil, context.Cause(ctx)
	}
	return res, err
}

func (s *Session) execute(ctx context.Context, req *pb.ExecutePlanRequest) (*Result, error) {
	stream, err := s.c.svc.ExecutePlan(s.c.ctx(ctx), req)
	if err != nil {
		return nil, convertError(err)
	}
	res := &Result{}
	var chunks []byte
	for {
		resp, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return res, nil
		}
		if err != nil {
			return nil, convertError(err)
		}
		switch rt := resp.ResponseType.(type) {
		case *pb.ExecutePlanResponse_ArrowBatch_:
			b := rt.ArrowBatch
			data := b.Data
			if b.NumChunksInBatch != nil && *b.NumChunksInBatch > 1 {
				chunks = append(chunks, data...)
				if b.GetChunkIndex() < *b.NumChunksInBatch-1 {
					continue
				}
				data, chunks = chunks, nil
			}
			if err := res.addArrow(data); err != nil {
				return nil, err
			}
		case *pb.ExecutePlanResponse_SqlCommandResult_:
			if lr := rt.SqlCommandResult.GetRelation().GetLocalRelation(); lr != nil && len(lr.Data) > 0 {
				if err := res.addArrow(lr.Data); err != nil {
					return nil, err
				}
			}
		case *pb.ExecutePlanResponse_ResultComplete_:
			return res, nil
		}
	}
}

// addArrow appends the rows of an Arrow IPC stream.
func (r *Result) addArrow(data []byte) error {
	rd, err := ipc.NewReader(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("spark result: %w", err)
	}
	defer rd.Release()
	if r.Columns == nil {
		for _, f := range rd.Schema().Fields() {
			r.Columns = append(r.Columns, f.Name)
		}
	}
	for rd.Next() {
		rec := rd.RecordBatch()
		for i := range int(rec.NumRows()) {
			row := make([]any, rec.NumCols())
			for j, col := range rec.Columns() {
				row[j] = value(col, i)
			}
			r.Rows = append(r.Rows, row)
		}
	}
	if err := rd.Err(); err != nil {
		return fmt.Errorf("spark result: %w", err)
	}
	return nil
}

// value converts one Arrow value to Go.
func value(a arrow.Array, i int) any {
	if a.IsNull(i) {
		return nil
	}
	switch a := a.(type) {
	case *array.Boolean:
		return a.Value(i)
	case *array.Int8:
		return int64(a.Value(i))
	case *array.Int16:
		return int64(a.Value(i))
	case *array.Int32:
		return int64(a.Value(i))
	case *array.Int64:
		return a.Value(i)
	case *array.Float32:
		return float64(a.Value(i))
	case *array.Float64:
		return a.Value(i)
	case *array.String:
		return a.Value(i)
	case *array.LargeString:
		return a.Value(i)
	case *array.Binary:
		return bytes.Clone(a.Value(i))
	case *array.Timestamp:
		unit := a.DataType().(*arrow.TimestampType).Unit
		return a.Value(i).ToTime(unit).UTC()
	case *array.Date32:
		return a.Value(i).ToTime().UTC()
	}
	return a.ValueStr(i)
}

// SetConf sets session confs (SET k=v), which hold for the session's later statements.
func (s *Session) SetConf(ctx context.Context, conf map[string]string) error {
	pairs := make([]*pb.KeyValue, 0, len(conf))
	for k, v := range conf {
		pairs = append(pairs, &pb.KeyValue{Key: k, Value: &v})
	}
	ct := clientType
	_, err := s.c.svc.Config(s.c.ctx(ctx), &pb.ConfigRequest{
		SessionId:   s.id,
		UserContext: s.c.user,
		ClientType:  &ct,
		Operation:   &pb.ConfigRequest_Operation{OpType: &pb.ConfigRequest_Operation_Set{Set: &pb.ConfigRequest_Set{Pairs: pairs}}},
	})
	if err != nil {
		return fmt.Errorf("set spark confs: %w", convertError(err))
	}
	return nil
}

// Interrupt stops the operation with the given id on the server and returns the ids it
// interrupted (none when the operation had ended or never started).
func (s *Session) Interrupt(ctx context.Context, operationID string) ([]string, error) {
	ct := clientType
	resp, err := s.c.svc.Interrupt(s.c.ctx(ctx), &pb.InterruptRequest{
		SessionId:     s.id,
		UserContext:   s.c.user,
		ClientType:    &ct,
		InterruptType: pb.InterruptRequest_INTERRUPT_TYPE_OPERATION_ID,
		Interrupt:     &pb.InterruptRequest_OperationId{OperationId: operationID},
	})
	if err != nil {
		if isSessionGone(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("interrupt spark operation %s: %w", operationID, convertError(err))
	}
	return resp.InterruptedIds, nil
}

// Release ends the session on the server (its confs and cached state go).
func (s *Session) Release(ctx context.Context) error {
	ct := clientType
	_, err := s.c.svc.ReleaseSession(s.c.ctx(ctx), &pb.ReleaseSessionRequest{SessionId: s.id, UserContext: s.c.user, ClientType: &ct})
	if err != nil && !isSessionGone(err) {
		return fmt.Errorf("release spark session: %w", convertError(err))
	}
	return nil
}

// isSessionGone reports an error saying the session is unknown or closed (nothing to
// interrupt or release).
func isSessionGone(err error) bool {
	st, ok := status.FromError(err)
	if !ok {
		return false
	}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			switch info.Metadata["errorClass"] {
			case "INVALID_HANDLE.SESSION_NOT_FOUND", "INVALID_HANDLE.SESSION_CLOSED":
				return true
			}
		}
	}
	return false
}

// convertError turns a gRPC error into an *Error with Spark's class and SQLSTATE.
func convertError(err error) error {
	st, ok := status.FromError(err)
	if !ok {
		return err
	}
	e := &Error{Message: st.Message()}
	for _, d := range st.Details() {
		if info, ok := d.(*errdetails.ErrorInfo); ok {
			e.Class = info.Metadata["errorClass"]
			e.SQLState = info.Metadata["sqlState"]
		}
	}
	if st.Code() == codes.Unavailable {
		return fmt.Errorf("spark connect server unavailable: %w", e)
	}
	if e.Class == "OPERATION_CANCELED" || st.Code() == codes.Canceled {
		return fmt.Errorf("%w: %w", ErrInterrupted, e)
	}
	return e
}

// Running reports whether the operation is running on the server (in this session).
// It asks to reattach to it: the server answers that a running (non-reattachable)
// operation cannot be reattached, and that an ended or unknown one is not found.
func (s *Session) Running(ctx context.Context, operationID string) (bool, error) {
	ct := clientType
	stream, err := s.c.svc.ReattachExecute(s.c.ctx(ctx), &pb.ReattachExecuteRequest{
		SessionId: s.id, UserContext: s.c.user, OperationId: operationID, ClientType: &ct,
	})
	if err == nil {
		_, err = stream.Recv()
	}
	var se *Error
	if errors.As(convertError(err), &se) {
		switch {
		case strings.HasPrefix(se.Class, "INVALID_CURSOR"):
			return true, nil
		case strings.HasPrefix(se.Class, "INVALID_HANDLE"):
			return false, nil
		}
	}
	if err == nil || errors.Is(err, io.EOF) {
		return false, nil
	}
	return false, fmt.Errorf("ask for spark operation %s: %w", operationID, convertError(err))
}

// UnsetConf removes session confs (RESET k).
func (s *Session) UnsetConf(ctx context.Context, keys ...string) error {
	ct := clientType
	_, err := s.c.svc.Config(s.c.ctx(ctx), &pb.ConfigRequest{
		SessionId:   s.id,
		UserContext: s.c.user,
		ClientType:  &ct,
		Operation:   &pb.ConfigRequest_Operation{OpType: &pb.ConfigRequest_Operation_Unset{Unset: &pb.ConfigRequest_Unset{Keys: keys}}},
	})
	if err != nil {
		return fmt.Errorf("unset spark confs: %w", convertError(err))
	}
	return nil
}
