// Package fedtest is test support for the packages of the federation
// (federation, schedule, dag, the HTTP API): calls to a server's API that
// check the one error shape, and polling.
//
// Boundary: it imports only the wire shapes (apiv1); test files of any
// package may import it.
package fedtest
