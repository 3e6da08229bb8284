package httpapi

import _ "embed"

// openAPI is the OpenAPI 3.1 description of the public /v1 API, served at
// GET /v1/openapi.json (no token: it holds no data). It is the contract:
// openapi_test.go keeps it and the router's public routes the same set,
// and the conformance tests validate real answers against it.
//
//go:embed openapi.json
var openAPI []byte

// openAPIInternal describes the /v1/internal/ endpoints one server calls
// on another (cluster token only), apart so that clients generated from
// the public document never see them; served at
// GET /v1/openapi-internal.json.
//
//go:embed openapi-internal.json
var openAPIInternal []byte
