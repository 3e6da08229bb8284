// Package server assembles ax's processes from a region config: the server
// (cell, federation node, HTTP API behind its write deadline and Redis
// gates), the worker with its built-in handlers, and ax dev's whole region
// set on one machine.
package server
