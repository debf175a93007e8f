package s3

import (
	"bufio"
	"crypto/hmac"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"hash"
	"io"
	"strconv"
	"strings"
)

// aws-chunked bodies: the STREAMING-* payloads of x-amz-content-sha256.
//
// The body is a series of chunks, each "SIZE-HEX[;chunk-signature=SIG]\r\n"
// then SIZE bytes then "\r\n", ending with a chunk of size 0 and, for the
// *-TRAILER payloads, trailing headers ("name:value\r\n" lines, then an
// empty line). x-amz-decoded-content-length is the length of the data.
//
// Signed chunks chain: each chunk's signature signs the previous one's
// (the first signs the request's own signature) and the SHA-256 of its
// data, with the request's signing key, so no chunk can be changed,
// dropped, reordered or added. A signed trailer's signature follows the
// last chunk's in the same chain.
//
// chunkedReader hands data on only once it is verified: a whole chunk is
// read and checked before any of its bytes go, and the chunk that ends
// the data goes only after the end of the body (the last chunk, the
// trailer, its signature and the checksum it carries) is checked too. A
// body that fails any check therefore fails the PUT before it commits.

const (
	streamingSigned          = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD"
	streamingSignedTrailer   = "STREAMING-AWS4-HMAC-SHA256-PAYLOAD-TRAILER"
	streamingUnsignedTrailer = "STREAMING-UNSIGNED-PAYLOAD-TRAILER"

	// maxChunk bounds one chunk (clients send 8-64 KiB; the buffer for a
	// chunk is held until it is verified).
	maxChunk = 16 << 20
	// maxChunkLine bounds a chunk header or trailer line.
	maxChunkLine = 4096

	emptySHA256      = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
	chunkSigAlgo     = "AWS4-HMAC-SHA256-PAYLOAD"
	trailerSigAlgo   = "AWS4-HMAC-SHA256-TRAILER"
	trailerSigHeader = "x-amz-trailer-signature"
)

// streaming reports what a STREAMING-* payload carries; ok is false for
// one this server does not accept.
func streaming(payload string) (signed, trailer, ok bool) {
	switch payload {
	case streamingSigned:
		return true, false, true
	case streamingSignedTrailer:
		return true, true, true
	case streamingUnsignedTrailer:
		return false, true, true
	}
	return false, false, false
}

// bodyFault is the first S3 error the readers checking a request body
// found. The service reading the body may report the failed read in its
// own words; the handler answers with this instead.
type bodyFault struct{ e *apiError }

func (f *bodyFault) set(e *apiError) *apiError {
	if f.e == nil {
		f.e = e
	}
	return e
}

// chunkedReader decodes and verifies an aws-chunked body.
type chunkedReader struct {
	br    *bufio.Reader
	a     *auth  // signing material of signed chunks; nil if unsigned
	prev  string // the last verified signature of the chain
	left  int64  // data bytes still to come
	fault *bodyFault

	trailer bool             // trailing headers follow the data
	sum     *checksumRequest // the trailer's checksum, if any
	h       hash.Hash        // sum's algorithm over the data
	// headers receives the trailing checksum once it is verified.
	headers map[string]string

	buf   []byte // the current chunk
	chunk []byte // its verified bytes not yet handed on
	err   error  // sticky
}

// newChunkedReader returns a reader of the size data bytes of the
// aws-chunked body r. a is the request's auth when the chunks are
// signed, nil when not; sum is a checksum that comes as a trailer, and
// headers (non-nil with sum) receives it once verified. An empty body is
// checked here, since no read will come to check it.
func newChunkedReader(r io.Reader, size int64, a *auth, trailer bool, sum *checksumRequest, headers map[string]string, fault *bodyFault) (*chunkedReader, *apiError) {
	c := &chunkedReader{br: bufio.NewReaderSize(r, maxChunkLine), a: a, left: size, fault: fault,
		trailer: trailer, sum: sum, headers: headers}
	if a != nil {
		c.prev = a.seed
	}
	if sum != nil {
		c.h = sum.alg.new()
	}
	if size == 0 {
		if e := c.end(); e != nil {
			c.err = fault.set(e)
			return c, e
		}
		c.err = io.EOF
	}
	return c, nil
}

