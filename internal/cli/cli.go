// Package cli is paymentsd's command line: migrate, users create, serve,
// stripefake, keys list and keys resolve, as docs/configuration.md's
// Command line fixes them, plus help and version.
//
// Every command answers --help (or -h) on stdout with exit code 0: its
// usage, flags, the environment it reads and an example. A command line
// that does not parse gets one line naming what is wrong and the command's
// usage on stderr, with exit code 2. A command that fails while running
// logs the error and exits 1.
package cli

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"regexp"
	"slices"
	"strings"

	"github.com/rs/zerolog"

	"github.com/paymentsd/paymentsd/internal/logging"
)

// usageError is a command line that does not parse. Its message says what
// is wrong.
type usageError struct{ msg string }

func (e *usageError) Error() string { return e.msg }

// usageErrorf returns a usageError with a formatted message.
func usageErrorf(format string, args ...any) error {
	return &usageError{fmt.Sprintf(format, args...)}
}

// helpRequest is the answer of a command asked for --help: its flags, to
// list in its help. Before a command is found, group names the commands
// whose list is asked for ("keys"; empty: all).
type helpRequest struct {
	flags *flag.FlagSet
	group string
}

func (*helpRequest) Error() string { return "help requested" }

// Run runs the command in args (without the program name) and returns the
// process exit code.
func Run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd, rest, err := lookup(args)
	var usage *usageError
	var help *helpRequest
	switch {
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "paymentsd: %s\n\n", usage.msg)
		writeOverview(stderr, "")
		return 2
	case errors.As(err, &help): // paymentsd --help, paymentsd keys --help
		writeOverview(stdout, help.group)
		return 0
	}
	if cmd.run == nil { // help, version: nothing to log
		if asksForHelp(rest) {
			cmd.writeHelp(stdout, nil)
			return 0
		}
		return cmd.builtin(rest, stdout, stderr)
	}

	log := zerolog.Nop()
	if !asksForHelp(rest) {
		if log, err = logging.New(stderr); err != nil {
			fmt.Fprintf(stderr, "paymentsd: %v\n", err)
			return 1
		}
	}
	err = cmd.run(ctx, rest, stdout, log)
	switch {
	case err == nil:
		return 0
	case errors.As(err, &help):
		cmd.writeHelp(stdout, help.flags)
		return 0
	case errors.As(err, &usage):
		fmt.Fprintf(stderr, "paymentsd %s: %s\nusage: %s\nRun 'paymentsd %s --help' for its flags, environment and an example.\n",
			cmd.name, usage.msg, cmd.usageLine(), cmd.name)
		return 2
	}
	log.Error().Err(err).Msg("paymentsd failed")
	return 1
}

// lookup finds the command args name and returns it with the arguments that
// follow its name. It answers a helpRequest for `paymentsd --help` and for
// a group without its subcommand asked for help (`paymentsd keys --help`).
func lookup(args []string) (*command, []string, error) {
	if len(args) == 0 {
		return nil, nil, usageErrorf("no command given")
	}
	first := args[0]
	if isHelpFlag(first) {
		return nil, nil, &helpRequest{}
	}
	if first == "--version" {
		return commandNamed("version"), args[1:], nil
	}
	if len(args) > 1 && !strings.HasPrefix(args[1], "-") {
		if cmd := commandNamed(first + " " + args[1]); cmd != nil {
			return cmd, args[2:], nil
		}
	}
	if cmd := commandNamed(first); cmd != nil {
		return cmd, args[1:], nil
	}
	if subs := subcommands(first); len(subs) > 0 {
		if len(args) > 1 && isHelpFlag(args[1]) {
			return nil, nil, &helpRequest{group: first}
		}
		if len(args) == 1 {
			return nil, nil, usageErrorf("%s needs a subcommand: %s", first, strings.Join(subs, " or "))
		}
		return nil, nil, usageErrorf("unknown subcommand %q of %s: use %s", args[1], first, strings.Join(subs, " or "))
	}
	if strings.HasPrefix(first, "-") {
		return nil, nil, usageErrorf("unknown flag %s before the command", first)
	}
	return nil, nil, usageErrorf("unknown command %q", first)
}

func isHelpFlag(arg string) bool {
	return arg == "-h" || arg == "-help" || arg == "--help"
}

// asksForHelp reports whether args ask for help (before a "--").
func asksForHelp(args []string) bool {
	for _, a := range args {
		if a == "--" {
			return false
		}
		if isHelpFlag(a) {
			return true
		}
	}
	return false
}

// newFlagSet returns an empty flag set for the command name, which reports
// its errors to parseArgs rather than printing them.
func newFlagSet(name string) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.Usage = func() {}
	return fs
}

// oneDashFlag finds a flag named as the flag package names it in its
// errors: "flag needs an argument: -email", "invalid value … for flag -user".
var oneDashFlag = regexp.MustCompile(`(: |flag |for )-([a-z])`)

// parseArgs parses args with fs, flags and positional arguments in any
// order (`keys resolve 42 --as not-charged`), and returns the positional
// ones. After "--" everything is positional. It answers a helpRequest for
// -h or --help, and a usageError naming the flag for anything else wrong.
func parseArgs(fs *flag.FlagSet, args []string) ([]string, error) {
	var positional []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, &helpRequest{flags: fs}
			}
			// The flag package names flags with one dash; the help, with two.
			msg := strings.Replace(err.Error(), "flag provided but not defined", "unknown flag", 1)
			msg = oneDashFlag.ReplaceAllString(msg, "$1--$2")
			return nil, usageErrorf("%s", msg)
		}
		rest := fs.Args()
		if len(rest) == 0 {
			return positional, nil
		}
		if consumed := args[:len(args)-len(rest)]; len(consumed) > 0 && consumed[len(consumed)-1] == "--" {
			return append(positional, rest...), nil
		}
		positional = append(positional, rest[0])
		args = rest[1:]
	}
}

// oneOf checks that value is one of allowed, for flag or argument what.
func oneOf(what, value string, allowed ...string) error {
	if slices.Contains(allowed, value) {
		return nil
	}
	return usageErrorf("%s must be %s, got %q", what, strings.Join(allowed, " or "), value)
}

// noMoreArgs refuses positional arguments a command does not take.
func noMoreArgs(args []string) error {
	if len(args) > 0 {
		return usageErrorf("unexpected argument %q", args[0])
	}
	return nil
}
