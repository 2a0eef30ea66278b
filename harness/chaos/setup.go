package chaos

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// User is an API user of the run, as `paymentsd users create` printed it.
type User struct {
	UserID int64  `json:"user_id"`
	Email  string `json:"email"`
	APIKey string `json:"api_key"`
}

// Rig is everything a run set up: the cluster, the database, the emulator,
// the serve processes and the users.
type Rig struct {
	Cfg     *Config
	Events  *Events
	Cluster *Cluster
	// Pair is the primary (Cluster) and its standby in a failover run.
	Pair     *Pair
	DBURL    string
	EmuProc  *Proc
	Emulator *Emulator
	Fleet    *Fleet
	Users    []User
	// Patroni is the cluster of a Patroni failover run (patroni.go).
	Patroni *PatroniCluster
}

// Setup brings the rig up. On error, Teardown still cleans up what started.
func Setup(ctx context.Context, cfg *Config, ev *Events) (*Rig, error) {
	r := &Rig{Cfg: cfg, Events: ev}
	if err := os.MkdirAll(cfg.LogDir, 0o755); err != nil {
		return r, err
	}
	r.Cluster = &Cluster{Script: cfg.PostgresScript(), PGData: cfg.PGData, Port: cfg.PGPort}
	if cfg.Failover.Patroni() {
		if err := r.startPatroni(ctx); err != nil {
			return r, err
		}
	} else if cfg.Failover != FailoverOff {
		r.Pair = &Pair{Mode: cfg.Failover, Primary: r.Cluster,
			Standby: &Cluster{Script: cfg.PostgresScript(), PGData: cfg.StandbyPGData, Port: cfg.StandbyPGPort}}
		if err := r.Pair.Start(ctx); err != nil {
			return r, err
		}
	} else if err := r.Cluster.StartFresh(ctx); err != nil {
		return r, err
	}
	if r.Cluster.Port != cfg.PGPort {
		ev.Logf(EventPhase, "port %d is taken by another server; the chaos cluster uses %d", cfg.PGPort, r.Cluster.Port)
		cfg.PGPort = r.Cluster.Port
	}
	ev.Logf(EventPhase, "postgres cluster %s up on 127.0.0.1:%d", cfg.PGData, cfg.PGPort)
	if r.Pair != nil {
		cfg.StandbyPGPort = r.Pair.Standby.Port
		ev.Logf(EventPhase, "%s standby %s streaming on 127.0.0.1:%d", cfg.Failover, cfg.StandbyPGData, cfg.StandbyPGPort)
	}
	var err error
	if r.DBURL, err = r.Cluster.CreateDatabase(ctx, cfg.Database); err != nil {
		return r, err
	}
	if r.Pair != nil {
		// Every process, the harness's own pool too, follows the primary.
		r.DBURL = r.Pair.URL(cfg.Database)
	}
	if _, err := r.paymentsd(ctx, "migrate", "migrate"); err != nil {
		return r, err
	}
	ev.Logf(EventPhase, "database %s created and migrated", cfg.Database)
	if cfg.PgBouncer {
		if err := r.startPgBouncer(ctx); err != nil {
			return r, err
		}
	}

	emuPort, err := freePort()
	if err != nil {
		return r, err
	}
	emuAddr := "127.0.0.1:" + strconv.Itoa(emuPort)
	// The serve processes' addresses come first: the emulator sends its
	// webhook events there.
	serveAddrs, err := freeAddrs(cfg.Serve, emuAddr)
	if err != nil {
		return r, err
	}
	r.EmuProc = &Proc{
		Name: "stripefake", Path: cfg.Stripefake(),
		Args: append([]string{"--addr", emuAddr, "--authorization-window", cfg.AuthorizationWindow.String()},
			cfg.webhookArgs(serveAddrs)...),
		Env: r.env(nil), LogPath: filepath.Join(cfg.LogDir, "stripefake.log"),
	}
	if err := r.EmuProc.Start(); err != nil {
		return r, err
	}
	r.Emulator = &Emulator{Base: "http://" + emuAddr, HTTP: &http.Client{}}
	if err := r.waitEmulator(ctx); err != nil {
		return r, err
	}

	r.Fleet = &Fleet{Events: ev}
	for i, addr := range serveAddrs {
		name := fmt.Sprintf("serve-%d", i+1)
		r.Fleet.Slots = append(r.Fleet.Slots, &Slot{Addr: addr, Proc: &Proc{
			Name: name, Path: cfg.Paymentsd(), Args: []string{"serve"},
			Env:     r.env(cfg.withWebhookSecret(map[string]string{"PAYMENTSD_ADDR": addr, "STRIPE_API_BASE": r.Emulator.Base})),
			LogPath: filepath.Join(cfg.LogDir, name+".log"),
		}})
	}
	if err := r.Fleet.StartAll(ctx); err != nil {
		return r, err
	}
	ev.Logf(EventPhase, "stripefake on %s; %d serve processes ready", emuAddr, cfg.Serve)

	for i := range cfg.Users {
		out, err := r.paymentsd(ctx, "users", "users", "create", "--email", fmt.Sprintf("chaos-%d@example.test", i+1))
		if err != nil {
			return r, err
		}
		var u User
		if err := json.Unmarshal(out, &u); err != nil || u.APIKey == "" {
			return r, fmt.Errorf("unexpected output of paymentsd users create: %q", out)
		}
		r.Users = append(r.Users, u)
	}
	return r, nil
}

