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
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Profiler fetches a process's Go profiles from its pprof server (the
// service's profiled build's -pprof, the bare's -pprof) while a run is
// measured, saves them, summarizes them with `go tool pprof -top`, and
// reads the CPU profile by bucket and the allocations' totals
// (profile_compare.go).
type Profiler struct {
	// URL is the pprof server's base URL (http://host:port).
	URL string
	// Dir is where the profiles are saved.
	Dir string
	// Go is the go command, for `go tool pprof`.
	Go string
	// Process is "bare" for the bare service, empty for the service; it
	// names the files and the Profiles.
	Process string
	// Kinds are the names of the profileKinds to fetch; nil fetches all.
	Kinds []string
}

// profileKinds are the profiles fetched for a window, and how each is read:
// its pprof endpoint, `go tool pprof` options and a title per summary, and
// what else reads it into the Profile.
var profileKinds = []struct {
	name, path string
	reads      [][2]string
	read       func(file string, p *Profile) error
}{
	{"cpu", "profile", [][2]string{{"", "CPU by flat time"}, {"-cum", "CPU by cumulative time"}},
		func(file string, p *Profile) (err error) { p.CPU, err = ReadCPU(file); return err }},
	{"allocs", "allocs", [][2]string{{"-sample_index=alloc_space", "bytes allocated, by flat"}},
		func(file string, p *Profile) (err error) { p.Allocs, err = ReadAllocations(file); return err }},
	// Most blocking is idle connections waiting for work: only the stacks
	// through paymentsd's own code say what a request waits for.
	{"block", "block", [][2]string{{"-cum -focus=github.com/paymentsd/paymentsd/", "time blocked under paymentsd's own calls, by cumulative"}}, nil},
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
	prof.Process = p.Process
	prefix := scenario
	if p.Process != "" {
		prefix = p.Process + "-" + scenario
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
			if !p.wants(k.name) {
				continue
			}
			files[i] = filepath.Join(p.Dir, fmt.Sprintf("%s-c%d.%s.pprof", prefix, conns, k.name))
			wg.Go(func() { errs[i] = p.fetch(ctx, k.path, prof.Seconds, files[i]) })
		}
		wg.Wait()
	}()
	return func() Profile {
		<-done
		var problems []string
		for i, k := range profileKinds {
			if !p.wants(k.name) {
				continue
			}
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
			if k.read != nil {
				if err := k.read(files[i], &prof); err != nil {
					problems = append(problems, k.name+": "+err.Error())
				}
			}
		}
		prof.Error = strings.Join(problems, "; ")
		return prof
	}
}

// wants reports whether the profile kind is fetched.
func (p *Profiler) wants(kind string) bool {
	return p.Kinds == nil || slices.Contains(p.Kinds, kind)
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
