package cli

import (
	"context"
	"flag"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/rs/zerolog"
)

// command is one of paymentsd's commands: how it is called, what its help
// says, and what it runs.
type command struct {
	name    string   // as typed: "keys resolve"
	args    string   // what follows the name in its usage line
	summary string   // one line, for the overview
	about   string   // what it does, for its help
	env     []string // the variables it reads, named in envDocs
	example string
	// run runs the command with the arguments after its name. Its flags
	// are parsed by parseArgs, which answers --help.
	run func(ctx context.Context, args []string, stdout io.Writer, log zerolog.Logger) error
	// builtin runs a command that needs neither flags nor a logger.
	builtin func(args []string, stdout, stderr io.Writer) int
}

// The environment of each kind of command.
var (
	envDatabase = []string{"DATABASE_URL", "PAYMENTSD_LOG_LEVEL"}
	envStripe   = []string{"DATABASE_URL", "STRIPE_SECRET_KEY", "STRIPE_API_BASE", "PAYMENTSD_STRIPE_TIMEOUT",
		"PAYMENTSD_STRIPE_VISIBILITY_MARGIN", "PAYMENTSD_LOCK_TIMEOUT", "PAYMENTSD_LOG_LEVEL"}
	envServe = []string{"DATABASE_URL", "PAYMENTSD_ADDR", "STRIPE_SECRET_KEY", "STRIPE_API_BASE", "STRIPE_WEBHOOK_SECRET",
		"PAYMENTSD_LOCK_TIMEOUT", "PAYMENTSD_KEY_RETENTION", "PAYMENTSD_RATE_LIMIT", "PAYMENTSD_STRIPE_TIMEOUT",
		"PAYMENTSD_STRIPE_VISIBILITY_MARGIN", "PAYMENTSD_COMPLETER_INTERVAL", "PAYMENTSD_REAPER_INTERVAL",
		"PAYMENTSD_HEARTBEAT_INTERVAL", "PAYMENTSD_SHUTDOWN_GRACE", "PAYMENTSD_POLL_ONLY", "PAYMENTSD_LOG_LEVEL"}
)

// envDocs says what each variable does; the Configuration table of
// docs/configuration.md says it at length.
var envDocs = map[string]string{
	"DATABASE_URL":                       "Postgres connection string (required)",
	"PAYMENTSD_ADDR":                     "listen address (default 127.0.0.1:8080)",
	"STRIPE_SECRET_KEY":                  "Stripe secret key; required unless STRIPE_API_BASE is set",
	"STRIPE_API_BASE":                    "send every Stripe call to this base URL: the emulator, stripe-mock",
	"STRIPE_WEBHOOK_SECRET":              "signing secret of Stripe's webhooks (whsec_…); unset: no POST /webhooks/stripe",
	"PAYMENTSD_LOCK_TIMEOUT":             "lease length: after it an in-progress key may be taken over (default 90s)",
	"PAYMENTSD_KEY_RETENTION":            "how long finished keys are kept for replays (default 24h)",
	"PAYMENTSD_RATE_LIMIT":               "new idempotency keys per second per user; 0 turns it off (default 100)",
	"PAYMENTSD_STRIPE_TIMEOUT":           "bound on each Stripe call, shorter than the lease (default 30s)",
	"PAYMENTSD_STRIPE_VISIBILITY_MARGIN": "how long a Stripe write may stay invisible to a list (default 1m)",
	"PAYMENTSD_COMPLETER_INTERVAL":       "how often the completer looks for abandoned keys (default 10s)",
	"PAYMENTSD_REAPER_INTERVAL":          "how often expired finished keys become tombstones (default 1m)",
	"PAYMENTSD_HEARTBEAT_INTERVAL":       "instance heartbeat; leases go stale after three missed beats (default 5s)",
	"PAYMENTSD_SHUTDOWN_GRACE":           "on SIGINT/SIGTERM, how long work in flight gets to finish (default 30s)",
	"PAYMENTSD_POLL_ONLY":                "1: River polls instead of LISTEN, as it does by itself when DATABASE_URL's query exec mode is not cache_statement (PgBouncer)",
	"PAYMENTSD_LOG_LEVEL":                "trace, debug, info, warn or error (default info); logs are JSON on stderr",
}

// commands lists every command, in the order the overview shows them. It
// is set in init: help refers to it.
var commands []*command

