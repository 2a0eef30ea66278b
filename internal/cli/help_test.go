package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/internal/config"
)

// runCLI runs the command line args; none of these tests needs a database.
func runCLI(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	code := Run(ctx, args, &stdout, &stderr)
	return code, stdout.String(), stderr.String()
}

var flagName = regexp.MustCompile(`(?m)^  (--[a-z-]+)`)

// Every command answers --help on stdout with exit 0: usage, flags, the
// environment it reads and an example. Each flag it lists is in its usage
// line, so a flag added to a command shows in both.
func TestCommandHelp(t *testing.T) {
	t.Parallel()
	for _, c := range commands {
		for _, args := range [][]string{
			append(strings.Fields(c.name), "--help"),
			append(strings.Fields(c.name), "-h"),
			append([]string{"help"}, strings.Fields(c.name)...),
		} {
			code, stdout, stderr := runCLI(t, args...)
			require.Equal(t, 0, code, "%v: %s", args, stderr)
			require.Empty(t, stderr, args)
			require.True(t, strings.HasPrefix(stdout, "usage: paymentsd "+c.name), "%v:\n%s", args, stdout)
			require.Regexp(t, `\nExample:\n  .*paymentsd `, stdout, args)
			if c.run != nil {
				require.Contains(t, stdout, "\nEnvironment:\n", args)
				require.Contains(t, stdout, "PAYMENTSD_LOG_LEVEL", args)
			}
			usage := strings.SplitN(stdout, "\n", 2)[0]
			if flags, ok := strings.CutPrefix(stdout[strings.Index(stdout, "\n"):], "\n"); ok {
				if i := strings.Index(flags, "\nFlags:\n"); i >= 0 {
					for _, m := range flagName.FindAllStringSubmatch(flags[i:], -1) {
						if m[1] != "--" {
							require.Contains(t, usage, m[1], "%v: flag %s is missing from the usage line", args, m[1])
						}
					}
				}
			}
		}
		for _, name := range c.env {
			require.NotEmpty(t, envDocs[name], "%s reads %s, which has no description", c.name, name)
		}
	}

	code, stdout, _ := runCLI(t, "serve", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "--migrate")
	require.Contains(t, stdout, "STRIPE_WEBHOOK_SECRET")
	code, stdout, _ = runCLI(t, "keys", "list", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "--state STATE")
	require.Contains(t, stdout, "(default unfinished)")
}

func TestOverview(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		code, stdout, stderr := runCLI(t, args...)
		require.Equal(t, 0, code, args)
		require.Empty(t, stderr)
		for _, c := range commands {
			require.Contains(t, stdout, "paymentsd "+c.name, args)
		}
	}
	code, stdout, _ := runCLI(t, "keys", "--help")
	require.Equal(t, 0, code)
	require.Contains(t, stdout, "paymentsd keys list")
	require.Contains(t, stdout, "paymentsd keys resolve")
	require.NotContains(t, stdout, "paymentsd migrate")
}

// A command line that does not parse names what is wrong, on stderr, with
// exit code 2; nothing runs.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "no command given"},
		{[]string{"bogus"}, `unknown command "bogus"`},
		{[]string{"--bogus"}, "unknown flag --bogus before the command"},
		{[]string{"keys"}, "keys needs a subcommand: list or resolve"},
		{[]string{"users", "delete"}, `unknown subcommand "delete" of users: use create`},
		{[]string{"migrate", "sideways"}, `the direction must be up or down or status, got "sideways"`},
		{[]string{"migrate", "up", "now"}, `unexpected argument "now" after up`},
		{[]string{"users", "create"}, "--email is required"},
		{[]string{"users", "create", "--email", "ada"}, `--email must be an email address, got "ada"`},
		{[]string{"users", "create", "--email"}, "flag needs an argument: --email"},
		{[]string{"serve", "--bogus"}, "unknown flag: --bogus"},
		{[]string{"serve", "now"}, `unexpected argument "now"`},
		{[]string{"serve", "--migrate=maybe"}, `invalid boolean value "maybe" for --migrate`},
		{[]string{"keys", "list", "--state", "stale"}, `--state must be unfinished or needs-attention, got "stale"`},
		{[]string{"keys", "list", "--user", "ada"}, `--user must be a user id (a positive integer), got "ada"`},
		{[]string{"keys", "resolve"}, "missing the key ID"},
		{[]string{"keys", "resolve", "--as", "not-charged"}, "missing the key ID"},
		{[]string{"keys", "resolve", "x", "--as", "not-charged"}, `the key ID must be a positive integer, got "x"`},
		{[]string{"keys", "resolve", "1"}, "--as is required"},
		{[]string{"keys", "resolve", "1", "--as", "charged"}, "--as charged needs --payment-intent"},
		{[]string{"keys", "resolve", "1", "--as", "not-charged", "--payment-intent", "pi_x"}, "--as not-charged takes no --payment-intent"},
		{[]string{"keys", "resolve", "1", "--as", "maybe"}, `--as must be charged or not-charged, got "maybe"`},
		{[]string{"keys", "resolve", "1", "2", "--as", "not-charged"}, `unexpected argument "2"`},
		{[]string{"version", "now"}, `unexpected argument "now"`},
		{[]string{"help", "bogus"}, `unknown command "bogus"`},
	} {
		code, stdout, stderr := runCLI(t, tc.args...)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr)
		require.Empty(t, stdout, tc.args)
		require.Contains(t, stderr, tc.want, tc.args)
		require.Regexp(t, `(?i)usage:\s+paymentsd`, stderr, tc.args)
	}
}

