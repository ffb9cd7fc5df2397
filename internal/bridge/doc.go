// Package bridge hands decoded batches from a datahelix rank to its
// trainer process: a Unix SOCK_SEQPACKET socket carries small
// fixed-layout control messages, and a ring of batch slots in an unnamed
// shared-memory file (a memfd, passed over the socket) carries the
// pixels and text, which the trainer's client maps once and reads as
// zero-copy tensors.
//
// The layout of every message is written down in docs/bridge.md, the one
// place both sides follow; the Python client (python/datahelix) and this
// package test against the same golden messages in testdata/.
//
// Nothing here is named on a file system: datahelix train passes one end
// of a socketpair to its child, datahelix serve listens on an abstract
// socket, and the ring is a memfd. Killing either side with SIGKILL
// leaves nothing behind in /dev/shm or elsewhere.
package bridge
