package redisproc

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"time"
)

// state is what one probe found.
type state int

const (
	down    state = iota // no answer yet (not listening, or no reply)
	loading              // answered LOADING (or another "try again" error)
	ready                // PONG from this start's server
)

func (s state) String() string {
	return [...]string{"not answering", "loading its dataset", "ready"}[s]
}

// errForeign says the server on the port is not the one just started.
var errForeign = errors.New("another server answers on this port")

// probe asks the server once: AUTH (with a password), PING, and INFO server
// to compare its config_file with conf. An error is final (a wrong password,
// a foreign server); states are worth asking again.
func probe(ctx context.Context, addr, password, conf string) (state, error) {
	d := net.Dialer{Timeout: 200 * time.Millisecond}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return down, nil
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	var req []string
	if password != "" {
		req = append(req, command("AUTH", password))
	}
	req = append(req, command("PING"), command("INFO", "server"))
	if _, err := c.Write([]byte(strings.Join(req, ""))); err != nil {
		return down, nil
	}
	br := bufio.NewReader(c)
	if password != "" {
		r, err := readReply(br)
		if err != nil {
			return down, nil
		}
		if st, err := judge(r, "+OK"); st != ready {
			return st, err
		}
	}
	r, err := readReply(br)
	if err != nil {
		return down, nil
	}
	if st, err := judge(r, "+PONG"); st != ready {
		return st, err
	}
	r, err = readReply(br)
	if err != nil {
		return down, nil
	}
	if !strings.Contains(r, "\r\nconfig_file:"+conf+"\r\n") {
		return down, errForeign
	}
	return ready, nil
}

// judge maps a reply that should be want: an error a starting server gives
// (LOADING, BUSY, MASTERDOWN, TRYAGAIN) means ask again; any other error is
// final (NOAUTH, WRONGPASS: a foreign server or a wrong password).
func judge(reply, want string) (state, error) {
	if reply == want {
		return ready, nil
	}
	if msg, ok := strings.CutPrefix(reply, "-"); ok {
		code, _, _ := strings.Cut(msg, " ")
		switch code {
		case "LOADING", "BUSY", "MASTERDOWN", "TRYAGAIN":
			return loading, nil
		case "NOAUTH", "WRONGPASS", "ERR":
			return down, fmt.Errorf("%w: %s", errForeign, msg)
		}
		return down, fmt.Errorf("unexpected reply %q", msg)
	}
	return down, fmt.Errorf("unexpected reply %q", reply)
}

// command encodes a RESP array of bulk strings.
func command(args ...string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	return b.String()
}

// readReply reads one simple-string, error or bulk-string reply: simple
// ones come back with their type byte ("+PONG", "-LOADING ..."), a bulk
// string as its contents.
func readReply(br *bufio.Reader) (string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimSuffix(line, "\r\n")
	if line == "" {
		return "", errors.New("empty reply")
	}
	switch line[0] {
	case '+', '-':
		return line, nil
	case '$':
		n, err := strconv.Atoi(line[1:])
		if err != nil || n < 0 {
			return "", fmt.Errorf("bad bulk length %q", line)
		}
		buf := make([]byte, n+2)
		if _, err := io.ReadFull(br, buf); err != nil {
			return "", err
		}
		return string(buf[:n]), nil
	}
	return "", fmt.Errorf("unexpected reply type %q", line)
}
