//go:build !unix

package cli

import "errors"

// execProgram replaces this process with the program at path: only on Unix.
var execProgram = func(path string, argv, env []string) error {
	return errors.New("paymentsd stripefake runs the emulator's program only on Unix: run it directly")
}
