// Package apiclient is the Go client oapi-codegen generates from the public
// OpenAPI document (httpapi/openapi.json), for the end-to-end test that
// round-trips every public route through it. Only tests import it;
// TestGeneratedClientIsCurrent fails when the document changed and
// client.gen.go was not regenerated (go generate ./internal/e2e/apiclient).
package apiclient

//go:generate go tool oapi-codegen -config oapi-codegen.yaml ../../../httpapi/openapi.json