// heartbeatInterval is the serve processes' heartbeat interval.
const heartbeatInterval = time.Second

// serveEnv is the environment of every serve process besides its address
// and the emulator's.
var serveEnv = map[string]string{
	"PAYMENTSD_LOG_LEVEL":      "warn",
	"PAYMENTSD_RATE_LIMIT":     "0",
	"PAYMENTSD_LOCK_TIMEOUT":   "10s",
	"PAYMENTSD_STRIPE_TIMEOUT": "3s",
	// The emulator's list is consistent at once: a short margin lets a
	// spent Stripe key's successor come within the drain bound.
	"PAYMENTSD_STRIPE_VISIBILITY_MARGIN": "2s",
	"PAYMENTSD_COMPLETER_INTERVAL":       "2s",
	"PAYMENTSD_HEARTBEAT_INTERVAL":       heartbeatInterval.String(),
	"PAYMENTSD_SHUTDOWN_GRACE":           "5s",
}

// env is the harness's environment without any setting of paymentsd or
// Stripe it inherited, plus DATABASE_URL, serveEnv and extra.
func (r *Rig) env(extra map[string]string) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		if name == "DATABASE_URL" || strings.HasPrefix(name, "PAYMENTSD_") || strings.HasPrefix(name, "STRIPE_") {
			continue
		}
		env = append(env, kv)
	}
	env = append(env, "DATABASE_URL="+r.DBURL)
	for k, v := range serveEnv {
		env = append(env, k+"="+v)
	}
	for k, v := range extra {
		env = append(env, k+"="+v)
	}
	return env
}

// paymentsd runs a one-shot paymentsd command and returns its stdout; its
// stderr goes to the log named logName.
func (r *Rig) paymentsd(ctx context.Context, logName string, args ...string) ([]byte, error) {
	log, err := os.OpenFile(filepath.Join(r.Cfg.LogDir, logName+".log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	cmd := exec.CommandContext(ctx, r.Cfg.Paymentsd(), args...)
	cmd.Env = r.env(nil)
	var stdout bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, log
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("paymentsd %s: %w (see %s)", strings.Join(args, " "), err, log.Name())
	}
	_, _ = log.Write(stdout.Bytes())
	return stdout.Bytes(), nil
}

func (r *Rig) waitEmulator(ctx context.Context) error {
	deadline := time.Now().Add(15 * time.Second)
	for {
		_, err := r.Emulator.Stats(ctx)
		if err == nil {
			return nil
		}
		if time.Now().After(deadline) || !r.EmuProc.Running() {
			return fmt.Errorf("the emulator did not come up (see %s): %w", r.EmuProc.LogPath, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// Teardown stops the serve processes, the emulator and the cluster. The
// database and the logs stay for inspection.
func (r *Rig) Teardown() error {
	var errs []error
	if r.Fleet != nil {
		errs = append(errs, r.Fleet.StopAll(10*time.Second))
	}
	if r.EmuProc != nil {
		errs = append(errs, r.EmuProc.Stop(15*time.Second))
	}
	{
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		errs = append(errs, r.stopPgBouncer(ctx))
		cancel()
	}
	if r.Cluster != nil {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if r.Patroni != nil {
			errs = append(errs, r.Patroni.Stop(ctx))
		} else if r.Pair != nil {
			errs = append(errs, r.Pair.Stop(ctx))
		} else {
			errs = append(errs, r.Cluster.Stop(ctx))
		}
	}
	return errors.Join(errs...)
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
