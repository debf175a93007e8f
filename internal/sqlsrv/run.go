package sqlsrv

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"sync/atomic"
	"time"

	sqle "github.com/dolthub/go-mysql-server"
	"github.com/dolthub/go-mysql-server/sql"
	"github.com/dolthub/go-mysql-server/sql/types"

	"github.com/cairn-db/cairn/internal/auth"
	"github.com/cairn-db/cairn/internal/object"
)

// Runner runs statements for the native protocol and the JSON API, as
// the SQL port does, with an access key's view.
type Runner struct {
	eng *sqle.Engine
	ids atomic.Uint32
}

// NewRunner is a Runner over svc's spaces.
func NewRunner(svc Service, keys *auth.Keyring) *Runner {
	return &Runner{eng: newEngine(svc, keys)}
}

// Close releases the engine.
func (r *Runner) Close() error {
	r.eng.Close()
	return nil
}

// MaxRunBytes bounds the text of one answer's rows.
const MaxRunBytes = 16 << 20

// Run runs stmt as access key access and returns its rows as text (nil
// for NULL). An answer over maxBytes of text is refused: add a LIMIT.
func (r *Runner) Run(ctx context.Context, access, stmt string, maxBytes int) (object.SQLResult, error) {
	if maxBytes <= 0 || maxBytes > MaxRunBytes {
		maxBytes = MaxRunBytes
	}
	sess := sql.NewBaseSessionWithClientServer("cairn", sql.Client{User: access, Address: "%"}, r.ids.Add(1))
	sctx := sql.NewContext(ctx, sql.WithSession(sess))
	sctx.SetCurrentDatabase(Database)
	schema, iter, _, err := r.eng.Query(sctx, stmt)
	if err != nil {
		return object.SQLResult{}, object.Errorf(object.InvalidArgument, "%v", err)
	}
	defer iter.Close(sctx)
	var out object.SQLResult
	for _, c := range schema {
		out.Columns = append(out.Columns, c.Name)
	}
	size := 0
	for {
		row, err := iter.Next(sctx)
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return object.SQLResult{}, object.Errorf(object.InvalidArgument, "%v", err)
		}
		cells := make([]*string, len(row))
		for i, v := range row {
			if v == nil {
				continue
			}
			s, err := text(v)
			if err != nil {
				return object.SQLResult{}, err
			}
			cells[i] = &s
			size += len(s) + 8
		}
		if size > maxBytes {
			return object.SQLResult{}, object.Errorf(object.TooLarge, "the answer is over %d bytes: add a LIMIT (or use the SQL port)", maxBytes)
		}
		out.Rows = append(out.Rows, cells)
	}
}

// text is a value as the mysql client prints it.
func text(v any) (string, error) {
	switch x := v.(type) {
	case string:
		return x, nil
	case []byte:
		return string(x), nil
	case time.Time:
		return x.UTC().Format("2006-01-02 15:04:05.999999"), nil
	case float64:
		return strconv.FormatFloat(x, 'g', -1, 64), nil
	case float32:
		return strconv.FormatFloat(float64(x), 'g', -1, 32), nil
	case sql.JSONWrapper:
		return types.JsonToMySqlString(x)
	}
	return fmt.Sprint(v), nil
}
