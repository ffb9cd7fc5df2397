package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Batch is one step's batch as a Source hands it over.
type Batch struct {
	Step    int64
	Samples []Input
	Dropped []Dropped
	Audio   bool // the audio output is on: the BATCH carries an audio table
}

// Source is what a Server serves: one rank's loader.
type Source interface {
	// Next delivers the batch of the next step, waiting until it is
	// ready: the training loop asked for it now. gpuStep is the GPU time
	// of the previous step as the trainer measured it, 0 when it did
	// not. It returns io.EOF after the last step.
	Next(ctx context.Context, gpuStep time.Duration) (*Batch, error)
	// Peek waits until the batch of step is ready and returns it without
	// delivering it, so that the server can copy it into the ring before
	// the trainer asks. It returns ErrDelivered when Next took step
	// first, and io.EOF for a step past the last.
	Peek(ctx context.Context, step int64) (*Batch, error)
}

// ErrDelivered is Peek's error for a batch that was delivered already.
var ErrDelivered = errors.New("bridge: batch delivered already")

// ErrBye is Serve's result when the client said it is done.
var ErrBye = errors.New("bridge: the client is done")

// ReadHello waits until deadline for the client's HELLO.
func ReadHello(c *Conn, deadline time.Time) (Hello, error) {
	m, fd, err := c.Recv(deadline)
	if fd >= 0 {
		unix.Close(fd)
	}
	if err != nil {
		return Hello{}, err
	}
	if m.Type != TypeHello {
		return Hello{}, fmt.Errorf("%w: %s before HELLO", ErrMessage, m.Type)
	}
	return ParseHello(m.Payload)
}

// SendWelcome sends w with the ring's memfd.
func SendWelcome(c *Conn, w Welcome, r *Ring) error {
	p, err := json.Marshal(w)
	if err != nil {
		return err
	}
	return c.Send(Encode(TypeWelcome, p), r.FD())
}

// SendText sends a REFUSE or ERROR with a message.
func SendText(c *Conn, t Type, msg string) error {
	if len(msg) > MaxMessage-HeaderSize {
		msg = msg[:MaxMessage-HeaderSize]
	}
	return c.Send(Encode(t, []byte(msg)))
}

// Server serves batches from a Source to one client over Conn and Ring,
// after the handshake. It copies each batch into a free slot of the ring
// as soon as the batch is decoded (when Stage is set), so that handing
// it over on the trainer's request is one message.
type Server struct {
	Conn  *Conn
	Ring  *Ring
	Src   Source
	First int64 // the first step the client asks for
	Stage bool  // copy batches into the ring before they are asked for

	mu      sync.Mutex
	cond    *sync.Cond
	slotOf  []int64             // step held in each slot, -1 free
	filled  map[int64]placement // step → where it is, once copied
	filling map[int64]int       // step → slot, while being copied
	placed  int64               // highest step placed in a slot
	sent    int64               // highest step whose BATCH went out
	asked   int64               // next step the client will ask for
	stop    bool                // Serve returned
}

// placement is a batch copied into the ring: its slot and entries.
type placement struct {
	slot    int
	entries []Sample
}

// Serve answers the client's messages until it says BYE (ErrBye), closes
// the connection (ErrClosed), ctx ends, or the source fails: then the
// client gets an ERROR saying why, and Serve returns the error.
func (s *Server) Serve(ctx context.Context) error {
	s.cond = sync.NewCond(&s.mu)
	s.slotOf = make([]int64, s.Ring.Slots)
	for i := range s.slotOf {
		s.slotOf[i] = -1
	}
	s.filled, s.filling = map[int64]placement{}, map[int64]int{}
	s.placed, s.sent, s.asked = s.First-1, s.First-1, s.First
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() {
		cancel()
		s.mu.Lock()
		s.stop = true
		s.cond.Broadcast()
		s.mu.Unlock()
		wg.Wait()
	}()
	if s.Stage {
		wg.Add(1)
		go func() { defer wg.Done(); s.stage(ctx) }()
	}
	// A cancelled ctx ends a Recv that waits for the client.
	stop := context.AfterFunc(ctx, func() { s.Conn.uc.SetReadDeadline(time.Unix(1, 0)) })
	defer stop()
	ended := false
	for {
		m, fd, err := s.Conn.Recv(time.Time{})
		if fd >= 0 {
			unix.Close(fd)
		}
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			return err
		}
		switch m.Type {
		case TypeNext:
			n, err := ParseNext(m.Payload)
			if err != nil {
				return s.fail(err)
			}
			if n.Step != s.asked { // only Serve writes asked
				return s.fail(fmt.Errorf("%w: NEXT for step %d, the next is %d", ErrMessage, n.Step, s.asked))
			}
			s.release(n.ReleaseBelow)
			if ended {
				return s.fail(fmt.Errorf("%w: NEXT for step %d after END", ErrMessage, n.Step))
			}
			var gpu time.Duration
			if n.GPUStepUS > 0 {
				gpu = time.Duration(n.GPUStepUS) * time.Microsecond
			}
			b, err := s.Src.Next(ctx, gpu)
			if errors.Is(err, io.EOF) {
				ended = true
				if err := s.Conn.Send(EncodeInt64(TypeEnd, n.Step)); err != nil {
					return err
				}
				continue
			}
			if err != nil {
				return s.fail(err)
			}
			if b.Step != n.Step {
				return s.fail(fmt.Errorf("bridge: the loader delivered step %d for a request of step %d", b.Step, n.Step))
			}
			msg, err := s.place(ctx, b)
			if err != nil {
				return s.fail(err)
			}
			s.mu.Lock()
			s.asked++
			err = s.sendLocked(msg)
			s.mu.Unlock()
			if err != nil {
				return s.fail(err)
			}
		case TypeRelease:
			below, err := ParseRelease(m.Payload)
			if err != nil {
				return s.fail(err)
			}
			s.release(below)
		case TypeBye:
			return ErrBye
		default:
			return s.fail(fmt.Errorf("%w: unexpected %s", ErrMessage, m.Type))
		}
	}
}

