package cli

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
)

// emulatorProgram is the Stripe emulator's program, built from the
// emulator/ module.
const emulatorProgram = "stripefake"

// stripefakeCmd is `paymentsd stripefake`, the contract's command for the
// Stripe emulator. The emulator is tooling, a module of its own, and
// paymentsd links none of it: the command runs the emulator's program with
// the same arguments in place of this process, so that its flags, its
// logs, its signals and its exit code are the program's own. The program is
// looked for beside this binary (make build puts both in bin/), then on
// PATH.
func stripefakeCmd(args []string, _, stderr io.Writer) int {
	path, err := emulatorPath()
	if err == nil {
		// Returns only if the program could not be run.
		err = execProgram(path, append([]string{path}, args...), os.Environ())
		err = fmt.Errorf("running %s: %w", path, err)
	}
	fmt.Fprintf(stderr, "paymentsd stripefake: %v\n", err)
	return 1
}

// emulatorPath finds the emulator's program: beside this binary, or on PATH.
func emulatorPath() (string, error) {
	if exe, err := os.Executable(); err == nil {
		if path, err := exec.LookPath(filepath.Join(filepath.Dir(exe), emulatorProgram)); err == nil {
			return path, nil
		}
	}
	if path, err := exec.LookPath(emulatorProgram); err == nil {
		return path, nil
	}
	return "", errors.New("the Stripe emulator is not part of paymentsd, and its program, stripefake, is neither beside " +
		"this binary nor on PATH: make build builds it into bin/ (or go -C emulator build ./cmd/stripefake)")
}
