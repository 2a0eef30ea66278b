package main

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
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
		{[]string{"--authorization-window", "0s"}, "--authorization-window must be positive, got 0s"},
		{[]string{"--search-rate", "-1"}, "--search-rate must not be negative, got -1"},
		{[]string{"--authorization-window", "soon"}, `invalid value "soon" for flag --authorization-window`},
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
			"--webhook-secret S", "--webhook-latency D", "(default 100ms)", "--authorization-window D", "(default 168h0m0s)", "--search-rate N",
			"PAYMENTSD_LOG_LEVEL", "Example:"} {
			require.Contains(t, stdout.String(), want)
		}
	}
}

// Given a free address it serves the emulator until its context ends, then
// exits 0.
func TestServesUntilStopped(t *testing.T) {
	t.Parallel()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	addr := ln.Addr().String()
	require.NoError(t, ln.Close())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan int)
	go func() { done <- run(ctx, []string{"--addr", addr}, io.Discard, io.Discard) }()
	require.Eventually(t, func() bool {
		resp, err := http.Get("http://" + addr + "/_fake/stats")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	}, 10*time.Second, 10*time.Millisecond)
	cancel()
	require.Equal(t, 0, <-done)
}
