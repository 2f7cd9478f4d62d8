package localvm

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/rayito-dev/rayito/proto/microvmsapi"
	"github.com/rayito-dev/rayito/rayd"
)

// The platform serves only its owner: the user it runs as. Its API (and
// the endpoint proxy on the same port) has no credentials of its own, and
// a loopback port is open to every user of the machine, so each
// connection's client is looked up in the kernel when it is accepted (the
// owner of the client socket of a TCP connection, SO_PEERCRED on a Unix
// socket) and every request of a connection whose client is another user,
// or cannot be told, is refused with 403 NotOwnerException. Options.
// AllowRemote turns this off: beyond loopback the client cannot be looked
// up.

// clientKey keys a connection's client in its requests' contexts.
type clientKey struct{}

// client is who opened a connection: uid, or why it is not known.
type client struct {
	uid uint32
	err error
}

// connClient is the http.Server's ConnContext: it looks the connection's
// client up once, before anything is read from it.
func connClient(ctx context.Context, c net.Conn) context.Context {
	uid, err := clientUID(c)
	return context.WithValue(ctx, clientKey{}, client{uid: uid, err: err})
}

// errUnknownClient: a connection of a kind whose client cannot be looked
// up.
var errUnknownClient = errors.New("localvm: the connection's client cannot be identified")

// clientUID returns the uid of c's client.
func clientUID(c net.Conn) (uint32, error) {
	if uc, ok := c.(*net.UnixConn); ok {
		return unixPeerUID(uc)
	}
	if _, ok := c.LocalAddr().(*net.TCPAddr); ok {
		return rayd.TCPClientUID(c.LocalAddr(), c.RemoteAddr())
	}
	return 0, errUnknownClient
}

// ownerOnly reports whether r comes from the platform's owner, and
// otherwise answers it with 403 NotOwnerException naming the owner.
func (s *Server) ownerOnly(w http.ResponseWriter, r *http.Request) bool {
	if s.opts.AllowRemote {
		return true
	}
	c, ok := r.Context().Value(clientKey{}).(client)
	if ok && c.err == nil && c.uid == s.owner {
		return true
	}
	msg := fmt.Sprintf("This local platform serves only its owner (uid %d). Start your own with `rayito local up` (another --addr when this one is taken) and point RAYITO_ENDPOINT at it.", s.owner)
	if ok && c.err != nil {
		msg = fmt.Sprintf("This local platform serves only its owner (uid %d), and the client of this connection could not be identified.", s.owner)
	}
	b, _ := json.Marshal(microvmsapi.Error{Type: microvmsapi.NotOwnerException, Message: msg})
	h := w.Header()
	h.Set(microvmsapi.ErrorTypeHeader, microvmsapi.NotOwnerException)
	h.Set(microvmsapi.OwnerHeader, strconv.FormatUint(uint64(s.owner), 10))
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusForbidden)
	_, _ = w.Write(b)
	return false
}
