package bench

import (
	"context"
	"fmt"
	"io"
	"math"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Profiler fetches the service's Go profiles from its pprof server
// (PAYMENTSD_PPROF_ADDR) while a run is measured, saves them, and reads
// them with `go tool pprof -top`.
type Profiler struct {
	// URL is the pprof server's base URL (http://host:port).
	URL string
	// Dir is where the profiles are saved.
	Dir string
	// Go is the go command, for `go tool pprof`.
	Go string
}

// profileKinds are the profiles fetched for a window, and how each is read:
// its pprof endpoint, then `go tool pprof` options and a title per summary.
var profileKinds = []struct {
	name, path string
	reads      [][2]string
}{
	{"cpu", "profile", [][2]string{{"", "CPU by flat time"}, {"-cum", "CPU by cumulative time"}}},
	{"allocs", "allocs", [][2]string{{"-sample_index=alloc_space", "bytes allocated, by flat"}}},
	// Most blocking is idle connections waiting for work: only the stacks
	// through paymentsd's own code say what a request waits for.
	{"block", "block", [][2]string{{"-cum -focus=github.com/paymentsd/paymentsd/", "time blocked under paymentsd's own calls, by cumulative"}}},
}

// During starts profiling a load run that begins now: after warmup it
// fetches a CPU profile for the window, and the allocations and blocking
// over the same window (delta profiles, ?seconds=). The returned function
// waits for the profiles and summarizes them. A profiler that fails
// records why and never fails the run.
func (p *Profiler) During(ctx context.Context, scenario string, conns int, warmup, window time.Duration) func() Profile {
	prof := Profile{Scenario: scenario, Conns: conns, Seconds: math.Max(1, math.Round(window.Seconds()))}
	if p == nil {
		return func() Profile { return prof }
	}
	done := make(chan struct{})
	files := make([]string, len(profileKinds))
	errs := make([]error, len(profileKinds))
	go func() {
		defer close(done)
		if err := sleep(ctx, warmup); err != nil {
			errs[0] = err
			return
		}
		var wg sync.WaitGroup
		for i, k := range profileKinds {
			files[i] = filepath.Join(p.Dir, fmt.Sprintf("%s-c%d.%s.pprof", scenario, conns, k.name))
			wg.Go(func() { errs[i] = p.fetch(ctx, k.path, prof.Seconds, files[i]) })
		}
		wg.Wait()
	}()
	return func() Profile {
		<-done
		var problems []string
		for i, k := range profileKinds {
			if errs[i] != nil {
				problems = append(problems, k.name+": "+errs[i].Error())
				continue
			}
			for _, read := range k.reads {
				text, err := p.top(ctx, files[i], read[0])
				if err != nil {
					problems = append(problems, k.name+": "+err.Error())
					break
				}
				prof.Tops = append(prof.Tops, ProfileTop{Title: read[1], Text: text})
			}
		}
		prof.Error = strings.Join(problems, "; ")
		return prof
	}
}

// fetch saves /debug/pprof/<path>?seconds=<secs> to file.
func (p *Profiler) fetch(ctx context.Context, path string, secs float64, file string) error {
	url := p.URL + "/debug/pprof/" + path + "?seconds=" + strconv.Itoa(int(secs))
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	client := &http.Client{Timeout: time.Duration(secs)*time.Second + 30*time.Second}
	resp, err := client.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		return fmt.Errorf("GET %s: %s: %s", url, resp.Status, strings.TrimSpace(string(b)))
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return err
	}
	f, err := os.Create(file)
	if err != nil {
		return err
	}
	if _, err := io.Copy(f, resp.Body); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// top is `go tool pprof -top -nodecount=25 [options] file`, without the
// lines that name the binary.
func (p *Profiler) top(ctx context.Context, file, options string) (string, error) {
	args := append([]string{"tool", "pprof", "-top", "-nodecount=25"}, strings.Fields(options)...)
	out, err := exec.CommandContext(ctx, p.Go, append(args, file)...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go tool pprof: %v: %s", err, tail(string(out), 5))
	}
	var keep []string
	for line := range strings.SplitSeq(strings.TrimRight(string(out), "\n"), "\n") {
		if strings.HasPrefix(line, "File: ") || strings.HasPrefix(line, "Build ID: ") {
			continue
		}
		keep = append(keep, line)
	}
	return strings.Join(keep, "\n"), nil
}
