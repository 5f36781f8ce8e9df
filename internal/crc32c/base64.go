package crc32c

import (
	"encoding/base64"
	"encoding/binary"
)

// Base64 is crc as GCS and gcloud show it (crc32c_hash, "Hash (crc32c)",
// gcloud storage hash): the base64 of its four big-endian bytes. ferry
// prints it this way wherever a user compares with them; JSON messages
// keep the unsigned integer.
func Base64(crc uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], crc)
	return base64.StdEncoding.EncodeToString(b[:])
}
