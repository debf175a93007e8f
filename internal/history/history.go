// Package history records the operations concurrent clients run against a
// store under faults, and checks them: every key's history must be
// linearizable as a register (checked with porcupine), which also proves
// that no acknowledged write was lost when the history ends with reads of
// every key.
//
// A write whose outcome is unknown (an error that does not prove it had no
// effect: a timeout, a lost connection, a failover) is kept as pending
// forever: it may have taken effect at any point after its call. Reads that
// fail, and writes that provably did not apply, are dropped.
package history

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/anishathalye/porcupine"
)

// Kind is an operation's kind.
type Kind int

// Operation kinds.
const (
	Put Kind = iota
	Get
)

// Op is one recorded operation.
type Op struct {
	Client int
	Kind   Kind
	Key    string
	// Value is what a Put wrote or what a Get read ("" for absent).
	Value        string
	Call, Return time.Duration // since the Recorder started
	// Unknown marks a Put whose outcome is unknown.
	Unknown bool
}

// Recorder collects operations from concurrent clients.
type Recorder struct {
	start time.Time
	mu    sync.Mutex
	ops   []Op
}

// NewRecorder starts a history now.
func NewRecorder() *Recorder { return &Recorder{start: time.Now()} }

// Now is the time since the recorder started, for Op.Call and Op.Return.
func (r *Recorder) Now() time.Duration { return time.Since(r.start) }

// Add records a completed operation.
func (r *Recorder) Add(op Op) {
	r.mu.Lock()
	r.ops = append(r.ops, op)
	r.mu.Unlock()
}

// Put records a put of val to key by client, called at call and ended
// now with err. A put that provably had no effect (notApplied) is left
// out; after any other error its outcome is unknown.
func (r *Recorder) Put(client int, key, val string, call time.Duration, err error, notApplied bool) {
	if err != nil && notApplied {
		return
	}
	r.Add(Op{Client: client, Kind: Put, Key: key, Value: val, Call: call, Return: r.Now(), Unknown: err != nil})
}

// Get records a get of key by client, called at call, that read val ("":
// the key was absent) and returned now.
func (r *Recorder) Get(client int, key, val string, call time.Duration) {
	r.Add(Op{Client: client, Kind: Get, Key: key, Value: val, Call: call, Return: r.Now()})
}

// Ops returns a copy of the history so far.
func (r *Recorder) Ops() []Op {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Op(nil), r.ops...)
}

// Result is the outcome of Check.
type Result struct {
	// Linearizable is true when every key's history is.
	Linearizable bool
	// Unknown is true when the checker ran out of time (Linearizable then
	// speaks only of the keys it finished).
	Unknown bool
	// Ops, Puts, Gets and Pending count the checked history.
	Ops, Puts, Gets, Pending int
	// Bad names the keys whose history is not linearizable, with the
	// operations of each, for the failure message.
	Bad string
}

// Verdict is nil when the whole history was checked, is linearizable and
// holds at least minAcked acknowledged writes (so the run tested
// something); else it says what failed. Keys the checker had no time for
// would pass as linearizable, so running out of time fails too.
func (r Result) Verdict(minAcked int) error {
	switch {
	case r.Unknown:
		return fmt.Errorf("the checker ran out of time; the history was not fully checked")
	case !r.Linearizable:
		return fmt.Errorf("history is not linearizable:\n%s", r.Bad)
	case r.Puts-r.Pending < minAcked:
		return fmt.Errorf("only %d writes were acknowledged, fewer than %d", r.Puts-r.Pending, minAcked)
	}
	return nil
}

type input struct {
	put   bool
	value string
}

// The model: a register per key, initially absent ("").
func registerInit() any { return "" }

func registerStep(state, in, out any) (bool, any) {
	i := in.(input)
	if i.put {
		return true, i.value
	}
	return out.(string) == state.(string), state
}

// Check checks each key's operations in ops against a register, giving up
// after timeout in all.
func Check(ops []Op, timeout time.Duration) Result {
	res := Result{Ops: len(ops), Linearizable: true}
	byKey := map[string][]Op{}
	for _, op := range ops {
		if op.Kind == Put {
			res.Puts++
			if op.Unknown {
				res.Pending++
			}
		} else {
			res.Gets++
		}
		byKey[op.Key] = append(byKey[op.Key], op)
	}
	keys := make([]string, 0, len(byKey))
	for k := range byKey {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	model := porcupine.Model{Init: registerInit, Step: registerStep}
	deadline := time.Now().Add(timeout)
	var bad strings.Builder
	for _, k := range keys {
		left := time.Until(deadline)
		if left <= 0 {
			res.Unknown = true
			break
		}
		hist := make([]porcupine.Operation, 0, len(byKey[k]))
		for _, op := range byKey[k] {
			ret := int64(op.Return)
			if op.Unknown {
				ret = math.MaxInt64 // may take effect at any time after its call
			}
			hist = append(hist, porcupine.Operation{ClientId: op.Client, Input: input{put: op.Kind == Put, value: op.Value},
				Call: int64(op.Call), Output: op.Value, Return: ret})
		}
		switch porcupine.CheckOperationsTimeout(model, hist, left) {
		case porcupine.Unknown:
			res.Unknown = true
		case porcupine.Illegal:
			res.Linearizable = false
			describe(&bad, k, byKey[k])
		}
	}
	res.Bad = bad.String()
	return res
}

// describe writes a key's operations in call order, for a failure message.
func describe(b *strings.Builder, key string, ops []Op) {
	sort.Slice(ops, func(i, j int) bool { return ops[i].Call < ops[j].Call })
	fmt.Fprintf(b, "key %q:\n", key)
	for _, op := range ops {
		kind := "get"
		if op.Kind == Put {
			kind = "put"
		}
		ret := op.Return.String()
		if op.Unknown {
			ret = "?"
		}
		fmt.Fprintf(b, "  client %d %s %q [%v, %s]\n", op.Client, kind, op.Value, op.Call, ret)
	}
}
