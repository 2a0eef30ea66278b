package api

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestAuthCache(t *testing.T) {
	t.Parallel()
	now := time.Now()
	c := newAuthCache(10*time.Second, 2)
	a, b, d := [32]byte{1}, [32]byte{2}, [32]byte{3}

	_, ok := c.get(a, now)
	require.False(t, ok)
	c.put(a, 7, now)
	id, ok := c.get(a, now.Add(9*time.Second))
	require.True(t, ok)
	require.EqualValues(t, 7, id)
	_, ok = c.get(a, now.Add(11*time.Second))
	require.False(t, ok, "entries expire after the TTL")

	c.put(b, 8, now)
	c.put(d, 9, now) // over the bound: starts over rather than growing
	require.LessOrEqual(t, c.size.Load(), int64(2))
	n := 0
	c.entries.Range(func(_, _ any) bool { n++; return true })
	require.LessOrEqual(t, n, 2)
	id, ok = c.get(d, now)
	require.True(t, ok)
	require.EqualValues(t, 9, id)

	c.put(d, 10, now) // the same key again: replaced, not counted twice
	require.EqualValues(t, 1, c.size.Load())

	off := newAuthCache(0, 2)
	off.put(a, 1, now)
	_, ok = off.get(a, now)
	require.False(t, ok, "a zero TTL disables the cache")
}

// TestAuthCacheHitAllocatesNothing: every authenticated request looks its
// key up, so a hit must cost no allocation (not parallel: AllocsPerRun
// counts the whole process's).
func TestAuthCacheHitAllocatesNothing(t *testing.T) {
	now := time.Now()
	c := newAuthCache(10*time.Second, 10)
	c.put([32]byte{1}, 7, now)
	require.Zero(t, testing.AllocsPerRun(100, func() {
		if _, ok := c.get([32]byte{1}, now); !ok {
			t.Fatal("a miss")
		}
	}))
}
