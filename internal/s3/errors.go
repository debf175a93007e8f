package s3

import (
	"encoding/xml"
	"errors"
	"net/http"

	"github.com/cairn-db/cairn/internal/object"
)

// apiError is an S3 error: the code clients switch on, its HTTP status and
// a message for people.
type apiError struct {
	Code    string
	Status  int
	Message string
}

func (e *apiError) Error() string { return e.Code + ": " + e.Message }

// with returns a copy of e with another message.
func (e *apiError) with(msg string) *apiError {
	c := *e
	c.Message = msg
	return &c
}

// The error table (the S3 API reference's codes and statuses).
var (
	errAccessDenied          = &apiError{"AccessDenied", http.StatusForbidden, "Access Denied."}
	errConditionalConflict   = &apiError{"ConditionalRequestConflict", http.StatusConflict, "A conflicting operation occurred on the same keys. Retry the request."}
	errAuthHeaderMalformed   = &apiError{"AuthorizationHeaderMalformed", http.StatusBadRequest, "The authorization header is malformed."}
	errAuthQueryMalformed    = &apiError{"AuthorizationQueryParametersError", http.StatusBadRequest, "The query parameters that carry the signature are malformed."}
	errBadDigest             = &apiError{"BadDigest", http.StatusBadRequest, "The Content-MD5 you specified did not match what was received."}
	errBucketExists          = &apiError{"BucketAlreadyOwnedByYou", http.StatusConflict, "Your previous request to create the named bucket succeeded and you already own it."}
	errBucketNotEmpty        = &apiError{"BucketNotEmpty", http.StatusConflict, "The bucket you tried to delete is not empty."}
	errContentSHA256Mismatch = &apiError{"XAmzContentSHA256Mismatch", http.StatusBadRequest, "The provided 'x-amz-content-sha256' header does not match what was computed."}
	errEntityTooLarge        = &apiError{"EntityTooLarge", http.StatusBadRequest, "Your proposed upload exceeds the maximum allowed object size."}
	errIncompleteBody        = &apiError{"IncompleteBody", http.StatusBadRequest, "You did not provide the number of bytes specified by the Content-Length HTTP header."}
	errInternal              = &apiError{"InternalError", http.StatusInternalServerError, "We encountered an internal error. Please try again."}
	errInvalidAccessKey      = &apiError{"InvalidAccessKeyId", http.StatusForbidden, "The access key Id you provided does not exist in our records."}
	errInvalidArgument       = &apiError{"InvalidArgument", http.StatusBadRequest, "Invalid argument."}
	errInvalidBucketName     = &apiError{"InvalidBucketName", http.StatusBadRequest, "The specified bucket is not valid."}
	errInvalidDigest         = &apiError{"InvalidDigest", http.StatusBadRequest, "The Content-MD5 you specified is not valid."}
	errInvalidRange          = &apiError{"InvalidRange", http.StatusRequestedRangeNotSatisfiable, "The requested range is not satisfiable."}
	errInvalidRequest        = &apiError{"InvalidRequest", http.StatusBadRequest, "Invalid request."}
	errKeyTooLong            = &apiError{"KeyTooLongError", http.StatusBadRequest, "Your key is too long."}
	errMalformedXML          = &apiError{"MalformedXML", http.StatusBadRequest, "The XML you provided was not well-formed or did not validate against our published schema."}
	errMethodNotAllowed      = &apiError{"MethodNotAllowed", http.StatusMethodNotAllowed, "The specified method is not allowed against this resource."}
	errMissingContentLength  = &apiError{"MissingContentLength", http.StatusLengthRequired, "You must provide the Content-Length HTTP header."}
	errMissingSecurityHeader = &apiError{"MissingSecurityHeader", http.StatusBadRequest, "Your request is missing a required header."}
	errNoSuchBucket          = &apiError{"NoSuchBucket", http.StatusNotFound, "The specified bucket does not exist"}
	errNoSuchKey             = &apiError{"NoSuchKey", http.StatusNotFound, "The specified key does not exist."}
	errNoSuchVersion         = &apiError{"NoSuchVersion", http.StatusNotFound, "The specified version does not exist."}
	errNotImplemented        = &apiError{"NotImplemented", http.StatusNotImplemented, "A header or query you provided implies functionality that is not implemented."}
	errNotModified           = &apiError{"NotModified", http.StatusNotModified, "Not Modified."}
	errPreconditionFailed    = &apiError{"PreconditionFailed", http.StatusPreconditionFailed, "At least one of the preconditions you specified did not hold."}
	errRequestExpired        = &apiError{"AccessDenied", http.StatusForbidden, "Request has expired."}
	errRequestTimeout        = &apiError{"RequestTimeout", http.StatusBadRequest, "Your socket connection to the server was not read from or written to within the timeout period."}
	errServiceUnavailable    = &apiError{"ServiceUnavailable", http.StatusServiceUnavailable, "Please reduce your request rate."}
	errSignatureMismatch     = &apiError{"SignatureDoesNotMatch", http.StatusForbidden, "The request signature we calculated does not match the signature you provided. Check your key and signing method."}
	errTimeTooSkewed         = &apiError{"RequestTimeTooSkewed", http.StatusForbidden, "The difference between the request time and the server's time is too large."}
)

