package wire

import (
	"context"
	"encoding/json"
)

// serveKeys answers a KEYS request: action u8, then a JSON KeySpec
// (create), nothing (list) or the access key id (delete).
func serveKeys(ctx context.Context, ks KeyService, body []byte) ([]byte, error) {
	if len(body) == 0 {
		return nil, Errorf(CodeMalformed, "KEYS takes an action u8")
	}
	action, rest := KeyAction(body[0]), body[1:]
	switch action {
	case KeyCreate:
		var k KeySpec
		if err := json.Unmarshal(rest, &k); err != nil {
			return nil, Errorf(CodeMalformed, "KEYS create: %v", err)
		}
		made, err := ks.CreateKey(ctx, k)
		if err != nil {
			return nil, err
		}
		return json.Marshal(made)
	case KeyList:
		if len(rest) != 0 {
			return nil, Errorf(CodeMalformed, "KEYS list takes no body")
		}
		l, err := ks.ListKeys(ctx)
		if err != nil {
			return nil, err
		}
		if l == nil {
			l = []KeySpec{}
		}
		return json.Marshal(l)
	case KeyDelete:
		if len(rest) == 0 {
			return nil, Errorf(CodeMalformed, "KEYS delete needs an access key id")
		}
		return nil, ks.DeleteKey(ctx, string(rest))
	case KeyKMSCreate, KeyKMSList:
		kms, ok := ks.(KMSService)
		switch {
		case !ok:
			return nil, Errorf(CodeUnknownOp, "this server keeps no KMS keys")
		case action == KeyKMSCreate:
			k, err := kms.CreateKMSKey(ctx, string(rest))
			if err != nil {
				return nil, err
			}
			return json.Marshal(k)
		case len(rest) != 0:
			return nil, Errorf(CodeMalformed, "KEYS KMS list takes no body")
		}
		l, err := kms.ListKMSKeys(ctx)
		if err != nil {
			return nil, err
		}
		if l == nil {
			l = []KMSKeySpec{}
		}
		return json.Marshal(l)
	case KeyRotateRoot, KeyRotateCluster:
		kr, ok := ks.(KeyRotator)
		switch {
		case !ok:
			return nil, Errorf(CodeUnknownOp, "this server does not rotate keys")
		case len(rest) != 0:
			return nil, Errorf(CodeMalformed, "KEYS rotate takes no body")
		case action == KeyRotateRoot:
			k, err := kr.RotateRootKey(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(k)
		default:
			r, err := kr.RotateClusterKey(ctx)
			if err != nil {
				return nil, err
			}
			return json.Marshal(r)
		}
	}
	return nil, Errorf(CodeInvalidArgument, "unknown KEYS action %d", action)
}
