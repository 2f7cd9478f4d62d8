// Package peer drives E2B's envd as the peer subject P: it starts the
// binary given by path as a child, then speaks its wire protocol directly
// (Connect with the JSON codec over HTTP/1.1 for process.Process, plain
// HTTP for /files and /health), as described in
// shared/spec/e2b-protocol.md §4–§6. The code is written from that
// description; nothing is taken from E2B's repositories.
package peer

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// Envelope flags of the Connect streaming protocol.
const (
	flagMessage   = 0x00
	flagEndStream = 0x02
	// maxEnvelope bounds one message; envd sends output in small chunks.
	maxEnvelope = 64 << 20
)

// appendEnvelope frames msg: one flags byte, a 4-byte big-endian length,
// the JSON payload.
func appendEnvelope(dst []byte, flags byte, msg []byte) []byte {
	dst = append(dst, flags)
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(msg)))
	return append(dst, msg...)
}

// readEnvelope reads one envelope. buf is reused when large enough.
func readEnvelope(r io.Reader, buf []byte) (flags byte, msg []byte, err error) {
	var hdr [5]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return 0, nil, err
	}
	n := binary.BigEndian.Uint32(hdr[1:])
	if n > maxEnvelope {
		return 0, nil, fmt.Errorf("envelope of %d bytes", n)
	}
	if int(n) > cap(buf) {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return 0, nil, err
	}
	return hdr[0], buf, nil
}

// RPCError is a Connect error ({"code","message"}), from a unary answer
// or an end-stream envelope.
type RPCError struct {
	Code    string `json:"code"`
	Message string `json:"message"`
}

func (e *RPCError) Error() string { return "envd: " + e.Code + ": " + e.Message }

// endStream is the payload of the end-stream envelope.
type endStream struct {
	Error *RPCError `json:"error,omitempty"`
}

// Wire messages of process.Process (JSON names, lowerCamelCase).

type processConfig struct {
	Cmd  string            `json:"cmd"`
	Args []string          `json:"args,omitempty"`
	Envs map[string]string `json:"envs,omitempty"`
	Cwd  *string           `json:"cwd,omitempty"`
}

type ptySize struct {
	Cols uint32 `json:"cols"`
	Rows uint32 `json:"rows"`
}

type ptyConfig struct {
	Size ptySize `json:"size"`
}

type startRequest struct {
	Process processConfig `json:"process"`
	Pty     *ptyConfig    `json:"pty,omitempty"`
}

type processSelector struct {
	Pid uint32 `json:"pid"`
}

type processInput struct {
	Stdin []byte `json:"stdin,omitempty"`
	Pty   []byte `json:"pty,omitempty"`
}

type sendInputRequest struct {
	Process processSelector `json:"process"`
	Input   processInput    `json:"input"`
}

type sendSignalRequest struct {
	Process processSelector `json:"process"`
	Signal  string          `json:"signal"`
}

// EndEvent is the end of a process. Fields that are zero may be omitted
// on the wire.
type EndEvent struct {
	ExitCode int32  `json:"exitCode"`
	Exited   bool   `json:"exited"`
	Status   string `json:"status"`
	Error    string `json:"error,omitempty"`
}

type processEvent struct {
	Start *struct {
		Pid uint32 `json:"pid"`
	} `json:"start,omitempty"`
	Data *struct {
		Stdout []byte `json:"stdout,omitempty"`
		Stderr []byte `json:"stderr,omitempty"`
		Pty    []byte `json:"pty,omitempty"`
	} `json:"data,omitempty"`
	End       *EndEvent `json:"end,omitempty"`
	Keepalive *struct{} `json:"keepalive,omitempty"`
}

type startResponse struct {
	Event processEvent `json:"event"`
}

// decodeEvent parses one StartResponse message.
func decodeEvent(msg []byte) (*processEvent, error) {
	var r startResponse
	if err := json.Unmarshal(msg, &r); err != nil {
		return nil, fmt.Errorf("envd event: %w", err)
	}
	return &r.Event, nil
}
