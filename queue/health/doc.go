// Package health is the gate of a region's Redis: probes that ping each
// Redis server and hooks that refuse an API request's Redis calls at once
// while the server they go to has not answered for the probe's window.
package health