func (c *chunkedReader) Read(p []byte) (int, error) {
	if len(c.chunk) == 0 {
		switch {
		case c.err != nil:
			return 0, c.err
		case c.left == 0: // the end was verified with the last chunk
			c.err = io.EOF
			return 0, c.err
		}
		if e := c.next(); e != nil {
			c.err = c.fault.set(e)
			return 0, c.err
		}
	}
	n := copy(p, c.chunk)
	c.chunk = c.chunk[n:]
	return n, nil
}

// next reads and verifies one chunk, and the end of the body if the
// chunk ends the data.
func (c *chunkedReader) next() *apiError {
	size, sig, e := c.header()
	if e != nil {
		return e
	}
	switch {
	case size == 0:
		return errIncompleteBody.with("The aws-chunked body ended " + strconv.FormatInt(c.left, 10) + " bytes short of x-amz-decoded-content-length.")
	case size > c.left:
		return errInvalidRequest.with("An aws-chunked chunk runs past x-amz-decoded-content-length.")
	}
	if cap(c.buf) < int(size) {
		c.buf = make([]byte, size)
	}
	c.buf = c.buf[:size]
	if _, err := io.ReadFull(c.br, c.buf); err != nil {
		return readFault(err)
	}
	if e := c.crlf(); e != nil {
		return e
	}
	if e := c.verify(sig, c.buf); e != nil {
		return e
	}
	if c.h != nil {
		c.h.Write(c.buf)
	}
	c.left -= size
	if c.left == 0 {
		if e := c.end(); e != nil {
			return e
		}
	}
	c.chunk = c.buf
	return nil
}

// end reads and verifies what follows the data: the final empty chunk,
// the trailer and its signature, the trailing checksum; then nothing.
func (c *chunkedReader) end() *apiError {
	size, sig, e := c.header()
	if e != nil {
		return e
	}
	if size != 0 {
		return errInvalidRequest.with("The aws-chunked body holds more than x-amz-decoded-content-length bytes.")
	}
	if e := c.verify(sig, nil); e != nil {
		return e
	}
	// The trailer, then nothing but empty lines to the end of the body.
	// Clients differ in how they end lines here (AWS's SDKs: CRLF and an
	// empty line; minio-go: the checksum line ends in LF alone, and an
	// empty line comes before the trailer signature), so any line ending
	// is taken and empty lines are skipped.
	var canon strings.Builder // the trailer as signed: "name:value\n" lines
	var trailerSig, value string
	for {
		line, e := c.trailerLine()
		if e == errEndOfBody {
			break
		}
		if e != nil {
			return e
		}
		if line == "" {
			continue
		}
		name, v, ok := strings.Cut(line, ":")
		name, v = strings.ToLower(strings.TrimSpace(name)), strings.TrimSpace(v)
		switch {
		case !c.trailer:
			return errInvalidRequest.with("The aws-chunked body goes on after its last chunk.")
		case !ok:
			return errInvalidRequest.with("The aws-chunked trailer line " + strconv.Quote(line) + " is not name:value.")
		case name == trailerSigHeader && c.a != nil && trailerSig == "":
			trailerSig = v
		case c.sum != nil && name == c.sum.alg.header() && value == "" && trailerSig == "":
			value = v
			canon.WriteString(name + ":" + v + "\n")
		default:
			return errInvalidRequest.with("The aws-chunked trailer " + strconv.Quote(name) + " is repeated, out of place or was not declared in x-amz-trailer.")
		}
	}
	if c.trailer && c.a != nil {
		if trailerSig == "" {
			return errSignatureMismatch.with("The aws-chunked trailer has no " + trailerSigHeader + ".")
		}
		if !c.signedBy(trailerSig, trailerSigAlgo, sha256Hex([]byte(canon.String()))) {
			return errSignatureMismatch.with("The trailer signature we calculated does not match the signature you provided.")
		}
	}
	if c.sum != nil {
		got, err := base64.StdEncoding.DecodeString(value)
		switch {
		case value == "":
			return errInvalidRequest.with("The aws-chunked trailer has no " + c.sum.alg.header() + ", which x-amz-trailer declared.")
		case err != nil || len(got) != c.sum.alg.digestSize():
			return errInvalidRequest.with("Value for " + c.sum.alg.header() + " trailing header is invalid.")
		case !hmac.Equal(got, c.h.Sum(nil)):
			return c.sum.alg.mismatch()
		}
		c.sum.want = got
		c.headers[c.sum.alg.header()] = value
	}
	return nil
}