func init() {
	commands = []*command{
		{
			name: "migrate", args: "[up|down|status]",
			summary: "apply the embedded migrations to DATABASE_URL",
			about: "Applies the embedded goose migrations to DATABASE_URL. up (the default) applies every pending one,\n" +
				"down rolls back the last one, status lists each with its applied time or \"pending\".",
			env:     envDatabase,
			example: "DATABASE_URL=postgres://postgres@127.0.0.1:55432/postgres paymentsd migrate",
			run: func(ctx context.Context, args []string, stdout io.Writer, _ zerolog.Logger) error {
				return migrateCmd(ctx, args, stdout)
			},
		},
		{
			name: "users create", args: "--email E",
			summary: `create a user; prints {"user_id","email","api_key"}`,
			about: "Creates a user and prints one JSON line to stdout: {\"user_id\":N,\"email\":\"E\",\"api_key\":\"pd_...\"}.\n" +
				"The API key is shown this once; the database stores only its SHA-256 hash.",
			env:     envDatabase,
			example: "paymentsd users create --email ada@example.com",
			run: func(ctx context.Context, args []string, stdout io.Writer, _ zerolog.Logger) error {
				return usersCreateCmd(ctx, args, stdout)
			},
		},
		{
			name: "serve", args: "[--migrate]",
			summary: "serve the HTTP API and the background workers",
			about: "Serves the HTTP API on PAYMENTSD_ADDR, and the background workers: receipts, the completer\n" +
				"and the reaper. It refuses to start while migrations are pending, unless --migrate applies them\n" +
				"first. SIGINT or SIGTERM stops it, after the work in flight (PAYMENTSD_SHUTDOWN_GRACE).",
			env:     envServe,
			example: "STRIPE_API_BASE=http://127.0.0.1:12111 DATABASE_URL=postgres://... paymentsd serve --migrate",
			run: func(ctx context.Context, args []string, _ io.Writer, log zerolog.Logger) error {
				return serveCmd(ctx, args, log)
			},
		},
		{
			name: "stripefake", args: "[--addr A] [--authorization-window D] [--search-rate N] [--webhook-url U --webhook-secret S [--webhook-latency D]]",
			summary: "serve the Stripe emulator (its own program, stripefake)",
			about: "Serves the stateful Stripe emulator: PaymentIntents and Refunds with Stripe's idempotency rules,\n" +
				"and admin endpoints under /_fake/ (stats, fault injection, events, disputes). They have no\n" +
				"authentication: keep it on loopback. With --webhook-url it signs a Stripe event for every state\n" +
				"change with --webhook-secret and POSTs it there, retrying until answered 2xx, each --webhook-latency\n" +
				"(default 100ms) after its change at the earliest; --addr defaults to 127.0.0.1:12111. A PaymentIntent\n" +
				"confirmed with capture_method=manual and not captured within --authorization-window (default\n" +
				"168h, Stripe's 7 days) is canceled as Stripe cancels it (cancellation_reason automatic). With\n" +
				"--search-rate N it refuses searches beyond N a second with Stripe's 429 rate_limit.\n\n" +
				"The emulator is tooling, not part of paymentsd: this runs its program, stripefake (built from the\n" +
				"emulator/ module, into bin/ by make build), found beside paymentsd or on PATH, in place of\n" +
				"paymentsd, with the same arguments. 'stripefake --help' lists its flags.",
			env:     []string{"PAYMENTSD_LOG_LEVEL"},
			example: "paymentsd stripefake --addr 127.0.0.1:12111 --webhook-url http://127.0.0.1:8080/webhooks/stripe --webhook-secret whsec_local",
			builtin: stripefakeCmd,
		},
		{
			name: "keys list", args: "[--state unfinished|needs-attention] [--user N]",
			summary: "unfinished keys, one JSON line each",
			about: "Prints unfinished idempotency keys, oldest first, one JSON line each (at most 10,000): every\n" +
				"unfinished key (the default) or only those parked for an operator, of every user or of one.",
			env:     envDatabase,
			example: "paymentsd keys list --state needs-attention --user 7",
			run: func(ctx context.Context, args []string, stdout io.Writer, _ zerolog.Logger) error {
				return keysListCmd(ctx, args, stdout)
			},
		},
		{
			name: "keys resolve", args: "ID --as charged --payment-intent PI | --as not-charged",
			summary: "settle a key that awaits an operator",
			about: "Settles key ID, parked for an operator (keys list --state needs-attention), after checking the\n" +
				"operator's word against Stripe: --as charged names the PaymentIntent that charged (for a refund\n" +
				"key, the Stripe Refund), --as not-charged says nothing was. It prints the answer the key replays\n" +
				"from then on, as one JSON line, and writes an audit record. See the runbook in docs/operations.md.",
			env:     envStripe,
			example: "paymentsd keys resolve 42 --as charged --payment-intent pi_3PqR8sLkdIwHu7ix1Kf0aBcD",
			run:     keysResolveCmd,
		},
		{
			name: "version", summary: "print the version and commit of this build",
			about:   "Prints the version and the commit this binary was built from, and the Go toolchain.",
			example: "paymentsd version",
			builtin: versionCmd,
		},
		{
			name: "help", args: "[COMMAND]", summary: "show the help of a command",
			about:   "Shows the help of COMMAND, or the list of commands.",
			example: "paymentsd help keys resolve",
			builtin: helpCmd,
		},
	}
}

