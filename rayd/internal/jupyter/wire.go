package jupyter

import (
	"bytes"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"time"
)

// delimiter separates the ZeroMQ routing identities from the signed parts
// of a Jupyter message.
const delimiter = "<IDS|MSG>"

// protocolVersion is the Jupyter messaging protocol version rayd speaks.
const protocolVersion = "5.3"

// maxMessageParts bounds the buffers of one message.
const maxMessageParts = 64

// Header is a Jupyter message header.
type Header struct {
	MsgID    string `json:"msg_id"`
	Session  string `json:"session"`
	Username string `json:"username"`
	Date     string `json:"date"`
	MsgType  string `json:"msg_type"`
	Version  string `json:"version"`
}

// Message is one decoded Jupyter message.
type Message struct {
	Header       Header
	ParentHeader Header
	Metadata     json.RawMessage
	Content      json.RawMessage
	Buffers      [][]byte
}

// Errors of Decode.
var (
	// ErrMalformed is a message that is not a Jupyter wire message.
	ErrMalformed = errors.New("kernel: malformed message")
	// ErrBadSignature is a message whose HMAC does not verify.
	ErrBadSignature = errors.New("kernel: bad message signature")
)

// sign returns the hex HMAC-SHA256 of the four signed parts.
func sign(key []byte, parts ...[]byte) []byte {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write(p)
	}
	sum := m.Sum(nil)
	out := make([]byte, hex.EncodedLen(len(sum)))
	hex.Encode(out, sum)
	return out
}

// newID returns a fresh random message or session id.
func newID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// newMessage makes a request of type msgType in session.
func newMessage(session, msgType string, content any) (*Message, error) {
	raw, err := json.Marshal(content)
	if err != nil {
		return nil, err
	}
	return &Message{
		Header: Header{
			MsgID: newID(), Session: session, Username: "rayd", MsgType: msgType,
			Version: protocolVersion, Date: time.Now().UTC().Format(time.RFC3339Nano),
		},
		Metadata: json.RawMessage("{}"),
		Content:  raw,
	}, nil
}

// Encode returns the wire frames of m signed with key (no routing
// identities: a DEALER sends none).
func (m *Message) Encode(key []byte) ([][]byte, error) {
	header, err := json.Marshal(m.Header)
	if err != nil {
		return nil, err
	}
	parent := []byte("{}")
	if m.ParentHeader.MsgID != "" {
		if parent, err = json.Marshal(m.ParentHeader); err != nil {
			return nil, err
		}
	}
	meta := []byte(m.Metadata)
	if len(meta) == 0 {
		meta = []byte("{}")
	}
	content := []byte(m.Content)
	if len(content) == 0 {
		content = []byte("{}")
	}
	frames := [][]byte{[]byte(delimiter), sign(key, header, parent, meta, content), header, parent, meta, content}
	return append(frames, m.Buffers...), nil
}

// isObject reports whether b looks like a JSON object at its ends ('{'
// first and '}' last, JSON whitespace aside). It is not a validation.
func isObject(b []byte) bool {
	b = bytes.Trim(b, " \t\r\n")
	return len(b) >= 2 && b[0] == '{' && b[len(b)-1] == '}'
}

// Decode parses the frames of one message and verifies its signature with
// key: a message whose HMAC does not verify is ErrBadSignature and must be
// dropped. Routing identities before the delimiter are ignored. Content
// (which can be megabytes of output) is not parsed here: whoever reads it
// unmarshals it once, and a message whose content does not parse is
// ignored there.
func Decode(frames [][]byte, key []byte) (*Message, error) {
	i := 0
	for i < len(frames) && !bytes.Equal(frames[i], []byte(delimiter)) {
		i++
	}
	if i >= len(frames) || len(frames)-i < 6 || len(frames)-i-6 > maxMessageParts {
		return nil, ErrMalformed
	}
	sig, header, parent, meta, content := frames[i+1], frames[i+2], frames[i+3], frames[i+4], frames[i+5]
	if len(key) == 0 || !hmac.Equal(bytes.ToLower(sig), sign(key, header, parent, meta, content)) {
		return nil, ErrBadSignature
	}
	m := &Message{Metadata: json.RawMessage(meta), Content: json.RawMessage(content)}
	if err := json.Unmarshal(header, &m.Header); err != nil || m.Header.MsgType == "" {
		return nil, ErrMalformed
	}
	if err := json.Unmarshal(parent, &m.ParentHeader); err != nil {
		return nil, ErrMalformed
	}
	if !isObject(content) {
		// Content is always an object; parsing it is left to whoever reads
		// it (it can be megabytes), so only its ends are checked here.
		return nil, ErrMalformed
	}
	if len(frames) > i+6 {
		m.Buffers = frames[i+6:]
	}
	return m, nil
}
