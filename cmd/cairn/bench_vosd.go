package main

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	mrand "math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/cairn-db/cairn/client"
)

// vosdResult is what `cairn bench --op vosd` measures: VOSD's Table 1
// phases and Table 2 reads (003_… §5), and the disk it took.
type vosdResult struct {
	Op      string `json:"op"`
	Objects int    `json:"objects"`
	Size    int64  `json:"size"`
	Rounds  int    `json:"rounds"`
	Mods    int    `json:"mods"`
	ModSize int64  `json:"mod_size"`
	// FMs is the first version of every object; MMs and SMs are the
	// median per round of the modification phase (every object gets one
	// version carrying Mods modifications) and of the snapshot.
	FMs     float64   `json:"f_ms"`
	MMs     float64   `json:"m_ms_median"`
	SMs     float64   `json:"s_ms_median"`
	MRounds []float64 `json:"m_ms"`
	SRounds []float64 `json:"s_ms"`
	// Reads of a whole object: the latest version, and a random one
	// (through a random round's snapshot).
	LatestP50Ms float64 `json:"read_latest_p50_ms"`
	RandomP50Ms float64 `json:"read_random_version_p50_ms"`
	// Bytes changed (the first versions plus every modification) and,
	// with --data-dir, the data directory's growth.
	ChangedBytes int64 `json:"changed_bytes"`
	DiskBytes    int64 `json:"disk_bytes,omitempty"`
}

// runVOSD runs VOSD's version-creation workload on space: F, then
// rounds of M (one transaction per object with mods byte-range writes,
// conc objects at once) and S (a snapshot of the space), then reads.
func runVOSD(ctx context.Context, c *client.Client, space string, objects int, size int64, rounds, mods int, modSize int64, conc int, dataDir string, progress func(string)) (vosdResult, error) {
	res := vosdResult{Op: "vosd", Objects: objects, Size: size, Rounds: rounds, Mods: mods, ModSize: modSize}
	if modSize > size || objects < 1 || rounds < 1 || mods < 1 || conc < 1 {
		return res, usageError{errors.New("--objects, --rounds, --mods and --concurrency must be positive, --mod-size at most --size")}
	}
	if _, err := c.CreateSpace(ctx, space, client.SpaceSettings{}); err != nil && !errors.Is(err, client.ErrSpaceExists) {
		return res, err
	}
	run := fmt.Sprintf("vosd-%x", time.Now().UnixNano())
	key := func(i int) string { return fmt.Sprintf("%s/o%04d", run, i) }
	before := dirBytes(dataDir)
	each := func(fn func(i int) error) error {
		var wg sync.WaitGroup
		errs := make(chan error, conc)
		next := make(chan int)
		for range conc {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := range next {
					if err := fn(i); err != nil {
						errs <- err
						return
					}
				}
			}()
		}
		for i := range objects {
			select {
			case next <- i:
			case err := <-errs:
				close(next)
				wg.Wait()
				return err
			}
		}
		close(next)
		wg.Wait()
		select {
		case err := <-errs:
			return err
		default:
			return nil
		}
	}
	t0 := time.Now()
	if err := each(func(i int) error {
		body := make([]byte, size)
		rand.Read(body)
		_, err := c.Put(ctx, space, key(i), body)
		return err
	}); err != nil {
		return res, err
	}
	res.FMs = ms(time.Since(t0))
	var seed [16]byte
	rand.Read(seed[:])
	var snaps []string
	var mLat, sLat latencies
	defer func() {
		for _, s := range snaps {
			_ = c.DeleteSnapshot(context.WithoutCancel(ctx), s)
		}
	}()
	// Every modification writes distinct bytes, as VOSD's random ones are:
	// one random buffer, its first 16 bytes replaced by the round, the
	// object and the modification's number (cheaper on the load
	// generator's CPU than fresh random bytes, and no two alike, so the
	// store's dedup cannot make them free).
	mod := make([]byte, modSize)
	rand.Read(mod)
	// A slab each transaction: it keeps small writes' bytes until it
	// commits. Slabs are reused (only the 16-byte stamps change), so the
	// load generator does not spend the CPU it shares with the server on
	// a fresh megabyte per transaction.
	slabs := sync.Pool{New: func() any { b := bytes.Repeat(mod, mods); return &b }}
	for r := range rounds {
		progress(fmt.Sprintf("\rround %d of %d", r+1, rounds))
		t0 = time.Now()
		if err := each(func(i int) error {
			rng := mrand.New(mrand.NewPCG(binary.LittleEndian.Uint64(seed[:]), uint64(r)<<32|uint64(i)))
			sp := slabs.Get().(*[]byte)
			defer slabs.Put(sp)
			slab := *sp
			_, err := c.Update(ctx, func(tx *client.Txn) error {
				for j := range mods {
					data := slab[int64(j)*modSize : int64(j+1)*modSize]
					if len(data) >= 16 {
						binary.LittleEndian.PutUint64(data, uint64(r)<<32|uint64(i))
						binary.LittleEndian.PutUint64(data[8:], uint64(j))
					}
					if err := tx.WriteAt(ctx, space, key(i), rng.Int64N(size-modSize+1), data); err != nil {
						return err
					}
				}
				return nil
			})
			return err
		}); err != nil {
			return res, err
		}
		mLat = append(mLat, time.Since(t0))
		res.MRounds = append(res.MRounds, ms(mLat[len(mLat)-1]))
		t0 = time.Now()
		name := fmt.Sprintf("%s-r%d", run, r)
		if _, err := c.CreateSnapshot(ctx, space, name); err != nil {
			return res, err
		}
		sLat = append(sLat, time.Since(t0))
		res.SRounds = append(res.SRounds, ms(sLat[len(sLat)-1]))
		snaps = append(snaps, name)
	}
	progress("\r")
	res.MMs, res.SMs = ms(mLat.sorted().pct(0.5)), ms(sLat.sorted().pct(0.5))
	res.ChangedBytes = int64(objects)*size + int64(rounds*objects*mods)*modSize
	if dataDir != "" {
		res.DiskBytes = dirBytes(dataDir) - before
	}
	// Reads: the latest of a random object, and a random object through a
	// random round's snapshot, alternating.
	rng := mrand.New(mrand.NewPCG(1, 2))
	var latest, random latencies
	for range max(20, min(200, objects*2)) {
		t0 = time.Now()
		if _, _, err := c.Get(ctx, space, key(rng.IntN(objects))); err != nil {
			return res, err
		}
		latest = append(latest, time.Since(t0))
		t0 = time.Now()
		if _, _, err := c.Get(ctx, snaps[rng.IntN(len(snaps))], key(rng.IntN(objects))); err != nil {
			return res, err
		}
		random = append(random, time.Since(t0))
	}
	res.LatestP50Ms, res.RandomP50Ms = ms(latest.sorted().pct(0.5)), ms(random.sorted().pct(0.5))
	return res, nil
}