// commandNamed returns the command called name, or nil.
func commandNamed(name string) *command {
	for _, c := range commands {
		if c.name == name {
			return c
		}
	}
	return nil
}

// subcommands lists the subcommands of group ("keys": list, resolve).
func subcommands(group string) []string {
	var subs []string
	for _, c := range commands {
		if sub, ok := strings.CutPrefix(c.name, group+" "); ok {
			subs = append(subs, sub)
		}
	}
	return subs
}

func (c *command) usageLine() string {
	return strings.TrimSpace("paymentsd " + c.name + " " + c.args)
}

// writeOverview lists the commands, or only those of group when it is set
// ("keys").
func writeOverview(w io.Writer, group string) {
	fmt.Fprint(w, "paymentsd is a payments API that charges a card through Stripe exactly once per Idempotency-Key.\n\nUsage:\n")
	for _, c := range commands {
		if group == "" || strings.HasPrefix(c.name, group+" ") {
			fmt.Fprintf(w, "  %s\n        %s\n", c.usageLine(), c.summary)
		}
	}
	fmt.Fprint(w, "\nRun 'paymentsd COMMAND --help' for a command's flags, the environment it reads and an example.\n")
}

// writeHelp writes the help of c, listing the flags of fs (nil: none).
func (c *command) writeHelp(w io.Writer, fs *flag.FlagSet) {
	fmt.Fprintf(w, "usage: %s\n\n%s\n", c.usageLine(), c.about)
	if fs != nil {
		var lines []string
		fs.VisitAll(func(f *flag.Flag) {
			name, usage := flag.UnquoteUsage(f)
			line := "  --" + f.Name
			if name != "" {
				line += " " + name
			}
			line += "\t" + usage
			if f.DefValue != "" && f.DefValue != "false" {
				line += fmt.Sprintf(" (default %s)", f.DefValue)
			}
			lines = append(lines, line)
		})
		if len(lines) > 0 {
			fmt.Fprint(w, "\nFlags:\n")
			tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
			for _, l := range lines {
				fmt.Fprintln(tw, l)
			}
			_ = tw.Flush()
		}
	}
	if len(c.env) > 0 {
		fmt.Fprint(w, "\nEnvironment:\n")
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
		for _, name := range c.env {
			fmt.Fprintf(tw, "  %s\t%s\n", name, envDocs[name])
		}
		_ = tw.Flush()
	}
	fmt.Fprintf(w, "\nExample:\n  %s\n", c.example)
}

// helpCmd is `paymentsd help [COMMAND]`.
func helpCmd(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		writeOverview(stdout, "")
		return 0
	}
	name := strings.Join(args, " ")
	c := commandNamed(name)
	if c == nil {
		if len(subcommands(name)) > 0 {
			writeOverview(stdout, name)
			return 0
		}
		fmt.Fprintf(stderr, "paymentsd help: unknown command %q\n\n", name)
		writeOverview(stderr, "")
		return 2
	}
	if c.run == nil {
		c.writeHelp(stdout, nil)
		return 0
	}
	// A command lists its flags by answering --help.
	if err := c.run(context.Background(), []string{"--help"}, io.Discard, zerolog.Nop()); err != nil {
		if help, ok := err.(*helpRequest); ok {
			c.writeHelp(stdout, help.flags)
			return 0
		}
	}
	c.writeHelp(stdout, nil)
	return 0
}
