package launcher

import (
	"fmt"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/communicator"
)

// peerWatch ends the job when a peer can no longer be reached (a lost
// node, a cut link), whatever the training does: a slow step (a long
// checkpoint write, a slow GPU) is no failure, and the stall watchdog
// (--stall-timeout) keeps its minutes for those. Every rank sends rank 0
// a small heartbeat on a communicator of its own every few seconds, and
// rank 0 sends one to every rank: rank 0 names the ranks it no longer
// hears from, and a rank cut off from rank 0 notices on its own and
// exits, so that no rank is left running on a node nobody can reach.
type peerWatch struct {
	hb      *communicator.World
	every   time.Duration
	timeout time.Duration
	lost    func(msg string)
	done    chan struct{}
	clean   bool // set before done closes: every rank ends normally
	wg      sync.WaitGroup
}

// Message tags on the heartbeat communicator.
const (
	tagBeat = 1 // payload 0: alive; 1: done, expect no more
)

// watchPeers starts a peerWatch of w's ranks, calling lost once when a
// peer has been silent for timeout. It returns nil (which does nothing)
// for a world of one, a timeout of 0, or an MPI that did not grant
// MPI_THREAD_MULTIPLE (its calls then wait behind a blocking collective,
// and the heartbeat would seem lost whenever a peer is slow). Every rank
// must call it with the same timeout: it duplicates w's communicator.
func watchPeers(w *communicator.World, timeout time.Duration, lost func(msg string)) (*peerWatch, error) {
	if timeout <= 0 || w.Size() < 2 || !w.Info().ThreadMultiple {
		return nil, nil
	}
	d, err := w.Dup()
	if err != nil {
		return nil, err
	}
	p := &peerWatch{hb: d.(*communicator.World), every: min(max(timeout/10, 100*time.Millisecond), 2*time.Second),
		timeout: timeout, lost: lost, done: make(chan struct{})}
	p.wg.Add(1)
	go p.run()
	return p, nil
}

// stop ends the watch. When clean (the job ends normally: every rank
// will call MPI_Finalize), it tells the peers it watched to expect no
// more heartbeats from this rank (a rank that finishes first is not
// lost) and takes theirs, so that none is left unreceived at
// MPI_Finalize; otherwise (the job is being aborted) it just stops.
func (p *peerWatch) stop(clean bool) {
	if p == nil {
		return
	}
	p.clean = clean
	close(p.done)
	p.wg.Wait()
}

func (p *peerWatch) run() {
	defer p.wg.Done()
	me := p.hb.Rank()
	peers := []int{0}
	if me == 0 {
		peers = nil
		for r := 1; r < p.hb.Size(); r++ {
			peers = append(peers, r)
		}
	}
	start := time.Now()
	last := make(map[int]time.Time, len(peers))
	for _, r := range peers {
		last[r] = start
	}
	watched := slices.Clone(peers)
	byeFrom := map[int]bool{}
	var sends []*collective.Request
	alive, bye := []byte{0}, []byte{1}
	buf := make([]byte, 8)
	pending := map[int]*collective.Request{} // the last beat to each peer
	beat := func(msg []byte, force bool) {
		for _, r := range peers {
			if req := pending[r]; req != nil && !force {
				if done, _ := p.hb.Test(req); !done {
					continue // the last one is still on its way
				}
			}
			if req, err := p.hb.Isend(msg, r, tagBeat); err == nil {
				pending[r] = req
				sends = append(sends, req)
			}
		}
	}
	// receive takes every heartbeat that has arrived; false on an error.
	receive := func(now time.Time) bool {
		for {
			src, n, ok, err := p.hb.TryRecv(buf, tagBeat)
			if err != nil {
				p.lost(fmt.Sprintf("heartbeat: %v", err))
				return false
			}
			if !ok {
				return true
			}
			if _, watching := last[src]; watching {
				last[src] = now
			}
			if n == 1 && buf[0] == 1 { // it is done: expect no more
				byeFrom[src] = true
				delete(last, src)
				peers = slices.DeleteFunc(peers, func(r int) bool { return r == src })
			}
		}
	}
	tick := time.NewTicker(p.every / 2)
	defer tick.Stop()
	prev, sent := start, time.Time{}
	for {
		select {
		case <-p.done:
			if !p.clean {
				return
			}
			// Say goodbye, then take every heartbeat still on its way
			// (a peer's goodbye comes after its last beat): none may be
			// left unreceived at MPI_Finalize.
			peers = watched
			beat(bye, true)
			deadline := time.Now().Add(p.timeout)
			for len(byeFrom) < len(watched) && time.Now().Before(deadline) {
				if !receive(time.Now()) {
					return
				}
				time.Sleep(time.Millisecond)
			}
			for _, req := range sends {
				for time.Now().Before(deadline) {
					if done, _ := p.hb.Test(req); done {
						break
					}
					time.Sleep(time.Millisecond)
				}
			}
			return
		case now := <-tick.C:
			if now.Sub(prev) > 3*p.every+time.Second {
				// This process did not run for a while (suspended, swapped):
				// its peers' silence says nothing.
				for r := range last {
					last[r] = now
				}
			}
			prev = now
			if !receive(now) {
				return
			}
			if now.Sub(sent) >= p.every {
				beat(alive, false)
				sent = now
			}
			// Once one peer is past the timeout, name every peer silent
			// for half of it: a lost node's ranks fall silent together.
			var silent []string
			lost := false
			for _, r := range peers {
				quiet := now.Sub(last[r])
				lost = lost || quiet > p.timeout
				if quiet > p.timeout/2 {
					silent = append(silent, fmt.Sprint(r))
				}
			}
			if !lost {
				continue
			}
			if me == 0 {
				p.lost(fmt.Sprintf("rank %s unreachable: no heartbeat for %v (--peer-timeout): a node or its link is lost",
					strings.Join(silent, ", rank "), p.timeout))
			} else {
				p.lost(fmt.Sprintf("rank 0 unreachable: no heartbeat for %v (--peer-timeout): this rank is cut off from the job, or rank 0's node is lost", p.timeout))
			}
			return
		}
	}
}

// abortOrExit aborts the job with msg, and exits the process with code
// if the abort has not ended it within grace: an abort needs the network
// it may just have lost, and a rank must not outlive its job.
func abortOrExit(w *communicator.World, code int, msg string, grace time.Duration) {
	go func() {
		time.Sleep(grace)
		fmt.Fprintf(os.Stderr, "datahelix: rank %d: the abort did not end the job within %v; exiting (status %d)\n", w.Rank(), grace, code)
		os.Exit(code)
	}()
	w.Abort(code, msg)
}
