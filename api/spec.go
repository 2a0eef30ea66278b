// Package apispec embeds api/openapi.yaml, the contract of the HTTP API, so
// the binary can serve it and tests can validate responses against it.
package apispec

import _ "embed"

// OpenAPI is the OpenAPI 3.1 document of the HTTP API.
//
//go:embed openapi.yaml
var OpenAPI []byte
