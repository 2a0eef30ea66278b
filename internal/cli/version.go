package cli

import (
	"fmt"
	"io"
	"runtime"
	"runtime/debug"
)

// version and commit name the build where Go's own build information has
// none (a build outside a git checkout, such as a container build without
// .git): set them with
//
//	go build -ldflags "-X github.com/paymentsd/paymentsd/internal/cli.version=v1.2.3 -X github.com/paymentsd/paymentsd/internal/cli.commit=$(git rev-parse HEAD)"
//
// Otherwise `go build` records both: the module's version (a pseudo-version
// from the commit, "+dirty" with uncommitted changes) and the VCS settings.
var (
	version string
	commit  string
)

// buildInfo is what `paymentsd version` reports.
type buildInfo struct {
	Version  string // v1.2.3, a pseudo-version, or "devel"
	Commit   string // the full revision, or "unknown"
	Time     string // the commit's time, if known
	Modified bool   // built with uncommitted changes
	Go       string
}

func readBuildInfo() buildInfo {
	b := buildInfo{Version: version, Commit: commit, Go: runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		if b.Version == "" && info.Main.Version != "" && info.Main.Version != "(devel)" {
			b.Version = info.Main.Version
		}
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				if b.Commit == "" {
					b.Commit = s.Value
				}
			case "vcs.time":
				b.Time = s.Value
			case "vcs.modified":
				b.Modified = s.Value == "true"
			}
		}
	}
	if b.Version == "" {
		b.Version = "devel"
	}
	if b.Commit == "" {
		b.Commit = "unknown"
	}
	return b
}

// versionCmd is `paymentsd version`.
func versionCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) > 0 {
		fmt.Fprintf(stderr, "paymentsd version: unexpected argument %q\nusage: paymentsd version\n", args[0])
		return 2
	}
	b := readBuildInfo()
	fmt.Fprintf(stdout, "paymentsd %s\ncommit %s", b.Version, b.Commit)
	if b.Time != "" {
		fmt.Fprintf(stdout, " (%s)", b.Time)
	}
	if b.Modified {
		fmt.Fprint(stdout, ", with uncommitted changes")
	}
	fmt.Fprintf(stdout, "\n%s %s/%s\n", b.Go, runtime.GOOS, runtime.GOARCH)
	return 0
}
