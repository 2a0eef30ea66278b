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
// through the run.
type Controller struct {
	Cfg     *Config
	Fleet   *Fleet
	Cluster *Cluster
	Events  *Events
}

// Run injects faults until ctx ends. It returns only after whatever it
// broke is started again: no serve process it killed stays down, and
// Postgres runs.
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
	wg.Wait()
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
	time.Sleep(time.Second)
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
