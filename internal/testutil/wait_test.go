package testutil

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// recorder is a testing.TB that records failures instead of failing the
// test, and whose FailNow and Fatal* end the calling goroutine as
// testing's do.
type recorder struct {
	testing.TB

	mu       sync.Mutex
	failed   bool
	errors   []string
	failNows int
}

func (r *recorder) Errorf(format string, args ...any) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
	r.errors = append(r.errors, fmt.Sprintf(format, args...))
}

func (r *recorder) Error(args ...any) { r.Errorf("%s", fmt.Sprint(args...)) }

func (r *recorder) Fail() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.failed = true
}

func (r *recorder) Failed() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.failed
}

func (r *recorder) FailNow() {
	r.mu.Lock()
	r.failed = true
	r.failNows++
	r.mu.Unlock()
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Error(args...); r.FailNow() }

func (r *recorder) Fatalf(format string, args ...any) { r.Errorf(format, args...); r.FailNow() }

// onTestGoroutine runs f as a test function would run: on a goroutine that
// FailNow may end. It returns once f has returned or been ended.
func onTestGoroutine(f func()) {
	done := make(chan struct{})
	go func() {
		defer close(done)
		f()
	}()
	<-done
}

func TestWaitFor(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsOnceTheConditionHolds", func(t *testing.T) {
		t.Parallel()
		calls := 0
		WaitFor(t, 5*time.Second, time.Millisecond, func() bool {
			calls++ // not atomic: cond runs on this goroutine
			return calls == 3
		})
		require.Equal(t, 3, calls)
	})

	t.Run("ChecksAtOnce", func(t *testing.T) {
		t.Parallel()
		start := time.Now()
		WaitFor(t, 5*time.Second, time.Hour, func() bool { return true })
		require.Less(t, time.Since(start), time.Second)
	})

	t.Run("FailsWithTheMessageWhenTimeRunsOut", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		state := "starting"
		onTestGoroutine(func() {
			WaitForf(r, 20*time.Millisecond, time.Millisecond, func() bool {
				state = "stuck"
				return false
			}, "state: %v", stringer(func() string { return state }))
		})
		require.Equal(t, 1, r.failNows)
		require.Equal(t, []string{"condition not met within 20ms: state: stuck"}, r.errors,
			"the message is formatted at the deadline")
	})

	t.Run("ConditionMayStopTheTest", func(t *testing.T) {
		t.Parallel()
		r := &recorder{TB: t}
		onTestGoroutine(func() {
			WaitFor(r, 5*time.Second, time.Millisecond, func() bool {
				require.Equal(r, 1, 2)
				return true
			})
			r.Errorf("not reached")
		})
		require.Equal(t, 1, r.failNows)
		require.Len(t, r.errors, 1)
		require.Contains(t, r.errors[0], "Not equal")
	})
}

type stringer func() string

func (s stringer) String() string { return s() }

func TestGo(t *testing.T) {
	t.Parallel()

	t.Run("ReturnsTheResult", func(t *testing.T) {
		t.Parallel()
		release := make(chan struct{})
		wait := Go(t, func(t testing.TB) int {
			<-release
			return 42
		})
		close(release)
		require.Equal(t, 42, wait())
	})

	t.Run("FatalEndsTheGoroutineAndWaitStopsTheTest", func(t *testing.T) {
		t.Parallel()
		for name, fail := range map[string]func(t testing.TB){
			"Fatalf":  func(t testing.TB) { t.Fatalf("boom %d", 1) },
			"Fatal":   func(t testing.TB) { t.Fatal("boom 1") },
			"FailNow": func(t testing.TB) { t.Errorf("boom 1"); t.FailNow() },
			"require": func(t testing.TB) { require.Fail(t, "boom 1") },
			"SkipNow": func(t testing.TB) { t.SkipNow() },
		} {
			r := &recorder{TB: t}
			var wait func() int
			onTestGoroutine(func() {
				wait = Go(r, func(t testing.TB) int {
					fail(t)
					return 1
				})
			})
			require.Zero(t, r.failNows, "%s: the test goroutine goes on until it waits", name)
			var got int
			onTestGoroutine(func() { got = wait() })
			require.Equal(t, 1, r.failNows, name)
			require.Zero(t, got, name)
			require.Len(t, r.errors, 1, name)
			if name != "SkipNow" {
				require.Contains(t, r.errors[0], "boom 1", name)
			}
		}
	})
}
