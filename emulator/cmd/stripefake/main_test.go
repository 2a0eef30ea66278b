package main

import (
	"bytes"
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// A command line that does not parse names what is wrong, on stderr, with
// exit code 2; nothing is served.
func TestUsageErrors(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr"}, "flag needs an argument: --addr"},
		{[]string{"--bogus"}, "unknown flag: --bogus"},
		{[]string{"now"}, `unexpected argument "now"`},
		{[]string{"--webhook-url", "http://127.0.0.1:8080/webhooks/stripe"}, "--webhook-url needs --webhook-secret"},
		{[]string{"--webhook-secret", "whsec_x"}, "--webhook-secret needs --webhook-url"},
		{[]string{"--webhook-url", "http://a/", "--webhook-secret", "s", "--webhook-latency", "-1s"}, "--webhook-latency must not be negative, got -1s"},
		{[]string{"--webhook-url", "127.0.0.1:8080", "--webhook-secret", "whsec_x"}, `--webhook-url must be http or https URLs, got "127.0.0.1:8080"`},
	} {
		var stdout, stderr bytes.Buffer
		code := run(context.Background(), tc.args, &stdout, &stderr)
		require.Equal(t, 2, code, "%v: %s", tc.args, stderr.String())
		require.Empty(t, stdout.String(), tc.args)
		require.Contains(t, stderr.String(), tc.want, tc.args)
		require.Contains(t, stderr.String(), "usage: stripefake", tc.args)
	}
}

func TestHelp(t *testing.T) {
	t.Parallel()
	for _, arg := range []string{"-h", "--help"} {
		var stdout, stderr bytes.Buffer
		require.Equal(t, 0, run(context.Background(), []string{arg}, &stdout, &stderr))
		require.Empty(t, stderr.String())
		for _, want := range []string{"usage: stripefake", "--addr A", "(default 127.0.0.1:12111)", "--webhook-url U",
			"--webhook-secret S", "--webhook-latency D", "(default 100ms)", "PAYMENTSD_LOG_LEVEL", "Example:"} {
			require.Contains(t, stdout.String(), want)
		}
	}
}

// Given a free address it serves until its context ends, then exits 0.
func TestServesUntilStopped(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	var stdout bytes.Buffer
	stderr := &lockedBuffer{}
	done := make(chan int)
	go func() { done <- run(ctx, []string{"--addr", "127.0.0.1:0"}, &stdout, stderr) }()
	require.Eventually(t, func() bool { return strings.Contains(stderr.String(), "stripefake listening") }, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.Equal(t, 0, <-done, stderr.String())
}

// lockedBuffer is a buffer one goroutine writes while another reads it.
type lockedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *lockedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *lockedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}
