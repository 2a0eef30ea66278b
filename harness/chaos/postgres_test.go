package chaos

import (
	"net"
	"testing"

	"github.com/stretchr/testify/require"
)

// A port held as a connection's own end is taken, though nothing listens
// there: Postgres could not start on it. This is what failed a standby's
// start once, on a port a dial had found free.
func TestTakenCountsAConnectionsOwnEnd(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer ln.Close()
	// The kernel completes the connection from the listener's backlog:
	// nothing needs to accept it.
	conn, err := net.Dial("tcp", ln.Addr().String())
	require.NoError(t, err)
	defer conn.Close()

	own := conn.LocalAddr().(*net.TCPAddr).Port
	require.True(t, taken(own), "the connection's own end, port %d", own)
	require.True(t, taken(ln.Addr().(*net.TCPAddr).Port), "a listener's port")

	free, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	port := free.Addr().(*net.TCPAddr).Port
	require.NoError(t, free.Close())
	require.False(t, taken(port), "a port nothing holds")
}
