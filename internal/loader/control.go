package loader

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/gpu"
	"github.com/datahelix/datahelix/internal/agree"
	"github.com/datahelix/datahelix/internal/decoding"
	"github.com/datahelix/datahelix/internal/planlimits"
	"github.com/datahelix/datahelix/internal/step"
	"github.com/datahelix/datahelix/internal/video"
	"github.com/datahelix/datahelix/internal/wire"
	"github.com/datahelix/datahelix/plan"
)

// control is the rank's control loop: for each step, once the step is
// within the planning horizon, it reads the rank's next B samples, builds
// their records and estimates, and — for planned loaders — allgathers the
// blocks, plans, and exchanges compressed samples; then it queues the
// batch's decode tasks. It is the only goroutine that uses the loader's
// communicator, so collectives run in the same order on every rank.
func (l *Loader) control(ctx context.Context) {
	defer l.wg.Done()
	defer func() {
		l.mu.Lock()
		l.controlDone = true
		l.cond.Broadcast()
		l.mu.Unlock()
	}()
	var stepper step.Stepper
	for s := l.first; s < int64(l.cfg.Steps); s++ {
		if !l.waitWindow(s) {
			return
		}
		own, err := l.readOwn(ctx, s)
		if err != nil {
			l.fail(err)
			return
		}
		var bs *batchState
		if l.cfg.Loader.stepKind().Planned() {
			bs, err = l.planned(ctx, s, own, &stepper)
		} else {
			bs, err = l.unplanned(s, own)
		}
		if err != nil {
			l.fail(err)
			return
		}
		l.enqueue(bs)
	}
}

// waitWindow blocks until step s is within the horizon of the last
// delivered step and the compressed-bytes budget has room. It returns
// false when the loader is closing or failed.
func (l *Loader) waitWindow(s int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	defer func() { l.parked = false }()
	for !l.closed && l.fatal == nil {
		inWindow := s <= l.delivered+int64(l.cfg.Horizon)
		room := l.held < l.cfg.CompressedBudget || s == l.delivered+1 || l.stopping
		if inWindow && room {
			b, err := l.reader.MarshalJSON()
			if err != nil {
				l.fatal = err
				return false
			}
			l.snaps[s] = snapshot{reader: b}
			return true
		}
		if !inWindow && !l.parked {
			l.parked = true
			l.cond.Broadcast() // Quiesce waits for it
		}
		l.cond.Wait()
	}
	return false
}

// readOwn reads this rank's B samples of step s, with records, estimates
// and the split of heavy clips.
func (l *Loader) readOwn(ctx context.Context, s int64) ([]*slotState, error) {
	own := make([]*slotState, l.cfg.Batch)
	var bytes int64
	for i := range own {
		ref, epoch := l.reader.Next()
		smp, err := l.ds.ReadSample(ref.Shard, ref.Index)
		if err != nil {
			// The shard was readable at start-up; failing now means the
			// file changed or the disk failed under us.
			return nil, fmt.Errorf("step %d: %w", s, err)
		}
		smp.Epoch = epoch // seeds its transforms wherever it is decoded
		st := &slotState{sample: smp, partsLeft: 1}
		st.item = step.Item{ID: ref.ID(epoch), Owner: l.comm.Rank(), Bytes: wire.Size(smp)}
		l.describe(st, 0)
		if st.recErr != nil && l.logs(st.item.ID) {
			// The owner reports a sample whose record cannot be read:
			// only it reads the sample.
			l.mu.Lock()
			l.logDrop(s, st.sample, st.recErr)
			l.mu.Unlock()
		}
		own[i] = st
		bytes += st.item.Bytes
	}
	l.mu.Lock()
	l.held += bytes
	l.mu.Unlock()
	return own, context.Cause(ctx)
}

