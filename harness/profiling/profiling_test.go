package profiling_test

import (
	"net/http"
	"net/http/httptest"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/paymentsd/paymentsd/harness/profiling"
)

func TestBlockProfilingIsOnOnlyWhileAsked(t *testing.T) {
	srv := httptest.NewServer(profiling.Handler())
	defer srv.Close()
	require.Zero(t, runtime.SetMutexProfileFraction(-1), "off until asked")

	var mu sync.Mutex
	var seen int
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Get(srv.URL + "/debug/pprof/mutex?seconds=1")
		if err == nil {
			resp.Body.Close()
		}
	}()
	require.Eventually(t, func() bool {
		mu.Lock()
		defer mu.Unlock()
		seen = runtime.SetMutexProfileFraction(-1)
		return seen == profiling.MutexFraction
	}, 900*time.Millisecond, 10*time.Millisecond, "on during the window")
	<-done
	require.Zero(t, runtime.SetMutexProfileFraction(-1), "off again after it")

	resp, err := http.Get(srv.URL + "/debug/pprof/block?seconds=1")
	require.NoError(t, err)
	resp.Body.Close()
	require.Equal(t, http.StatusOK, resp.StatusCode)
}
