// Package object is the object service's contract: what every protocol
// serves (the native protocol, S3, and those to come), independent of any
// of them.
//
//   - Service (service.go): spaces and versioned objects, and the optional
//     capabilities a Service may add (Composer, Tagger, MarkedDeleter,
//     RetentionSetter), found by type assertion.
//   - The request and result types (object.go, space.go), shared by every
//     protocol; a protocol's codec encodes them, nothing here knows a byte
//     format.
//   - Domain errors (errors.go): one Error type whose Kind says what went
//     wrong and whose class (retryable, not found, conflict, invalid,
//     corrupt, denied, unknown outcome) says what a caller may do about it.
//     Each protocol maps kinds to its own codes in one table.
//   - MemService (memservice.go): an in-memory Service for the tests of
//     protocols and clients.
//
// Every method of a Service may be called concurrently.
package object
