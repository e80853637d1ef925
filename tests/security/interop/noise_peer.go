// noise_peer: the other end of weft's Noise interop test, written with github.com/flynn/noise
// (an independent implementation of the Noise framework). It plays one role of
// Noise_IKpsk2_25519_{ChaChaPoly,AESGCM}_BLAKE2s over stdin/stdout, then exchanges records in
// weft's record format (docs/security.md), and checks everything it receives.
//
// Wire on the pipes: handshake messages as u32le length + bytes; records as weft records
// (u32le length, body, 16-byte tag), in encrypt or auth mode, rekeyed every -rekey records.
package main

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/flynn/noise"
)

var (
	role      = flag.String("role", "init", "init or resp")
	suite     = flag.String("suite", "chachapoly", "chachapoly or aesgcm")
	mode      = flag.String("mode", "encrypt", "encrypt or auth")
	rekey     = flag.Uint64("rekey", 3, "records per key")
	records   = flag.Int("records", 8, "records each way")
	staticKey = flag.String("static", "", "this side's static private key (hex)")
	remote    = flag.String("remote", "", "the responder's static public key (hex, initiator)")
	ephemeral = flag.String("ephemeral", "", "this side's ephemeral private key (hex)")
	psk       = flag.String("psk", "", "pre-shared key (hex)")
	prologue  = flag.String("prologue", "", "prologue (hex)")
	payload   = flag.String("payload", "", "this side's handshake payload (hex)")
	expect    = flag.String("expect", "", "the peer's handshake payload (hex)")
	expectRS  = flag.String("expect-remote", "", "responder: the initiator's static public key (hex)")
)

var sizes = []int{0, 1, 24, 1000, 65536, 300000, 17, 4096}

func die(format string, args ...interface{}) {
	fmt.Fprintf(os.Stderr, "noise_peer ("+*role+"): "+format+"\n", args...)
	os.Exit(1)
}

func unhex(s string) []byte {
	b, err := hex.DecodeString(s)
	if err != nil {
		die("bad hex %q: %v", s, err)
	}
	return b
}

// pattern is the plaintext of record i, the same on both sides.
func pattern(i int) []byte {
	b := make([]byte, sizes[i%len(sizes)])
	for j := range b {
		b[j] = byte(i*7 + j*31 + (j >> 8))
	}
	return b
}

type link struct {
	in    *bufio.Reader
	out   *bufio.Writer
	send  *noise.CipherState
	recv  *noise.CipherState
	nSend uint64
	nRecv uint64
	auth  bool
}

func (l *link) writeMessage(m []byte) {
	var n [4]byte
	binary.LittleEndian.PutUint32(n[:], uint32(len(m)))
	l.out.Write(n[:])
	l.out.Write(m)
	if err := l.out.Flush(); err != nil {
		die("write: %v", err)
	}
}

func (l *link) readMessage() []byte {
	var n [4]byte
	if _, err := io.ReadFull(l.in, n[:]); err != nil {
		die("read: %v", err)
	}
	m := make([]byte, binary.LittleEndian.Uint32(n[:]))
	if _, err := io.ReadFull(l.in, m); err != nil {
		die("read: %v", err)
	}
	return m
}

func (l *link) sealRecord(pt []byte) {
	if l.nSend != 0 && l.nSend%*rekey == 0 {
		l.send.Rekey()
	}
	header := make([]byte, 4)
	binary.LittleEndian.PutUint32(header, uint32(len(pt)))
	var record []byte
	var err error
	if l.auth {
		ad := append(append([]byte{}, header...), pt...)
		var tag []byte
		tag, err = l.send.Encrypt(nil, ad, nil)
		record = append(append(append([]byte{}, header...), pt...), tag...)
	} else {
		var ct []byte
		ct, err = l.send.Encrypt(nil, header, pt)
		record = append(append([]byte{}, header...), ct...)
	}
	if err != nil {
		die("encrypt: %v", err)
	}
	l.nSend++
	l.out.Write(record)
	if err := l.out.Flush(); err != nil {
		die("write: %v", err)
	}
}