// fromService maps an error of the object service to an S3 error.
func fromService(err error) *apiError {
	var ae *apiError
	if errors.As(err, &ae) {
		return ae
	}
	msg := serviceMessage(err)
	switch object.KindOf(err) {
	case object.NotFound, object.Deleted:
		return errNoSuchKey
	case object.SpaceNotFound:
		return errNoSuchBucket
	case object.SpaceExists:
		return errBucketExists
	case object.SpaceNotEmpty:
		return errBucketNotEmpty
	case object.BadSpaceName:
		return errInvalidBucketName.with(msg)
	case object.KeyTooLong:
		return errKeyTooLong
	case object.PreconditionFailed:
		return errPreconditionFailed
	case object.Truncated:
		return errIncompleteBody
	case object.TooLarge:
		return errEntityTooLarge.with(msg)
	case object.InvalidArgument, object.Malformed:
		return errInvalidArgument.with(msg)
	case object.InvalidRange:
		return errInvalidRange
	case object.NotLeader, object.Unavailable, object.RangeMoved:
		return errServiceUnavailable.with(msg)
	case object.TxnConflict, object.TxnAborted:
		return errConditionalConflict
	case object.Canceled:
		return errRequestTimeout
	case object.AccessDenied:
		return errAccessDenied.with(msg)
	}
	return errInternal
}

// serviceMessage is the message of err's *object.Error, or err's text.
func serviceMessage(err error) string {
	var oe *object.Error
	if errors.As(err, &oe) {
		return oe.Message
	}
	return err.Error()
}

// errorBody is S3's error document.
type errorBody struct {
	XMLName   xml.Name `xml:"Error"`
	Code      string   `xml:"Code"`
	Message   string   `xml:"Message"`
	Resource  string   `xml:"Resource,omitempty"`
	RequestID string   `xml:"RequestId"`
}

// writeError answers r with e (no body for HEAD, as S3 does).
func writeError(w http.ResponseWriter, r *http.Request, e *apiError) {
	w.Header().Set("x-amz-error-code", e.Code)
	if r.Method == http.MethodHead || e.Status == http.StatusNotModified {
		w.WriteHeader(e.Status)
		return
	}
	writeXML(w, e.Status, errorBody{
		Code: e.Code, Message: e.Message, Resource: r.URL.Path,
		RequestID: w.Header().Get("x-amz-request-id"),
	})
}

// writeXML writes v as the response body with status.
func writeXML(w http.ResponseWriter, status int, v any) {
	b, err := xml.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte("<Error><Code>InternalError</Code></Error>")
	}
	writeXMLBody(w, status, b)
}

// writeXMLBody writes the XML declaration and body, an encoded element, as
// the response body with status.
func writeXMLBody(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	_, _ = w.Write([]byte(xml.Header))
	_, _ = w.Write(body)
}
