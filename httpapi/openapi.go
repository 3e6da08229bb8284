package httpapi

import _ "embed"

// openAPI is the OpenAPI 3.1 description of /v1, served at
// GET /v1/openapi.json (no token: it holds no data). The test in
// openapi_test.go keeps it and the router's routes the same set.
//
//go:embed openapi.json
var openAPI []byte