func (l *link) openRecord() []byte {
	if l.nRecv != 0 && l.nRecv%*rekey == 0 {
		l.recv.Rekey()
	}
	header := make([]byte, 4)
	if _, err := io.ReadFull(l.in, header); err != nil {
		die("read: %v", err)
	}
	n := binary.LittleEndian.Uint32(header)
	rest := make([]byte, int(n)+16)
	if _, err := io.ReadFull(l.in, rest); err != nil {
		die("read: %v", err)
	}
	var pt []byte
	var err error
	if l.auth {
		ad := append(append([]byte{}, header...), rest[:n]...)
		_, err = l.recv.Decrypt(nil, ad, rest[n:])
		pt = rest[:n]
	} else {
		pt, err = l.recv.Decrypt(nil, header, rest)
	}
	if err != nil {
		die("record %d failed to open: %v", l.nRecv, err)
	}
	l.nRecv++
	return pt
}

func main() {
	flag.Parse()
	var cipher noise.CipherFunc = noise.CipherChaChaPoly
	if *suite == "aesgcm" {
		cipher = noise.CipherAESGCM
	}
	cs := noise.NewCipherSuite(noise.DH25519, cipher, noise.HashBLAKE2s)
	static, err := cs.GenerateKeypair(bytes.NewReader(unhex(*staticKey)))
	if err != nil {
		die("static key: %v", err)
	}
	initiator := *role == "init"
	config := noise.Config{
		CipherSuite:           cs,
		Random:                bytes.NewReader(unhex(*ephemeral)), // the fixed ephemeral key
		Pattern:               noise.HandshakeIK,
		Initiator:             initiator,
		Prologue:              unhex(*prologue),
		PresharedKey:          unhex(*psk),
		PresharedKeyPlacement: 2,
		StaticKeypair:         static,
	}
	if initiator {
		config.PeerStatic = unhex(*remote)
	}
	hs, err := noise.NewHandshakeState(config)
	if err != nil {
		die("handshake state: %v", err)
	}
	l := &link{in: bufio.NewReader(os.Stdin), out: bufio.NewWriter(os.Stdout), auth: *mode == "auth"}
	var c1, c2 *noise.CipherState
	if initiator {
		m1, _, _, err := hs.WriteMessage(nil, unhex(*payload))
		if err != nil {
			die("write message 1: %v", err)
		}
		l.writeMessage(m1)
		var p2 []byte
		p2, c1, c2, err = hs.ReadMessage(nil, l.readMessage())
		if err != nil {
			die("read message 2: %v", err)
		}
		if !bytes.Equal(p2, unhex(*expect)) {
			die("message 2 payload %x, expected %s", p2, *expect)
		}
		l.send, l.recv = c1, c2
	} else {
		p1, _, _, err := hs.ReadMessage(nil, l.readMessage())
		if err != nil {
			die("read message 1: %v", err)
		}
		if !bytes.Equal(p1, unhex(*expect)) {
			die("message 1 payload %x, expected %s", p1, *expect)
		}
		if !bytes.Equal(hs.PeerStatic(), unhex(*expectRS)) {
			die("initiator static key %x, expected %s", hs.PeerStatic(), *expectRS)
		}
		var m2 []byte
		m2, c1, c2, err = hs.WriteMessage(nil, unhex(*payload))
		if err != nil {
			die("write message 2: %v", err)
		}
		l.writeMessage(m2)
		l.send, l.recv = c2, c1
	}
	// Records: the initiator sends pattern(i), the responder checks it and echoes it back.
	for i := 0; i < *records; i++ {
		if initiator {
			l.sealRecord(pattern(i))
			if got := l.openRecord(); !bytes.Equal(got, pattern(i)) {
				die("echo of record %d differs", i)
			}
		} else {
			got := l.openRecord()
			if !bytes.Equal(got, pattern(i)) {
				die("record %d differs from the pattern", i)
			}
			l.sealRecord(got)
		}
	}
	// Last, each side sends its handshake hash; both must be the same.
	l.sealRecord(hs.ChannelBinding())
	if got := l.openRecord(); !bytes.Equal(got, hs.ChannelBinding()) {
		die("handshake hash %x, peer has %x", hs.ChannelBinding(), got)
	}
	fmt.Fprintf(os.Stderr, "noise_peer (%s, %s, %s): handshake and %d records each way ok\n",
		*role, *suite, *mode, *records+1)
}