func TestFlagsAndArgumentsInAnyOrder(t *testing.T) {
	t.Parallel()
	fs := newFlagSet("keys resolve")
	as := fs.String("as", "", "")
	pos, err := parseArgs(fs, []string{"42", "--as", "charged", "extra"})
	require.NoError(t, err)
	require.Equal(t, []string{"42", "extra"}, pos)
	require.Equal(t, "charged", *as)

	pos, err = parseArgs(newFlagSet("x"), []string{"--", "--as", "-h"})
	require.NoError(t, err)
	require.Equal(t, []string{"--as", "-h"}, pos)
}

func TestVersion(t *testing.T) {
	t.Parallel()
	for _, args := range [][]string{{"version"}, {"--version"}} {
		code, stdout, stderr := runCLI(t, args...)
		require.Equal(t, 0, code, stderr)
		lines := strings.Split(strings.TrimSpace(stdout), "\n")
		require.Len(t, lines, 3, stdout)
		require.Regexp(t, `^paymentsd \S+$`, lines[0])
		require.Regexp(t, `^commit \S+`, lines[1])
		require.Regexp(t, `^go1\.\d+`, lines[2])
	}

	version, commit = "v1.2.3", "0123456789abcdef0123456789abcdef01234567"
	t.Cleanup(func() { version, commit = "", "" })
	b := readBuildInfo()
	require.Equal(t, "v1.2.3", b.Version)
	require.Equal(t, "0123456789abcdef0123456789abcdef01234567", b.Commit)
}

// An unknown log level is refused before the command runs: nothing is
// migrated, served or listed at a level nobody asked for. Sets the
// environment, so not parallel.
func TestUnknownLogLevelIsRefused(t *testing.T) {
	t.Setenv("PAYMENTSD_LOG_LEVEL", "loud")
	t.Setenv("DATABASE_URL", "postgres://127.0.0.1:1/none")
	code, stdout, stderr := runCLI(t, "migrate", "status")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Equal(t, "paymentsd: PAYMENTSD_LOG_LEVEL must be one of trace, debug, info, warn, error (or unset for info), got \"loud\"\n", stderr)

	code, stdout, _ = runCLI(t, "migrate", "--help")
	require.Equal(t, 0, code, "help needs no valid environment")
	require.Contains(t, stdout, "usage: paymentsd migrate")
}

// River logs through the service's logger, in its shape.
func TestRiverLogsThroughTheServiceLogger(t *testing.T) {
	t.Parallel()
	var buf bytes.Buffer
	log := newTestLogger(&buf)
	opts := appOptions(&config.Config{}, log)
	opts.Workers.RiverLog.Info("below warn: dropped")
	opts.Workers.RiverLog.Error("River: job failed", "job_id", 7, "timeout", 90*time.Second)

	var line map[string]any
	require.NoError(t, json.Unmarshal(buf.Bytes(), &line), buf.String())
	require.Equal(t, "error", line["level"])
	require.Equal(t, "River: job failed", line["message"])
	require.Equal(t, "1m30s", line["timeout"])
	require.EqualValues(t, 7, line["job_id"])
	require.Contains(t, line, "time")
}
