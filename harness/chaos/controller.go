package chaos

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// Controller injects the process-level faults while the load runs: it
// SIGKILLs a random serve process every Config.KillEvery (±20%) and starts
// it again one to two seconds later, and restarts Postgres once, half way
// through the run; or, in a failover run, fails Postgres over instead.
// With Lost set it loses a key's history every Config.LostEvery.
type Controller struct {
	Cfg     *Config
	Fleet   *Fleet
	Cluster *Cluster
	Events  *Events
	// Pair, in a failover run, is failed over, and Failover records how.
	Pair     *Pair
	Failover *Failover
	// Lost, when set, injects the lost-history faults (lost_history.go).
	Lost *Lost
	// Patroni, in a Patroni failover run, is broken three times (patroni.go).
	Patroni *PatroniCluster
}

// Run injects faults until ctx ends. It returns only after whatever it
// broke is started again: no serve process it killed stays down, and
// Postgres runs (a failover begun is finished).
func (c *Controller) Run(ctx context.Context) {
	rng := rand.New(rand.NewPCG(c.Cfg.Seed, 0xc4a05))
	var wg sync.WaitGroup
	if c.Cfg.KillEvery > 0 {
		// Each goroutine owns its own source, so one's choices do not
		// depend on the other's timing.
		killRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.killer(ctx, killRng)
		}()
	}
	if c.Cfg.PGRestart {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.restartPostgres(ctx)
		}()
	}
	if c.Lost != nil {
		lostRng := rand.New(rand.NewPCG(rng.Uint64(), rng.Uint64()))
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.Lost.Run(ctx, lostRng)
		}()
	}
	if c.Pair != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.failover(ctx)
		}()
	}
	if c.Patroni != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.patroniEvents(ctx)
		}()
	}
	wg.Wait()
}

// Failover is what the controller did in a failover, and when.
type Failover struct {
	// CutAt is when the standby stopped receiving WAL (async only), and
	// Behind how many bytes of WAL it lacked when the primary stopped.
	CutAt  time.Time
	Behind int64
	// StoppedAt is when the primary was stopped; PromotedAt when the
	// standby accepted writes.
	StoppedAt, PromotedAt time.Time
	// UpAtStop are the pids of the serve processes running when the
	// primary stopped: each must come through without a restart.
	UpAtStop []int
	// Patroni lists a Patroni run's events; StoppedAt is then the first's,
	// PromotedAt the last's new leader.
	Patroni []*PatroniEvent
}

// Done reports whether the failover happened.
func (f *Failover) Done() bool { return !f.PromotedAt.IsZero() }

// failover fails Postgres over half way through the run: for an
// asynchronous pair it first cuts the standby off ReplicationCut before,
// then it stops the primary with -m immediate, and PromoteAfter later it
// promotes the standby. Once begun it always ends with a primary.
func (c *Controller) failover(ctx context.Context) {
	at := time.Now().Add(c.Cfg.Duration / 2)
	bg := context.Background()
	if c.Pair.Mode == FailoverAsync && c.Cfg.ReplicationCut > 0 {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Until(at.Add(-c.Cfg.ReplicationCut))):
		}
		if err := c.Pair.CutReplication(bg); err != nil {
			c.Events.Logf(EventHarnessErr, "cutting replication: %v", err)
		}
		c.Failover.CutAt = time.Now()
		c.Events.Logf(EventReplicationCut, "the standby receives no more WAL; the primary stops in %s", c.Cfg.ReplicationCut)
	}
	select {
	case <-ctx.Done():
		if c.Failover.CutAt.IsZero() {
			return
		}
	case <-time.After(time.Until(at)):
	}
	behind, err := c.Pair.Lag(bg)
	if err != nil {
		c.Events.Logf(EventHarnessErr, "measuring the standby's lag: %v", err)
	}
	c.Failover.Behind = behind
	c.Failover.UpAtStop = c.Fleet.Pids()
	c.Failover.StoppedAt = time.Now()
	if err := c.Pair.StopPrimary(bg); err != nil {
		c.Events.Logf(EventHarnessErr, "%v", err)
	}
	c.Events.Logf(EventPrimaryStop, "primary stopped (pg_ctl stop -m immediate) after %s; the standby lacked %d bytes of WAL",
		time.Since(c.Failover.StoppedAt).Round(time.Millisecond), behind)
	time.Sleep(time.Until(c.Failover.StoppedAt.Add(c.Cfg.PromoteAfter)))
	for {
		err := c.Pair.Promote(bg)
		if err == nil {
			break
		}
		c.Events.Logf(EventHarnessErr, "%v; trying again", err)
		time.Sleep(time.Second)
	}
	c.Failover.PromotedAt = time.Now()
	c.Events.Logf(EventPromote, "standby promoted (pg_ctl promote) %s after the primary stopped",
		c.Failover.PromotedAt.Sub(c.Failover.StoppedAt).Round(time.Millisecond))
}

func (c *Controller) killer(ctx context.Context, rng *rand.Rand) {
	for {
		spread := int64(c.Cfg.KillEvery) * 2 / 5 // ±20%
		pause := c.Cfg.KillEvery - time.Duration(spread/2) + time.Duration(rng.Int64N(spread+1))
		select {
		case <-ctx.Done():
			return
		case <-time.After(pause):
		}
		slot := c.Fleet.Slots[rng.IntN(len(c.Fleet.Slots))]
		down := time.Second + time.Duration(rng.Int64N(int64(time.Second)))
		if err := c.Fleet.Kill(slot); err != nil {
			c.Events.Logf(EventHarnessErr, "%v", err)
		}
		// Not cut short by ctx: what was killed is always started again.
		time.Sleep(down)
		if err := c.Fleet.Restart(slot); err != nil {
			c.Events.Logf(EventHarnessErr, "%v", err)
		}
	}
}

func (c *Controller) restartPostgres(ctx context.Context) {
	select {
	case <-ctx.Done():
		return
	case <-time.After(c.Cfg.Duration / 2):
	}
	bg := context.Background()
	start := time.Now()
	c.Events.Logf(EventPhase, "stopping postgres (pg_ctl stop -m fast)")
	if err := c.Cluster.Stop(bg); err != nil {
		c.Events.Logf(EventHarnessErr, "%v", err)
	}
	c.Events.Logf(EventPGStop, "postgres stopped after %s", time.Since(start).Round(time.Millisecond))
	release, err := c.Cluster.HoldPort()
	if err != nil {
		c.Events.Logf(EventHarnessErr, "%v", err)
		release = func() {}
	}
	time.Sleep(time.Second)
	release()
	start = time.Now()
	for {
		err := c.Cluster.Start(bg)
		if err == nil {
			break
		}
		c.Events.Logf(EventHarnessErr, "%v; trying again", err)
		time.Sleep(time.Second)
	}
	c.Events.Logf(EventPGStart, "postgres started again after %s", time.Since(start).Round(time.Millisecond))
}