// dirBytes is the disk space the files under dir take (0 for "").
func dirBytes(dir string) int64 {
	if dir == "" {
		return 0
	}
	var n int64
	_ = filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && !info.IsDir() {
			n += info.Size()
		}
		return nil
	})
	return n
}

func printVOSD(cmd *cobra.Command, res vosdResult, asJSON bool) error {
	if asJSON {
		return json.NewEncoder(cmd.OutOrStdout()).Encode(res)
	}
	w := cmd.OutOrStdout()
	fmt.Fprintf(w, "vosd: %d objects x %s, %d rounds of %d x %s modifications\n", res.Objects, humanBytes(uint64(res.Size)), res.Rounds, res.Mods, humanBytes(uint64(res.ModSize)))
	fmt.Fprintf(w, "  F %.0f ms; M %.0f ms per round (median); S %.1f ms per snapshot (median)\n", res.FMs, res.MMs, res.SMs)
	fmt.Fprintf(w, "  read whole object: latest p50 %.2f ms, random version p50 %.2f ms (%.2fx)\n", res.LatestP50Ms, res.RandomP50Ms, res.RandomP50Ms/res.LatestP50Ms)
	if res.DiskBytes > 0 {
		fmt.Fprintf(w, "  disk: %s for %s changed (%.2fx)\n", humanBytes(uint64(res.DiskBytes)), humanBytes(uint64(res.ChangedBytes)), float64(res.DiskBytes)/float64(res.ChangedBytes))
	}
	return nil
}

// runVOSDCmd is `cairn bench --op vosd`.
func runVOSDCmd(cmd *cobra.Command, size int64, conc int, space string, asJSON bool) error {
	f := cmd.Flags()
	objects, _ := f.GetInt("objects")
	if !f.Changed("objects") {
		objects = 100
	}
	if !f.Changed("size") {
		size = 4 << 20
	}
	if !f.Changed("concurrency") {
		conc = 8
	}
	rounds, _ := f.GetInt("rounds")
	mods, _ := f.GetInt("mods")
	modS, _ := f.GetString("mod-size")
	modSize, err := parseSize(modS)
	if err != nil {
		return usageError{err}
	}
	dataDir, _ := f.GetString("data-dir")
	o, err := clientOptions(cmd)
	if err != nil {
		return err
	}
	c, err := client.DialOptions(cmd.Context(), o)
	if err != nil {
		return err
	}
	defer c.Close()
	res, err := runVOSD(cmd.Context(), c, space, objects, size, rounds, mods, modSize, conc, dataDir, func(s string) {
		if !asJSON && isTerminal(cmdStderr(cmd)) {
			fmt.Fprint(cmd.ErrOrStderr(), s)
		}
	})
	if err != nil {
		return err
	}
	return printVOSD(cmd, res, asJSON)
}