// describe parses the sample's record under the decoder's options
// (cfg.Decode: its limits, and its audio when the audio output is on)
// and fills its estimate (est when positive, else the cost model's, at
// most planlimits.Cost), split, decoded size and GPU time.
// A sample whose record fails still takes part in the step (it belongs to
// the global batch); it will be dropped at decode time.
func (l *Loader) describe(st *slotState, est int64) {
	rec, err := decoding.ParseRecordFor(st.sample, l.cfg.Decode)
	st.rec, st.recErr = rec, err
	f, sz := int64(l.cfg.Decode.Frames), int64(l.cfg.Decode.Size)
	if err != nil {
		st.item.Est = 1
		st.item.Mem = 0
		return
	}
	st.item.Est = est
	if est <= 0 {
		// A record the parser accepts may still claim absurd sizes (an MP4
		// whose frame table says 4 GB a frame, a document of 65536²
		// images) and so estimate beyond what a plan block carries: the
		// block would be refused and the whole job would end over one bad
		// sample, which decoding drops anyway.
		st.item.Est = min(max(l.cost.Estimate(rec), 1), planlimits.Cost)
	}
	// The frames the decoder outputs: a video sample's F (its clip
	// alone; fps sampling gives each clip its own), an image or document
	// sample's images.
	frames := 0
	var targets []int
	mem := int64(0)
	switch rec.Modality {
	case decode.ModalityVideo:
		if rec.Video != nil {
			targets = l.dec.ClipTargets(st.sample, rec.Video)
			st.shape = l.dec.ClipShape(rec.Video, len(targets))
			frames = st.shape[0]
			mem = int64(frames) * int64(st.shape[1]) * int64(st.shape[2]) * 3
		} else {
			frames = int(f)
			mem = f * sz * sz * 3
		}
	case decode.ModalityImage, decode.ModalityDocument:
		frames = len(rec.Images)
		for _, im := range rec.Images {
			mem += l.dec.PictureBytes(im.Width, im.Height)
		}
	}
	st.item.Mem = mem + decoding.AudioBytes(rec, l.cfg.Decode)
	c := gpu.Contents{Samples: 1, Frames: frames}
	if rec.Text != nil {
		c.Tokens = rec.Text.Tokens
	}
	st.item.Train = step.TrainTime(l.gpuModel(), c)
	if v := rec.Video; v != nil && taskLimit(l.cfg) > 1 && !v.FrameCountEstimated {
		tasks := video.PlanTasks(v, targets, taskLimit(l.cfg))
		if len(tasks) > 1 {
			st.tasks = tasks
			total := 0
			for _, t := range tasks {
				total += t.DecodeFrames
			}
			st.item.Parts = make([]int64, len(tasks))
			for i, t := range tasks {
				st.item.Parts[i] = max(st.item.Est*int64(t.DecodeFrames)/int64(max(total, 1)), 1)
			}
		}
	}
}

// unplanned makes the rank's batch from its own samples: local decode
// order (largest first) or, for torch, the sampler's order.
func (l *Loader) unplanned(s int64, own []*slotState) (*batchState, error) {
	items := make([]step.Item, len(own))
	for i, st := range own {
		items[i] = st.item
	}
	order := l.cfg.Loader.stepKind().Order(items)
	// Slots are numbered in decode order.
	bs := &batchState{step: s, slots: make([]*slotState, len(own))}
	for o, slot := range order {
		bs.slots[o] = own[slot]
	}
	return bs, nil
}

// rankState measures this rank's progress for the batch of step s.
func (l *Loader) rankState(s int64, now time.Time) step.RankState {
	l.mu.Lock()
	waiting, running := l.sched.Queued()
	bw, lat, contention := l.bandwidth, l.latency, l.wallPerCPU
	netBW, netLat := l.netBW, l.netLatency
	l.mu.Unlock()
	return step.RankState{
		DeadlineUS: l.tracker.NeedAt(s, l.start).Sub(now).Microseconds(),
		Waiting:    waiting, Running: running,
		Workers: l.cfg.Workers,
		// The cost model learns CPU time; wall time adds the contention
		// for this rank's cores.
		Speed:     step.SpeedOf(float64(contention) * l.cost.SpeedFactor()),
		Bandwidth: bw, LatencyUS: lat,
		Node: l.nodes[l.comm.Rank()], NodeBandwidth: netBW, NodeLatencyUS: netLat,
	}
}

