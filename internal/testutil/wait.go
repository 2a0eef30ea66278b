package testutil

import (
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"
)

// WaitFor calls cond on the calling goroutine, at once and then every
// interval, until it returns true, and stops the test with t.Fatalf if it
// has not within timeout.
//
// Use it instead of testify's Eventually, which calls its condition on
// another goroutine: a condition that calls require.* or a helper that stops
// the test (Service.PostPayment, Service.Do, ...) must run on the test
// goroutine, the only one FailNow may be called from.
func WaitFor(t testing.TB, timeout, every time.Duration, cond func() bool) {
	t.Helper()
	WaitForf(t, timeout, every, cond, "")
}

// WaitForf is WaitFor with a message for when time runs out. args are
// formatted only then, so a fmt.Stringer among them can describe the state
// at the deadline rather than at the start.
func WaitForf(t testing.TB, timeout, every time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		left := time.Until(deadline)
		if left <= 0 {
			msg := fmt.Sprintf("condition not met within %s", timeout)
			if format != "" {
				msg += ": " + fmt.Sprintf(format, args...)
			}
			t.Fatal(msg)
		}
		time.Sleep(min(every, left))
	}
}

// Go runs fn on a new goroutine, for work a test starts and waits for later
// (a request held at the emulator until the test releases it, racers
// started together), and returns the function that waits for fn's result.
//
// fn gets its own testing.TB, to pass to require.* and to helpers: FailNow
// must be called on the test goroutine, so on this one Fatal, Fatalf,
// FailNow and Skip* report the failure as Errorf would (which any goroutine
// may) and end fn there. Call wait on the test goroutine: it returns fn's
// result, or stops the test if fn was ended early. A test that ends before
// waiting for fn should have failed already; if it has not, it fails, and
// whatever fn reports afterwards is dropped.
func Go[T any](t testing.TB, fn func(t testing.TB) T) (wait func() T) {
	t.Helper()
	g := &goroutineTB{TB: t}
	var (
		done      = make(chan struct{})
		result    T
		completed bool
	)
	go func() {
		defer close(done)
		result = fn(g)
		completed = true
	}()
	t.Cleanup(func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.ended = true
		select {
		case <-done:
		default:
			if !t.Failed() {
				t.Error("testutil.Go: the test ended without waiting for its goroutine")
			}
		}
	})
	return func() T {
		t.Helper()
		<-done
		if !completed {
			t.FailNow() // fn's failure is already reported
		}
		return result
	}
}

// goroutineTB is the testing.TB of a goroutine started by Go: what would
// stop the test instead marks it failed and ends the goroutine.
type goroutineTB struct {
	testing.TB

	mu    sync.Mutex
	ended bool // the test is over: testing panics on a report now
}

// report runs a report on the test unless the test is over.
func (g *goroutineTB) report(do func()) {
	g.TB.Helper()
	g.mu.Lock()
	defer g.mu.Unlock()
	if !g.ended {
		do()
	}
}

func (g *goroutineTB) Error(args ...any) {
	g.TB.Helper()
	g.report(func() { g.TB.Helper(); g.TB.Error(args...) })
}

func (g *goroutineTB) Errorf(format string, args ...any) {
	g.TB.Helper()
	g.report(func() { g.TB.Helper(); g.TB.Errorf(format, args...) })
}

func (g *goroutineTB) Fail() {
	g.report(g.TB.Fail)
}

func (g *goroutineTB) FailNow() {
	g.Fail()
	runtime.Goexit()
}

func (g *goroutineTB) Fatal(args ...any) {
	g.TB.Helper()
	g.Error(args...)
	runtime.Goexit()
}

func (g *goroutineTB) Fatalf(format string, args ...any) {
	g.TB.Helper()
	g.Errorf(format, args...)
	runtime.Goexit()
}

func (g *goroutineTB) Log(args ...any) {
	g.TB.Helper()
	g.report(func() { g.TB.Helper(); g.TB.Log(args...) })
}

func (g *goroutineTB) Logf(format string, args ...any) {
	g.TB.Helper()
	g.report(func() { g.TB.Helper(); g.TB.Logf(format, args...) })
}

func (g *goroutineTB) Skip(args ...any) {
	g.TB.Helper()
	g.Errorf("Skip called off the test goroutine: %s", fmt.Sprint(args...))
	runtime.Goexit()
}

func (g *goroutineTB) Skipf(format string, args ...any) {
	g.TB.Helper()
	g.Errorf("Skipf called off the test goroutine: "+format, args...)
	runtime.Goexit()
}

func (g *goroutineTB) SkipNow() {
	g.TB.Helper()
	g.Errorf("SkipNow called off the test goroutine")
	runtime.Goexit()
}
