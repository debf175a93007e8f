package meta

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// tokensPrefix holds the join tokens, one record per token id, with the
// token's secret sealed (the member that admits a node needs it to check
// the joiner's proof).
const tokensPrefix = Prefix + "tokens/"

// ErrTokenInvalid is returned for a join token that does not exist, has
// expired or has been used up.
var ErrTokenInvalid = errors.New("meta: no such join token, or it expired or was used up")

// JoinToken is a stored join token.
type JoinToken struct {
	ID, Secret string
	Created    time.Time
	Expires    time.Time
	// Uses is how many more nodes may join with it; -1: any number until
	// it expires (a bootstrap token).
	Uses int
}

type tokenRecord struct {
	V       int       `json:"v"`
	ID      string    `json:"id"`
	Sealed  []byte    `json:"sealed"`
	Created time.Time `json:"created"`
	Expires time.Time `json:"expires"`
	Uses    int       `json:"uses"`
}

func (c *Catalog) encodeToken(t JoinToken) ([]byte, error) {
	sealed, err := c.seal(tokensPrefix+t.ID, t.Secret)
	if err != nil {
		return nil, err
	}
	return json.Marshal(tokenRecord{V: formatSealed, ID: t.ID, Sealed: sealed, Created: t.Created.UTC(), Expires: t.Expires.UTC(), Uses: t.Uses})
}

func (c *Catalog) decodeToken(kv KV) (JoinToken, error) {
	var rec tokenRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil || rec.ID == "" {
		return JoinToken{}, fmt.Errorf("meta: join token record %s is damaged: %v", kv.Key, err)
	}
	secret, err := c.open(kv.Key, rec.V, "", rec.Sealed)
	if err != nil {
		return JoinToken{}, err
	}
	return JoinToken{ID: rec.ID, Secret: secret, Created: rec.Created, Expires: rec.Expires, Uses: rec.Uses}, nil
}

// CreateToken saves a new join token.
func (c *Catalog) CreateToken(ctx context.Context, t JoinToken) error {
	if t.Uses == 0 || t.Uses < -1 {
		return fmt.Errorf("meta: a join token needs a number of uses (or -1), not %d", t.Uses)
	}
	b, err := c.encodeToken(t)
	if err != nil {
		return err
	}
	if _, err := c.store.Put(ctx, tokensPrefix+t.ID, b, 0); errors.Is(err, ErrConflict) {
		return fmt.Errorf("meta: a join token with id %s exists", t.ID)
	} else if err != nil {
		return err
	}
	return nil
}

// GetToken returns a usable token (ErrTokenInvalid otherwise) and the
// revision of its record.
func (c *Catalog) GetToken(ctx context.Context, id string) (JoinToken, int64, error) {
	kv, err := c.store.Get(ctx, tokensPrefix+id)
	if errors.Is(err, ErrNotFound) {
		return JoinToken{}, 0, ErrTokenInvalid
	}
	if err != nil {
		return JoinToken{}, 0, err
	}
	t, err := c.decodeToken(kv)
	if err != nil {
		return JoinToken{}, 0, err
	}
	if !c.clock().Before(t.Expires) || t.Uses == 0 {
		return JoinToken{}, 0, ErrTokenInvalid
	}
	return t, kv.Rev, nil
}

// UseToken takes one use of a token read at revision rev. A token used up
// stays, with no use left, until it expires: a failed admission can then
// give its use back (RestoreToken), unless the token was revoked
// meanwhile. ErrConflict if the record changed since rev.
func (c *Catalog) UseToken(ctx context.Context, t JoinToken, rev int64) error {
	if t.Uses == -1 {
		return nil
	}
	t.Uses--
	b, err := c.encodeToken(t)
	if err != nil {
		return err
	}
	_, err = c.store.Put(ctx, tokensPrefix+t.ID, b, rev)
	return err
}

// RestoreToken gives back the use UseToken took from token id (an
// admission that failed after it). A token revoked meanwhile stays
// revoked.
func (c *Catalog) RestoreToken(ctx context.Context, id string) error {
	for range 10 {
		kv, err := c.store.Get(ctx, tokensPrefix+id)
		if errors.Is(err, ErrNotFound) {
			return nil // revoked
		}
		if err != nil {
			return err
		}
		t, err := c.decodeToken(kv)
		if err != nil {
			return err
		}
		if t.Uses == -1 {
			return nil
		}
		t.Uses++
		b, err := c.encodeToken(t)
		if err != nil {
			return err
		}
		if _, err = c.store.Put(ctx, kv.Key, b, kv.Rev); !errors.Is(err, ErrConflict) {
			return err
		}
	}
	return fmt.Errorf("meta: join token %s keeps changing", id)
}

// ListTokens returns the tokens (with their secrets: callers must not
// show them), expired ones removed.
func (c *Catalog) ListTokens(ctx context.Context) ([]JoinToken, error) {
	kvs, err := c.store.List(ctx, tokensPrefix)
	if err != nil {
		return nil, err
	}
	var out []JoinToken
	for _, kv := range kvs {
		t, err := c.decodeToken(kv)
		if err != nil {
			return nil, err
		}
		if !c.clock().Before(t.Expires) {
			_ = c.store.Delete(ctx, kv.Key, kv.Rev)
			continue
		}
		if t.Uses == 0 {
			continue // used up; kept until it expires (UseToken)
		}
		out = append(out, t)
	}
	return out, nil
}

// DeleteToken revokes a token (ErrTokenInvalid if there is none, or it
// was used up).
func (c *Catalog) DeleteToken(ctx context.Context, id string) error {
	if kv, err := c.store.Get(ctx, tokensPrefix+id); err == nil {
		if t, err := c.decodeToken(kv); err == nil && t.Uses == 0 {
			_ = c.store.Delete(ctx, kv.Key, kv.Rev)
			return ErrTokenInvalid
		}
	}
	err := c.store.Delete(ctx, tokensPrefix+id, AnyRev)
	if errors.Is(err, ErrNotFound) {
		return ErrTokenInvalid
	}
	return err
}