// planned runs one step of a planned loader: allgather, plan, check,
// exchange.
func (l *Loader) planned(ctx context.Context, s int64, own []*slotState, stepper *step.Stepper) (*batchState, error) {
	me, n, b := l.comm.Rank(), l.comm.Size(), l.cfg.Batch
	items := make([]step.Item, b)
	for i, st := range own {
		items[i] = st.item
	}
	params := step.Params{Kind: l.cfg.Loader.stepKind(), Batch: b, Seed: l.cfg.Seed, Margin: l.cfg.Margin}
	send, err := plan.AppendBlock(nil, params.Block(s, me, l.rankState(s, time.Now()), items))
	if err != nil {
		return nil, fmt.Errorf("step %d: encode block: %w", s, err)
	}
	recv := make([]byte, len(send)*n)
	g0 := time.Now()
	if err := l.comm.Allgather(send, recv); err != nil {
		return nil, fmt.Errorf("step %d: allgather: %w", s, err)
	}
	gatherUS := time.Since(g0).Microseconds()
	p0 := time.Now()
	in, pl, err := stepper.Plan(s, recv)
	if errors.Is(err, plan.ErrBlock) {
		return nil, planMismatchError{err}
	}
	if err != nil {
		return nil, err
	}
	if l.cfg.OnPlan != nil {
		l.cfg.OnPlan(s, in, pl)
	}
	planUS := time.Since(p0).Microseconds()
	if (s+1)%int64(l.cfg.CheckEvery) == 0 {
		h := pl.Hash
		if l.cfg.hashHook != nil {
			h = l.cfg.hashHook(me, h)
		}
		if err := l.checkHash(s, h); err != nil {
			return nil, err
		}
	}
	bs := &batchState{step: s, slots: make([]*slotState, b)}
	bs.rec.PlanUS, bs.rec.GatherUS = planUS, gatherUS
	mine := in.Ranks[me]
	bs.rec.PlanDeadlineUS, bs.rec.PlanBacklogUS, bs.rec.PlanFinishUS = mine.Deadline, mine.Backlog, pl.Finish[me]
	got, err := l.exchange(ctx, s, own, in, pl, bs)
	if err != nil {
		return nil, err
	}
	for slot, k := range pl.DecodeOrder(me) {
		st := got[k]
		if st == nil {
			return nil, fmt.Errorf("step %d: plan gives rank %d sample %d, which neither it nor a message holds", s, me, k)
		}
		bs.slots[slot] = st
	}
	return bs, nil
}

// checkHash compares this rank's plan hash with every other rank's and
// fails naming the step and the ranks when they differ.
func (l *Loader) checkHash(s int64, h uint64) error {
	send := binary.LittleEndian.AppendUint64(nil, h)
	recv := make([]byte, 8*l.comm.Size())
	if err := l.comm.Allgather(send, recv); err != nil {
		return fmt.Errorf("step %d: plan hash check: %w", s, err)
	}
	order, holders := agree.GroupRanks(recv, 1, 0)
	if len(order) == 1 {
		return nil
	}
	msg := fmt.Sprintf("plan mismatch at step %d:", s)
	for _, v := range order {
		msg += fmt.Sprintf(" %s computed %016x;", agree.RankSet(holders[v]), v)
	}
	return planMismatchError{fmt.Errorf("%s the ranks no longer plan from the same input", msg[:len(msg)-1])}
}

