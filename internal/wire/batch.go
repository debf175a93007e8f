package wire

import (
	"encoding/binary"
	"slices"

	"github.com/cairn-db/cairn/internal/object"
)

// MaxBatchItems bounds the items of one BATCH.
const MaxBatchItems = 4096

// BatchOp is the kind of one BATCH item.
type BatchOp uint8

// Batch item kinds.
const (
	BatchPut    BatchOp = 1 // PutRequest + inline body
	BatchGet    BatchOp = 2 // GetRequest; the result carries the bytes
	BatchStat   BatchOp = 3 // GetRequest; the result carries the info only
	BatchDelete BatchOp = 4 // DeleteRequest
)

func (o BatchOp) String() string {
	switch o {
	case BatchPut:
		return "put"
	case BatchGet:
		return "get"
	case BatchStat:
		return "stat"
	case BatchDelete:
		return "delete"
	}
	return "batch op?"
}

// BatchItem is one sub-operation of a BATCH request. Only the request field
// matching Op is used.
type BatchItem struct {
	Op     BatchOp
	Put    object.PutRequest // BatchPut; Size must equal len(Body)
	Body   []byte            // BatchPut
	Get    object.GetRequest // BatchGet, BatchStat
	Delete object.DeleteRequest
}

// BatchResult is the outcome of one BatchItem. Code is CodeOK on success;
// otherwise Message explains and Info/Data are empty.
type BatchResult struct {
	Op      BatchOp
	Code    Code
	Message string
	Info    object.Info
	Data    []byte // BatchGet
}

// Err returns the item's error, nil on success.
func (r *BatchResult) Err() error {
	if r.Code == CodeOK {
		return nil
	}
	return &Error{Code: r.Code, Message: r.Message}
}

// BATCH request body:
//
//	count uvarint
//	count × item:
//	  op u8
//	  put:    PutRequest, body bytes (uvarint length + bytes)
//	  get:    GetRequest
//	  stat:   GetRequest
//	  delete: DeleteRequest
//
// BATCH response body:
//
//	count uvarint (equal to the request's)
//	count × result:
//	  op u8, code u16
//	  code != 0:           message str
//	  put, stat, delete:   ObjectInfo
//	  get:                 ObjectInfo, data bytes (uvarint length + bytes)

// batchItemGuess is the room AppendBatchRequest allows an item besides
// its body (its request: names, offsets, metadata); more just grows.
const batchItemGuess = 128

// BatchItemSize is an upper bound of the bytes item takes in a BATCH
// request (or in the writes TXN_BEGIN and TXN_COMMIT carry): what a
// client that gathers items counts to keep a request within one frame.
func BatchItemSize(it *BatchItem) int {
	n := 1
	switch it.Op {
	case BatchPut:
		n += putRequestSize(&it.Put) + binary.MaxVarintLen64 + len(it.Body)
	case BatchGet, BatchStat:
		n += getRequestSize(&it.Get)
	case BatchDelete:
		n += 2*binary.MaxVarintLen64 + 8 + len(it.Delete.Space) + len(it.Delete.Key)
	}
	return n
}

// BatchOverhead bounds the bytes of a BATCH request besides its items'
// (their count), and of a TXN_BEGIN or TXN_COMMIT besides the batch it
// carries (a transaction id and a flags byte).
const BatchOverhead = binary.MaxVarintLen64 + 8 + 1

// AppendBatchRequest encodes a BATCH request.
func AppendBatchRequest(b []byte, items []BatchItem) []byte {
	// Room for the bodies at once: a batch of writes is up to a frame
	// (1 MiB), and growing it by appending copied it about twice more.
	n := binary.MaxVarintLen64
	for i := range items {
		n += len(items[i].Body) + binary.MaxVarintLen64 + 1 + batchItemGuess
	}
	b = slices.Grow(b, n)
	b = binary.AppendUvarint(b, uint64(len(items)))
	for i := range items {
		it := &items[i]
		b = append(b, byte(it.Op))
		switch it.Op {
		case BatchPut:
			b = AppendPutRequest(b, &it.Put)
			b = appendBytes(b, it.Body)
		case BatchGet, BatchStat:
			b = AppendGetRequest(b, &it.Get)
		case BatchDelete:
			b = AppendDeleteRequest(b, &it.Delete)
		}
	}
	return b
}

// DecodeBatchRequest decodes a BATCH request. Item bodies alias b.
func DecodeBatchRequest(b []byte) ([]BatchItem, error) {
	d := newDecoder(b)
	n := d.count(11, "batch count")
	if n > MaxBatchItems {
		return nil, Errorf(CodeTooLarge, "batch of %d items over the %d limit", n, MaxBatchItems)
	}
	items := make([]BatchItem, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		it := &items[i]
		it.Op = BatchOp(d.u8("batch op"))
		switch it.Op {
		case BatchPut:
			d.putRequest(&it.Put)
			it.Body = d.bytes("batch body")
			if d.Err() == nil && it.Put.Size != int64(len(it.Body)) {
				d.fail("batch put size")
			}
		case BatchGet, BatchStat:
			d.getRequest(&it.Get)
		case BatchDelete:
			d.deleteRequest(&it.Delete)
		default:
			d.fail("batch op")
		}
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return items, nil
}

// AppendBatchResult appends one result of a BATCH response (after the count).
func AppendBatchResult(b []byte, r *BatchResult) []byte {
	b = append(b, byte(r.Op))
	b = appendU16(b, uint16(r.Code))
	if r.Code != CodeOK {
		return appendStr(b, r.Message)
	}
	b = AppendObjectInfo(b, &r.Info)
	if r.Op == BatchGet {
		b = appendBytes(b, r.Data)
	}
	return b
}

// AppendBatchResponse encodes a whole BATCH response.
func AppendBatchResponse(b []byte, rs []BatchResult) []byte {
	b = binary.AppendUvarint(b, uint64(len(rs)))
	for i := range rs {
		b = AppendBatchResult(b, &rs[i])
	}
	return b
}

// DecodeBatchResponse decodes a BATCH response. Data slices alias b.
func DecodeBatchResponse(b []byte) ([]BatchResult, error) {
	d := newDecoder(b)
	n := d.count(4, "batch count")
	if n > MaxBatchItems {
		return nil, Errorf(CodeTooLarge, "batch of %d items over the %d limit", n, MaxBatchItems)
	}
	rs := make([]BatchResult, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		r := &rs[i]
		r.Op = BatchOp(d.u8("batch op"))
		if r.Op < BatchPut || r.Op > BatchDelete {
			d.fail("batch op")
			break
		}
		r.Code = Code(d.u16("batch code"))
		if r.Code != CodeOK {
			r.Message = d.str("batch message")
			continue
		}
		r.Info = d.objectInfo()
		if r.Op == BatchGet {
			r.Data = d.bytes("batch data")
		}
	}
	if err := d.done(); err != nil {
		return nil, err
	}
	return rs, nil
}
