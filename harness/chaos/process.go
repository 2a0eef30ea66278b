package chaos

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// Proc is a child process the harness may start, kill and start again under
// the same name, arguments and environment. Its stdout and stderr go to one
// log file, appended to across restarts, with a harness line marking each
// start and exit.
type Proc struct {
	Name    string
	Path    string
	Args    []string
	Env     []string
	LogPath string

	mu     sync.Mutex
	cmd    *exec.Cmd
	done   chan struct{} // closed when the current process exited
	exit   error         // its exit status, once done
	starts int
}

// Start starts the process. It fails if the process is already running.
func (p *Proc) Start() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.runningLocked() {
		return fmt.Errorf("%s is already running", p.Name)
	}
	log, err := os.OpenFile(p.LogPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return err
	}
	p.starts++
	fmt.Fprintf(log, "=== chaos harness: start #%d of %s at %s ===\n", p.starts, p.Name, time.Now().Format(time.RFC3339Nano))
	cmd := exec.Command(p.Path, p.Args...)
	cmd.Env = p.Env
	cmd.Stdout, cmd.Stderr = log, log
	// Its own process group, so a Ctrl-C at the terminal reaches only the
	// harness, which then stops its children in order; and killed with the
	// harness should the harness die.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		log.Close()
		return fmt.Errorf("error starting %s: %w", p.Name, err)
	}
	done := make(chan struct{})
	p.cmd, p.done, p.exit = cmd, done, nil
	go func() {
		err := cmd.Wait()
		fmt.Fprintf(log, "=== chaos harness: %s (pid %d) exited at %s: %v ===\n", p.Name, cmd.Process.Pid,
			time.Now().Format(time.RFC3339Nano), exitText(err))
		log.Close()
		p.mu.Lock()
		p.exit = err
		p.mu.Unlock()
		close(done)
	}()
	return nil
}

func exitText(err error) string {
	if err == nil {
		return "exit status 0"
	}
	return err.Error()
}

// Running reports whether the process is alive.
func (p *Proc) Running() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.runningLocked()
}

func (p *Proc) runningLocked() bool {
	if p.done == nil {
		return false
	}
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// Pid is the process id of the current or last process.
func (p *Proc) Pid() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cmd == nil || p.cmd.Process == nil {
		return 0
	}
	return p.cmd.Process.Pid
}

// ExitStatus describes how the last process ended.
func (p *Proc) ExitStatus() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return exitText(p.exit)
}

// Kill sends SIGKILL and waits until the process is gone.
func (p *Proc) Kill() error { return p.signalAndWait(syscall.SIGKILL, 0) }

// Stop sends SIGTERM, waits up to grace, then SIGKILLs.
func (p *Proc) Stop(grace time.Duration) error { return p.signalAndWait(syscall.SIGTERM, grace) }

func (p *Proc) signalAndWait(sig syscall.Signal, grace time.Duration) error {
	p.mu.Lock()
	cmd, done := p.cmd, p.done
	running := p.runningLocked()
	p.mu.Unlock()
	if !running {
		return nil
	}
	if err := cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("error signalling %s: %w", p.Name, err)
	}
	if sig == syscall.SIGKILL {
		<-done
		return nil
	}
	select {
	case <-done:
		return nil
	case <-time.After(grace):
	}
	_ = cmd.Process.Kill()
	<-done
	return fmt.Errorf("%s did not stop within %s of %s and was killed", p.Name, grace, sig)
}
