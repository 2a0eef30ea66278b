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
	require.LessOrEqual(t, len(c.entries), 2)
	id, ok = c.get(d, now)
	require.True(t, ok)
	require.EqualValues(t, 9, id)

	off := newAuthCache(0, 2)
	off.put(a, 1, now)
	_, ok = off.get(a, now)
	require.False(t, ok, "a zero TTL disables the cache")
}
