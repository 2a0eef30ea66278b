package chaos

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"
)

// Slot is one `paymentsd serve` process at a fixed address. The address
// survives restarts, so the clients' list of processes never changes: a
// request to a dead process fails like a request through a load balancer
// that has not noticed yet.
type Slot struct {
	Proc *Proc
	Addr string

	mu     sync.Mutex // serializes the controller and the supervisor
	wantUp bool
}

// URL is the base URL of the slot's process.
func (s *Slot) URL() string { return "http://" + s.Addr }

// Fleet is the set of serve processes.
type Fleet struct {
	Slots  []*Slot
	Events *Events

	mu     sync.Mutex
	exited []int // pids of the processes that exited on their own
}

// Pids are the pids of the processes running now.
func (f *Fleet) Pids() []int {
	var pids []int
	for _, s := range f.Slots {
		if s.Proc.Running() {
			pids = append(pids, s.Proc.Pid())
		}
	}
	return pids
}

// ExitedOnTheirOwn are the pids of the processes that exited although they
// should have run (not killed, not stopped), so far.
func (f *Fleet) ExitedOnTheirOwn() []int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return append([]int(nil), f.exited...)
}

// StartAll starts every process and waits until each is ready.
func (f *Fleet) StartAll(ctx context.Context) error {
	for _, s := range f.Slots {
		s.mu.Lock()
		s.wantUp = true
		err := s.Proc.Start()
		s.mu.Unlock()
		if err != nil {
			return err
		}
	}
	return f.WaitReady(ctx, 30*time.Second)
}

// Kill SIGKILLs the slot's process and keeps the supervisor from restarting
// it until Restart.
func (f *Fleet) Kill(s *Slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wantUp = false
	pid := s.Proc.Pid()
	if err := s.Proc.Kill(); err != nil {
		return err
	}
	f.Events.Logf(EventKill, "SIGKILL %s (pid %d, %s)", s.Proc.Name, pid, s.Addr)
	return nil
}

// Restart starts the slot's process again after a Kill.
func (f *Fleet) Restart(s *Slot) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wantUp = true
	if s.Proc.Running() {
		return nil
	}
	if err := s.Proc.Start(); err != nil {
		return err
	}
	f.Events.Logf(EventRestart, "started %s again (pid %d)", s.Proc.Name, s.Proc.Pid())
	return nil
}

// Supervise restarts, until ctx ends, any process that exited although it
// should run (one that could not reach Postgres at startup, say), as a
// service manager would.
func (f *Fleet) Supervise(ctx context.Context) {
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		for _, s := range f.Slots {
			f.revive(s)
		}
	}
}

func (f *Fleet) revive(s *Slot) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.wantUp || s.Proc.Running() {
		return
	}
	f.Events.Logf(EventExit, "%s (pid %d) exited on its own: %s; restarting it", s.Proc.Name, s.Proc.Pid(), s.Proc.ExitStatus())
	f.mu.Lock()
	f.exited = append(f.exited, s.Proc.Pid())
	f.mu.Unlock()
	if err := s.Proc.Start(); err != nil {
		f.Events.Logf(EventHarnessErr, "%v", err)
		return
	}
	f.Events.Logf(EventRestart, "started %s again (pid %d)", s.Proc.Name, s.Proc.Pid())
}

// EnsureUp starts every process that is down and waits until all are ready.
func (f *Fleet) EnsureUp(ctx context.Context, timeout time.Duration) error {
	for _, s := range f.Slots {
		f.revive(s)
		if err := f.Restart(s); err != nil {
			return err
		}
	}
	return f.WaitReady(ctx, timeout)
}

// WaitReady polls every process's /readyz until all answer 200, reviving
// processes that exit meanwhile.
func (f *Fleet) WaitReady(ctx context.Context, timeout time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	client := &http.Client{Timeout: 2 * time.Second}
	for _, s := range f.Slots {
		for {
			if ready(ctx, client, s.URL()+"/readyz") {
				break
			}
			f.revive(s)
			select {
			case <-ctx.Done():
				return fmt.Errorf("%s at %s did not become ready within %s (see %s)", s.Proc.Name, s.Addr, timeout, s.Proc.LogPath)
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	return nil
}

func ready(ctx context.Context, client *http.Client, url string) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return false
	}
	resp, err := client.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// StopAll stops every process gracefully, within grace each.
func (f *Fleet) StopAll(grace time.Duration) error {
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
	)
	for _, s := range f.Slots {
		s.mu.Lock()
		s.wantUp = false
		s.mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			if err := s.Proc.Stop(grace); err != nil {
				mu.Lock()
				errs = append(errs, err)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	return errors.Join(errs...)
}
