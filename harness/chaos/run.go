package chaos

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/paymentsd/paymentsd/emulator/stripefake"
)

// Exit codes of Main.
const (
	ExitPass      = 0
	ExitError     = 1
	ExitUsage     = 2
	ExitViolation = 3
)

// Main runs paymentsd-chaos with the command line args and returns its exit
// code: 0 when every invariant held, 3 on a violation, 1 when the run itself
// failed, 2 for a bad command line.
func Main(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cfg, err := ParseFlags(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return ExitPass
	}
	if err != nil {
		fmt.Fprintf(stderr, "paymentsd-chaos: %v\n", err)
		return ExitUsage
	}
	passed, err := Run(ctx, cfg, stdout)
	switch {
	case err != nil:
		fmt.Fprintf(stderr, "paymentsd-chaos: %v\n", err)
		return ExitError
	case !passed:
		return ExitViolation
	}
	return ExitPass
}

// Run performs one chaos run (see the package documentation), prints its
// table to stdout and to <logs>/report.txt, and reports whether every
// invariant held.
func Run(ctx context.Context, cfg *Config, stdout io.Writer) (passed bool, err error) {
	wall := time.Now()
	if err := freshLogDir(cfg.LogDir); err != nil {
		return false, err
	}
	eventLog, err := os.Create(filepath.Join(cfg.LogDir, "events.log"))
	if err != nil {
		return false, err
	}
	defer eventLog.Close()
	ev := NewEvents(stdout, eventLog)

	rig, err := Setup(ctx, cfg, ev)
	defer func() {
		ev.Logf(EventPhase, "stopping the serve processes, the emulator and postgres")
		if terr := rig.Teardown(); terr != nil {
			ev.Logf(EventHarnessErr, "teardown: %v", terr)
		}
	}()
	if err != nil {
		return false, err
	}
	if err := rig.Emulator.SetChaos(ctx, cfg.Faults); err != nil {
		return false, err
	}
	ev.Logf(EventFaults, "emulator chaos on: %+v", cfg.Faults)

	ledger := NewLedger()
	targets := make([]string, len(rig.Fleet.Slots))
	for i, s := range rig.Fleet.Slots {
		targets[i] = s.URL()
	}
	clients := &Clients{Cfg: cfg, Users: rig.Users, Targets: targets, Ledger: ledger, HTTP: NewHTTPClient(cfg.Clients)}

	superCtx, stopSuper := context.WithCancel(ctx)
	defer stopSuper()
	go rig.Fleet.Supervise(superCtx)

	loadStart := time.Now()
	loadCtx, endLoad := context.WithTimeout(ctx, cfg.Duration)
	defer endLoad()
	controllerDone := make(chan struct{})
	failover := &Failover{}
	var lost *Lost
	if cfg.LostEvery > 0 {
		lostPool, err := OpenPool(ctx, rig.DBURL)
		if err != nil {
			return false, err
		}
		defer lostPool.Close()
		resender := &Clients{Cfg: cfg, Users: rig.Users, Targets: targets, Ledger: NewLedger(), HTTP: clients.HTTP, Events: ev,
			FinalOnAttention: true}
		lost = &Lost{Cfg: cfg, Pool: lostPool, Ledger: ledger, Resender: resender, Events: ev}
	}
	go func() {
		defer close(controllerDone)
		(&Controller{Cfg: cfg, Fleet: rig.Fleet, Cluster: rig.Cluster, Events: ev, Pair: rig.Pair, Failover: failover,
			Lost: lost, Patroni: rig.Patroni}).Run(loadCtx)
	}()
	stopNew := make(chan struct{})
	clientCtx, stopClients := context.WithCancel(ctx)
	defer stopClients()
	clientsDone := make(chan struct{})
	go func() {
		defer close(clientsDone)
		clients.Run(clientCtx, stopNew)
	}()
	go progress(loadCtx, ev, ledger)
	ev.Logf(EventPhase, "%d clients running for %s", cfg.Clients, cfg.Duration)

	<-loadCtx.Done()
	load := time.Since(loadStart)
	if ctx.Err() != nil {
		stopClients()
		<-clientsDone
		<-controllerDone
		return false, errors.New("interrupted")
	}
	ev.Logf(EventPhase, "load over after %s: %s; waiting for the controller", load.Round(time.Millisecond), ledger.Progress())
	<-controllerDone

	faultsOff := time.Now()
	var lagging stripefake.AdminChaos
	if lost != nil {
		// Search lags on: lost keys are still to come back.
		lagging.SearchLagMS = cfg.Faults.SearchLagMS
	}
	if err := rig.Emulator.SetChaos(ctx, lagging); err != nil {
		return false, err
	}
	if err := rig.Emulator.Release(ctx); err != nil {
		return false, err
	}
	ev.Logf(EventFaults, "emulator chaos off, hung requests released")
	close(stopNew)
	// A client may finish the intent it holds, for half the drain bound.
	time.AfterFunc(cfg.Drain/2, stopClients)
	ev.Logf(EventPhase, "clients start no new intents; bringing every serve process up")
	if err := rig.Fleet.EnsureUp(ctx, 30*time.Second); err != nil {
		return false, err
	}
	pool, err := OpenPool(ctx, rig.DBURL)
	if err != nil {
		return false, err
	}
	defer pool.Close()
	ev.Logf(EventPhase, "all serve processes ready; waiting for every key and receipt (bound %s)", cfg.Drain)
	drain := WaitDrain(ctx, pool, ev, faultsOff, cfg.Drain, clientsDone)
	stopClients()
	<-clientsDone
	if lost != nil {
		lostKeysBack(ctx, lost, pool, ev, &drain)
	}
	var rec *Recovery
	if rig.Pair != nil || rig.Patroni != nil {
		resender := &Clients{Cfg: cfg, Users: rig.Users, Targets: targets, Ledger: NewLedger(), HTTP: clients.HTTP, Events: ev}
		if rec, err = afterFailover(ctx, rig, resender, pool, failover, &drain, ledger.Intents()); err != nil {
			return false, err
		}
		rec.FirstCreated, _ = ledger.FirstCreatedAfter(failover.PromotedAt)
		measurePatroni(rec, ledger)
	}
	var hooks *Webhooks
	if cfg.Webhooks {
		if err := AwaitAuthorizationsEnded(ctx, rig.Emulator, cfg.AuthorizationWindow, cfg.Drain, ev); err != nil {
			return false, err
		}
		if hooks, err = SettleWebhooks(ctx, rig.Emulator, pool, ev); err != nil {
			return false, err
		}
	}
	stopSuper()
	ev.Logf(EventPhase, "drained; checking the invariants")

	stats, err := rig.Emulator.Stats(ctx)
	if err != nil {
		return false, err
	}
	snap, err := TakeSnapshot(ctx, pool, rig.Emulator)
	if err != nil {
		return false, err
	}
	report := &Report{
		Cfg: cfg, Intents: ledger.Intents(), Answers: ledger.Answers(), Emulator: stats, Events: ev,
		Load: load, Drain: drain, Verdict: Verify(ledger.Intents(), snap, drain, cfg.Drain, rec),
		WallClock: time.Since(wall),
	}
	if rec != nil {
		rec.Recorded = recordedObjects(snap)
	}
	if hooks != nil {
		if lost != nil {
			hooks.LostObjects = lostObjects(lost.Faults(), snap)
		}
		check, lostEvents := checkWebhooks(hooks, rec)
		report.Verdict.Checks = append(report.Verdict.Checks, check)
		report.Webhooks, report.WebhooksLostByFailover = hooks, lostEvents
	}
	if lost != nil {
		check, summary := checkLostHistory(lost.Faults(), snap)
		report.Verdict.Checks = append(report.Verdict.Checks, check)
		report.Lost = summary
	}
	out, err := os.Create(filepath.Join(cfg.LogDir, "report.txt"))
	if err != nil {
		return false, err
	}
	defer out.Close()
	report.Print(io.MultiWriter(stdout, out))
	return report.Verdict.Passed(), nil
}

// freshLogDir creates dir and removes the logs of an earlier run.
func freshLogDir(dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	old, err := filepath.Glob(filepath.Join(dir, "*.log"))
	if err != nil {
		return err
	}
	for _, f := range append(old, filepath.Join(dir, "report.txt")) {
		if err := os.Remove(f); err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
	}
	return nil
}

// progress logs the clients' progress every 10 s until ctx ends.
func progress(ctx context.Context, ev *Events, l *Ledger) {
	t := time.NewTicker(10 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			ev.Logf(EventProgress, "%s", l.Progress())
		}
	}
}
