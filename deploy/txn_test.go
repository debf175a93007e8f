package deploy

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/cairn-db/cairn/client"
	"github.com/cairn-db/cairn/internal/history"
	"github.com/cairn-db/cairn/internal/wire"
)

// startDockerTxnClients starts two clients that run list-append
// transactions (history.CheckListAppend) on keys of space until stop
// closes: each transaction reads or appends to 1-4 of the keys.
func startDockerTxnClients(t *testing.T, seeds []string, space string, keys []string, log *history.TxnLog, stop chan struct{}, wg *sync.WaitGroup) {
	for c := range 2 {
		rot := append(slices.Clone(seeds[(c+1)%len(seeds):]), seeds[:(c+1)%len(seeds)]...)
		cl, err := client.DialOptions(context.Background(), client.Options{Addrs: rot, DialTimeout: time.Second})
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer cl.Close()
			rnd := rand.New(rand.NewPCG(uint64(c), 17))
			for seq := 0; ; seq++ {
				select {
				case <-stop:
					return
				default:
				}
				mops, outcome := listAppendTxn(cl, space, keys, rnd, fmt.Sprintf("t%d-%d", c, seq))
				log.Add(mops, outcome)
				time.Sleep(time.Duration(rnd.IntN(5)) * time.Millisecond)
			}
		}()
	}
}

// listAppendTxn runs one transaction; its outcome is Failed only when the
// client knows nothing was written.
func listAppendTxn(cl *client.Client, space string, keys []string, rnd *rand.Rand, id string) ([]history.Mop, history.Outcome) {
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Second)
	defer cancel()
	tx, err := cl.Begin(ctx)
	if err != nil {
		return nil, history.Failed
	}
	var mops []history.Mop
	for i, p := range rnd.Perm(len(keys))[:1+rnd.IntN(4)] {
		k := keys[p]
		list, err := readList(ctx, tx, space, k)
		if err != nil {
			tx.Rollback(context.Background())
			return mops, history.Failed
		}
		if rnd.IntN(2) == 0 {
			mops = append(mops, history.Mop{Kind: history.Read, Key: k, List: list})
			continue
		}
		v := fmt.Sprintf("%s.%d", id, i)
		if err := tx.Put(ctx, space, k, []byte(strings.Join(append(list, v), ","))); err != nil {
			tx.Rollback(context.Background())
			return mops, history.Failed
		}
		mops = append(mops, history.Mop{Kind: history.Append, Key: k, Value: v})
	}
	err = tx.Commit(ctx)
	switch {
	case err == nil:
		return mops, history.Committed
	case client.Retryable(err), client.NotApplied(err), errors.Is(err, client.ErrPreconditionFailed):
		return mops, history.Failed
	}
	return mops, history.Unknown
}

func readList(ctx context.Context, tx *client.Txn, space, key string) ([]string, error) {
	b, _, err := tx.Get(ctx, space, key)
	if wire.CodeOf(err) == wire.CodeNotFound {
		return nil, nil
	}
	if err != nil || len(b) == 0 {
		return nil, err
	}
	return strings.Split(string(b), ","), nil
}

// checkTxnLog reads every key once more in one transaction and checks the
// history: snapshot isolation allows no G0, G1a, G1b, G1c nor G-single.
func checkTxnLog(t *testing.T, seeds []string, space string, keys []string, log *history.TxnLog) {
	cl, err := client.Dial(context.Background(), seeds...)
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	for attempt := 0; ; attempt++ {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		tx, err := cl.Begin(ctx)
		var mops []history.Mop
		for _, k := range keys {
			if err != nil {
				break
			}
			var list []string
			if list, err = readList(ctx, tx, space, k); err == nil {
				mops = append(mops, history.Mop{Kind: history.Read, Key: k, List: list})
			}
		}
		cancel()
		if err == nil {
			tx.Rollback(context.Background())
			log.Add(mops, history.Committed)
			break
		}
		if attempt == 20 {
			t.Fatalf("final transactional read: %v", err)
		}
		time.Sleep(500 * time.Millisecond)
	}
	rep := history.CheckListAppend(log.Txns())
	for _, k := range []string{"G0", "G1a", "G1b", "G1c", "G-single", "incompatible-order", "duplicate", "unknown-value"} {
		if rep.Count(k) > 0 {
			t.Fatalf("transactions: %s: %v", k, rep)
		}
	}
	if rep.Committed < 20 {
		t.Fatalf("transactions: only %d committed: %v", rep.Committed, rep)
	}
	t.Logf("transactions: %v", rep)
}
