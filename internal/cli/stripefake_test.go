package cli

import (
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// paymentsd stripefake runs the emulator's program, found on PATH here,
// with its own arguments, and links none of it. (Not parallel: it sets
// PATH and execProgram.)
func TestStripefakeRunsTheEmulatorsProgram(t *testing.T) {
	dir := t.TempDir()
	program := filepath.Join(dir, emulatorProgram)
	require.NoError(t, os.WriteFile(program, []byte("#!/bin/sh\n"), 0o755))
	t.Setenv("PATH", dir)
	var gotPath string
	var gotArgv []string
	saved := execProgram
	t.Cleanup(func() { execProgram = saved })
	execProgram = func(path string, argv, _ []string) error {
		gotPath, gotArgv = path, argv
		return errors.New("exec refused by the test")
	}

	args := []string{"--addr", "127.0.0.1:12111", "--webhook-url", "http://127.0.0.1:8080/webhooks/stripe", "--webhook-secret", "whsec_x"}
	code, stdout, stderr := runCLI(t, append([]string{"stripefake"}, args...)...)
	require.Equal(t, program, gotPath)
	require.Equal(t, append([]string{program}, args...), gotArgv)
	// Only an exec that failed comes back.
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "paymentsd stripefake: running "+program+": exec refused by the test")
}

// Without the emulator's program it says where to get it, and fails.
func TestStripefakeWithoutTheEmulatorsProgram(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	code, stdout, stderr := runCLI(t, "stripefake", "--addr", "127.0.0.1:12111")
	require.Equal(t, 1, code)
	require.Empty(t, stdout)
	require.Contains(t, stderr, "the Stripe emulator is not part of paymentsd")
	require.Contains(t, stderr, "make build")
}