// exchange sends the compressed bytes of the samples this rank gives away
// and receives those it is given: one message per source→destination
// pair, receives pre-posted with the exact sizes from the records. It
// returns the states of the samples this rank decodes, by input index.
func (l *Loader) exchange(ctx context.Context, s int64, own []*slotState, in *plan.Input, pl *plan.Plan, bs *batchState) (map[int32]*slotState, error) {
	me, b := l.comm.Rank(), l.cfg.Batch
	got := make(map[int32]*slotState, b)
	for i, st := range own {
		got[int32(me*b+i)] = st
	}
	sends, recvs := pl.Sends(me), pl.Receives(me)
	if len(sends) == 0 && len(recvs) == 0 {
		return got, nil
	}
	tag := int(s % 30000)
	t0 := time.Now()
	reqs := make([]*collective.Request, 0, len(sends)+len(recvs))
	bufs := make([][]byte, len(recvs))
	l.mu.Lock()
	for i, mv := range recvs {
		bufs[i] = l.rx.Get(mv.Bytes)
	}
	l.mu.Unlock()
	for i, mv := range recvs {
		r, err := l.comm.Irecv(bufs[i], mv.Src, tag)
		if err != nil {
			return nil, fmt.Errorf("step %d: receive from rank %d: %w", s, mv.Src, err)
		}
		reqs = append(reqs, r)
	}
	var sent, recvd int64
	// Samples are sent where they lie: a message is its samples' large
	// data slices between runs of headers and small members written into
	// one reused buffer (a rank sends at most its own B samples a step),
	// sent as one message by IsendParts (in place when large, see
	// communicator.World.IsendParts). Each message lays out its parts afresh:
	// IsendParts keeps the bytes, not the list, and wire.AppendParts may
	// extend the list's last part, which must be this message's.
	hdr, parts := l.sendHdr[:0], l.sendParts
	for _, mv := range sends {
		parts = parts[:0]
		for _, k := range mv.Samples {
			parts, hdr = wire.AppendParts(parts, hdr, own[int(k)-me*b].sample)
			delete(got, k)
		}
		var n int64
		for _, p := range parts {
			n += int64(len(p))
		}
		if n != mv.Bytes {
			return nil, fmt.Errorf("step %d: message to rank %d is %d bytes, the plan says %d", s, mv.Dst, n, mv.Bytes)
		}
		r, err := l.comm.IsendParts(parts, mv.Dst, tag)
		if err != nil {
			// The requests started are left unwaited (the communicator
			// keeps their buffers): the error ends the job (the loader
			// fails, the launcher aborts MPI).
			return nil, fmt.Errorf("step %d: send to rank %d: %w", s, mv.Dst, err)
		}
		reqs = append(reqs, r)
		sent += mv.Bytes
	}
	if err := l.comm.WaitAll(reqs); err != nil {
		return nil, fmt.Errorf("step %d: exchange: %w", s, err)
	}
	elapsed := time.Since(t0)
	// Kept for the next step, without holding on to the samples sent.
	clear(parts[:cap(parts)])
	l.sendHdr, l.sendParts = hdr, parts[:0]
	for i, mv := range recvs {
		// A pooled buffer holds an earlier message's bytes: a shorter
		// message must not leave them to be unpacked.
		if n := reqs[i].Len(); int64(n) != mv.Bytes {
			return nil, fmt.Errorf("step %d: message from rank %d is %d bytes, the plan says %d", s, mv.Src, n, mv.Bytes)
		}
		rest := bufs[i]
		rx := wire.NewBuf(bufs[i], len(mv.Samples))
		for _, k := range mv.Samples {
			smp, r, err := wire.Read(rest)
			if err != nil {
				return nil, fmt.Errorf("step %d: message from rank %d: %w", s, mv.Src, err)
			}
			rest = r
			st := &slotState{sample: smp, partsLeft: 1, rx: rx}
			st.item = step.Item{ID: in.Samples[k].ID, Owner: mv.Src, Bytes: in.Samples[k].Bytes}
			l.describe(st, max(in.Samples[k].Cost, 1)) // the owner's estimate, as planned
			got[k] = st
		}
		if len(rest) != 0 {
			return nil, fmt.Errorf("step %d: message from rank %d has %d bytes after its samples", s, mv.Src, len(rest))
		}
		recvd += mv.Bytes
	}
	bs.rec.BytesIn, bs.rec.BytesOut = recvd, sent
	// Bytes to and from other nodes: the exchange lasted as long as its
	// slowest path, the network when any message crossed it.
	var netSent, netRecvd int64
	for _, mv := range sends {
		if l.nodes[mv.Dst] != l.nodes[me] {
			netSent += mv.Bytes
		}
	}
	for _, mv := range recvs {
		if l.nodes[mv.Src] != l.nodes[me] {
			netRecvd += mv.Bytes
		}
	}
	bs.rec.NetBytesOut = netSent
	l.mu.Lock()
	l.held += recvd - sent
	us := max(elapsed.Microseconds(), 1)
	if moved := max(netSent, netRecvd); moved > 0 {
		// Bandwidth to other nodes observed on this exchange, smoothed
		// once measured; fixed-point bytes/µs.
		obs := clamp(moved*plan.One/us, 1, planlimits.Bandwidth)
		if l.netBW == 0 {
			l.netBW = obs
		} else {
			l.netBW = clamp((3*l.netBW+obs)/4, 1, planlimits.Bandwidth)
		}
	} else if moved := max(sent, recvd); moved > 0 {
		// Bandwidth within the node observed on this exchange, smoothed.
		obs := moved * plan.One / us
		l.bandwidth = clamp((3*l.bandwidth+obs)/4, plan.One, planlimits.Bandwidth)
	}
	l.mu.Unlock()
	return got, context.Cause(ctx)
}
