package code_test

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
)

// signForTest signs the parts of a Jupyter message like a client would.
func signForTest(key []byte, parts ...string) string {
	m := hmac.New(sha256.New, key)
	for _, p := range parts {
		m.Write([]byte(p))
	}
	return hex.EncodeToString(m.Sum(nil))
}
