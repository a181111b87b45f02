package h2conn

// How request bodies are cut into DATA frames. A frame costs the server
// work of its own (its parse, its flow-control bookkeeping, a wake-up of
// the handler reading the body) and, while the stream is open, invites
// stream WINDOW_UPDATEs, so bodies go out in as few frames as the peer's
// SETTINGS_MAX_FRAME_SIZE allows: a body of declared length up to
// sendBufLen bytes is one frame when the peer takes frames that large
// (net/http's server announces 1 MiB), as net/http's client sends it (a
// body of unknown length is followed by an empty END_STREAM frame once its
// reader says EOF). Over TLS, crypto/tls writes each 16 KiB record of
// plaintext with its own syscall, so a frame that is not the last of a
// buffered chunk is sized to fill whole records with its 9-byte header.
// For a peer that takes only 16 KiB frames that is a 16,375-byte payload;
// a 16 KiB payload would take two records and two writes.

const (
	tlsRecordLen   = 16384 // plaintext bytes in a full TLS record
	frameHeaderLen = 9     // an HTTP/2 frame's header
)

// maxInlineBody is the largest body sent with the HEADERS (inline.go): one
// DATA frame that fits every peer's frame size and, with its header, one
// TLS record.
const maxInlineBody = tlsRecordLen - frameHeaderLen

// sendBufLen is the size of the buffer a request body is read into: five
// full TLS records with one frame header, so a 64 KiB body and the read
// that finds its EOF fit at once, and a long body's chunks fill records.
const sendBufLen = 5*tlsRecordLen - frameHeaderLen

// recordFrameLen is the largest DATA payload of at most peerMax bytes
// whose frame fills whole TLS records; peerMax is at least 16,384 (the
// smallest SETTINGS_MAX_FRAME_SIZE), so it is at least 16,375.
func recordFrameLen(peerMax uint32) int {
	records := max(int(peerMax+frameHeaderLen)/tlsRecordLen, 1)
	return records*tlsRecordLen - frameHeaderLen
}

// dataFrameLen is the payload of the next DATA frame for want bytes left
// of a buffered chunk (at most sendBufLen), windows aside: all of them if
// the peer takes a frame that large, else a frame of whole records.
func dataFrameLen(want int, peerMax uint32) int {
	if want <= int(peerMax) {
		return want
	}
	return recordFrameLen(peerMax)
}

// bodyReadLen is how many bytes of a request body of declared length
// declared (-1: unknown) one read asks for. A declared body that fits the
// buffer with the byte that finds its EOF is read whole, so it is one
// frame whenever the peer takes a frame that large. Otherwise: the whole
// buffer when a chunk of it goes out as one frame, else a whole number of
// record-filling frames, so that no chunk leaves a short frame behind
// before the body's end.
func bodyReadLen(declared int64, peerMax uint32) int {
	if declared >= 0 && declared < sendBufLen {
		return int(declared) + 1
	}
	if int(peerMax) >= sendBufLen {
		return sendBufLen
	}
	frame := recordFrameLen(peerMax)
	return sendBufLen / frame * frame
}
