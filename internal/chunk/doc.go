// Package chunk cuts object bodies into content-addressed chunks and
// describes an object as a manifest of them.
//
// It is pure: it reads from an io.Reader, calls the load/store callbacks it
// is given, and does no other I/O; it starts no goroutines.
//
//   - Hash, Sum, Hasher: BLAKE3-256, the address of a chunk and the content
//     hash of a whole object.
//   - Chunker: FastCDC content-defined chunking (gear hash, normalized
//     chunking) for uploads. Its gear table is a fixed constant: cut points,
//     and so deduplication, are identical on every node and every build.
//   - Manifest: the ordered chunk list of an object, its binary encoding
//     (magic, version, CRC32C), and read planning (Locate, Span).
//   - WriteAt, Append: byte-range writes that produce a new manifest sharing
//     every untouched chunk with its parent (copy-on-write); the rewritten
//     region is cut into fixed-size pieces.
//
// Where chunks are stored is the segment package's business; which nodes
// hold them is the cluster's.
package chunk
