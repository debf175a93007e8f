package wire

import (
	"context"
	"encoding/json"
)

// TokenAction is what a TOKENS request asks.
type TokenAction uint8

const (
	TokenCreate TokenAction = 1 // body: a JSON TokenSpec (ttl, uses); answer: the token made, with its secret
	TokenList   TokenAction = 2 // no body; answer: every token, secrets left out
	TokenRevoke TokenAction = 3 // body: the token's id; answer: empty
)

// serveTokens answers a TOKENS request: action u8, then a JSON TokenSpec
// (create), nothing (list) or the token id (revoke).
func serveTokens(ctx context.Context, ts TokenService, body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, Errorf(CodeMalformed, "TOKENS takes an action u8")
	}
	action, rest := TokenAction(body[0]), body[1:]
	switch action {
	case TokenCreate:
		var t TokenSpec
		if err := json.Unmarshal(rest, &t); err != nil {
			return nil, Errorf(CodeMalformed, "TOKENS create: %v", err)
		}
		made, err := ts.CreateToken(ctx, t)
		if err != nil {
			return nil, err
		}
		return json.Marshal(made)
	case TokenList:
		if len(rest) != 0 {
			return nil, Errorf(CodeMalformed, "TOKENS list takes no body")
		}
		l, err := ts.ListTokens(ctx)
		if err != nil {
			return nil, err
		}
		if l == nil {
			l = []TokenSpec{}
		}
		return json.Marshal(l)
	case TokenRevoke:
		if len(rest) == 0 {
			return nil, Errorf(CodeMalformed, "TOKENS revoke needs a token id")
		}
		return nil, ts.RevokeToken(ctx, string(rest))
	}
	return nil, Errorf(CodeInvalidArgument, "unknown TOKENS action %d", action)
}
