package main

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// latencies collects samples and reports percentiles.
type latencies []time.Duration

func (l latencies) sorted() latencies {
	s := append(latencies(nil), l...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s
}

// pct returns the q-quantile (0..1) of sorted samples.
func (l latencies) pct(q float64) time.Duration {
	if len(l) == 0 {
		return 0
	}
	i := int(q*float64(len(l)) + 0.5)
	if i >= len(l) {
		i = len(l) - 1
	}
	return l[i]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// parseSize reads 1024, 4k, 4KiB, 16MiB, 1G (powers of 1024).
func parseSize(s string) (int64, error) {
	t := strings.ToLower(strings.TrimSpace(s))
	mult := int64(1)
	for _, u := range []struct {
		suf string
		m   int64
	}{{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30}, {"kb", 1 << 10}, {"mb", 1 << 20}, {"gb", 1 << 30}, {"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1}} {
		if strings.HasSuffix(t, u.suf) {
			t, mult = strings.TrimSuffix(t, u.suf), u.m
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
	if err != nil || n < 0 || n > (64<<30)/mult {
		return 0, fmt.Errorf("size %q: expected a number with an optional unit (KiB, MiB, GiB), at most 64 GiB", s)
	}
	return n * mult, nil
}