// fail tells the client why the server stops, and returns err.
func (s *Server) fail(err error) error {
	SendText(s.Conn, TypeError, err.Error())
	return err
}

// sendLocked sends the BATCH of msg unless it went out already (the
// stager sends a batch as soon as it is in its slot, so that the client
// finds it waiting when it asks). BATCHes go out in step order.
func (s *Server) sendLocked(msg BatchMsg) error {
	if msg.Step <= s.sent {
		return nil
	}
	p, err := msg.Encode()
	if err != nil {
		return err
	}
	if err := s.Conn.Send(p); err != nil {
		return err
	}
	s.sent = msg.Step
	return nil
}

// release frees the slots of every step below below that the client got.
func (s *Server) release(below int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	below = min(below, s.asked)
	for i, st := range s.slotOf {
		if st >= 0 && st < below {
			if _, ok := s.filled[st]; ok {
				delete(s.filled, st)
				s.slotOf[i] = -1
			}
		}
	}
	s.cond.Broadcast()
}

// place returns the BATCH of b, copying b into a free slot unless the
// stager did.
func (s *Server) place(ctx context.Context, b *Batch) (BatchMsg, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for {
		if p, ok := s.filled[b.Step]; ok {
			return s.msg(b, p), nil
		}
		if _, ok := s.filling[b.Step]; !ok {
			break
		}
		s.cond.Wait()
		if ctx.Err() != nil {
			return BatchMsg{}, context.Cause(ctx)
		}
	}
	p, err := s.fillLocked(b)
	if err != nil {
		return BatchMsg{}, err
	}
	return s.msg(b, p), nil
}

// fillLocked claims a free slot for b and copies b into it (with s.mu
// unlocked during the copy).
func (s *Server) fillLocked(b *Batch) (placement, error) {
	slot := -1
	for i, st := range s.slotOf {
		if st < 0 {
			slot = i
			break
		}
	}
	if slot < 0 {
		return placement{}, fmt.Errorf("bridge: the trainer holds all %d ring slots and asks for step %d: release batches (Loader keep below %d) or raise --ring-slots", s.Ring.Slots, b.Step, s.Ring.Slots)
	}
	s.slotOf[slot] = b.Step
	s.filling[b.Step] = slot
	s.mu.Unlock()
	e, err := s.Ring.Fill(slot, b.Samples)
	s.mu.Lock()
	delete(s.filling, b.Step)
	if err != nil {
		s.slotOf[slot] = -1
		s.cond.Broadcast()
		return placement{}, err
	}
	p := placement{slot: slot, entries: e}
	s.filled[b.Step] = p
	s.placed = max(s.placed, b.Step)
	s.cond.Broadcast()
	return p, nil
}

// msg is the BATCH of b, placed at p.
func (s *Server) msg(b *Batch, p placement) BatchMsg {
	return BatchMsg{Step: b.Step, Slot: uint32(p.slot), SlotOffset: uint64(s.Ring.Offset(p.slot)), Samples: p.entries, Dropped: b.Dropped, Audio: b.Audio}
}

// stage copies batches into free slots as soon as they are decoded, in
// step order, never past a step it has not seen placed.
func (s *Server) stage(ctx context.Context) {
	for t := s.First; ; t++ {
		b, err := s.Src.Peek(ctx, t)
		s.mu.Lock()
		if errors.Is(err, ErrDelivered) {
			// The request came first: wait for it to be placed.
			for s.placed < t && !s.stop {
				s.cond.Wait()
			}
		}
		if err != nil || s.stop {
			done := s.stop || !errors.Is(err, ErrDelivered)
			s.mu.Unlock()
			if done {
				return // io.EOF, ctx, or the source's error, which Next reports
			}
			continue
		}
		for !s.stop && !s.claimed(t) && !s.hasFree() {
			s.cond.Wait()
		}
		if !s.stop && !s.claimed(t) {
			p, err := s.fillLocked(b)
			if err != nil {
				s.mu.Unlock()
				return // Next's own copy reports it
			}
			if t == s.sent+1 && !s.stop {
				// Ahead of the request: the client reads it when it asks,
				// with no round trip. A failed send ends Serve's next
				// Recv or Send too.
				if err := s.sendLocked(s.msg(b, p)); err != nil {
					s.mu.Unlock()
					return
				}
			}
		}
		stop := s.stop
		s.mu.Unlock()
		if stop {
			return
		}
	}
}

func (s *Server) claimed(t int64) bool {
	_, a := s.filled[t]
	_, b := s.filling[t]
	return a || b || t < s.asked
}

func (s *Server) hasFree() bool {
	for _, st := range s.slotOf {
		if st < 0 {
			return true
		}
	}
	return false
}
