package wire

import (
	"errors"

	"github.com/cairn-db/cairn/internal/object"
)

// PeerCodes carries the object service's failures across the range
// client's peer envelope (rangeclient.Codes) as this protocol's codes, so
// that a peer of another version reads the same numbers.
type PeerCodes struct{}

func (PeerCodes) Code(err error) (uint16, string) {
	code, msg := CodeOf(err), err.Error()
	var we *Error
	var oe *object.Error
	if errors.As(err, &we) {
		msg = we.Message
	} else if errors.As(err, &oe) {
		msg = oe.Message
	}
	return uint16(code), msg
}

func (PeerCodes) Error(code uint16, msg string) error {
	return &Error{Code: Code(code), Message: msg}
}