// verify checks a chunk's signature and moves the chain on (signed
// bodies only).
func (c *chunkedReader) verify(sig string, data []byte) *apiError {
	if c.a == nil {
		return nil
	}
	if !c.signedBy(sig, chunkSigAlgo, emptySHA256+"\n"+sha256Hex(data)) {
		return errSignatureMismatch.with("The chunk signature we calculated does not match the signature you provided.")
	}
	c.prev = sig
	return nil
}

// signedBy reports whether sig is the next signature of the chain: of
// algo's string to sign, which ends with the previous signature and
// hashes.
func (c *chunkedReader) signedBy(sig, algo, hashes string) bool {
	sts := algo + "\n" + c.a.date + "\n" + c.a.sc.String() + "\n" + c.prev + "\n" + hashes
	return hmac.Equal([]byte(sig), []byte(hex.EncodeToString(hmacSHA256(c.a.key, sts))))
}

// header reads a chunk header line: the size and, for signed chunks,
// the signature.
func (c *chunkedReader) header() (size int64, sig string, e *apiError) {
	line, e := c.line()
	if e != nil {
		return 0, "", e
	}
	hexSize, ext, _ := strings.Cut(line, ";")
	size, err := strconv.ParseInt(hexSize, 16, 64)
	if err != nil || size < 0 || hexSize == "" || len(hexSize) > 16 {
		return 0, "", errInvalidRequest.with("The aws-chunked chunk header " + strconv.Quote(line) + " does not start with a hex size.")
	}
	if size > maxChunk {
		return 0, "", errInvalidRequest.with("An aws-chunked chunk of " + strconv.FormatInt(size, 10) + " bytes is over the " + strconv.Itoa(maxChunk) + " byte limit.")
	}
	if c.a != nil {
		v, ok := strings.CutPrefix(ext, "chunk-signature=")
		if !ok || len(v) != 64 {
			return 0, "", errSignatureMismatch.with("A signed aws-chunked chunk has no chunk-signature.")
		}
		sig = v
	}
	return size, sig, nil
}

// errEndOfBody is trailerLine's report of the end of the body.
var errEndOfBody = &apiError{}

// trailerLine reads a line after the last chunk, without its line ending
// (LF or CRLF), or errEndOfBody at the end of the body.
func (c *chunkedReader) trailerLine() (string, *apiError) {
	b, err := c.br.ReadSlice('\n')
	switch {
	case err == io.EOF && len(b) == 0:
		return "", errEndOfBody
	case errors.Is(err, bufio.ErrBufferFull):
		return "", errInvalidRequest.with("An aws-chunked trailer line is over " + strconv.Itoa(maxChunkLine) + " bytes.")
	case err != nil:
		return "", readFault(err)
	}
	return strings.TrimSuffix(strings.TrimSuffix(string(b), "\n"), "\r"), nil
}

// line reads one CRLF-terminated line, without the CRLF.
func (c *chunkedReader) line() (string, *apiError) {
	b, err := c.br.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return "", errInvalidRequest.with("An aws-chunked header line is over " + strconv.Itoa(maxChunkLine) + " bytes.")
	case err != nil:
		return "", readFault(err)
	case len(b) < 2 || b[len(b)-2] != '\r':
		return "", errInvalidRequest.with("An aws-chunked line does not end in CRLF.")
	}
	return string(b[:len(b)-2]), nil
}

// crlf reads the CRLF after a chunk's data.
func (c *chunkedReader) crlf() *apiError {
	var b [2]byte
	if _, err := io.ReadFull(c.br, b[:]); err != nil {
		return readFault(err)
	}
	if b != [2]byte{'\r', '\n'} {
		return errInvalidRequest.with("An aws-chunked chunk's data is not followed by CRLF.")
	}
	return nil
}

// readFault is the S3 error of a failed read of the request body.
func readFault(err error) *apiError {
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		return errIncompleteBody.with("The request body ended before the end of its aws-chunked encoding.")
	}
	return errIncompleteBody.with("Reading the request body failed: " + err.Error())
}
