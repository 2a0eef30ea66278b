//go:build unix

package cli

import "syscall"

// execProgram replaces this process with the program at path; tests replace
// it.
var execProgram = syscall.Exec
