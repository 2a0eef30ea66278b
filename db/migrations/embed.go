// Package migrations embeds the goose migrations so the paymentsd binary can
// apply them without the source tree.
package migrations

import "embed"

// FS holds every migration file, named NNNNN_description.sql.
//
//go:embed *.sql
var FS embed.FS
