package launcher

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/decode"
	"github.com/datahelix/datahelix/internal/bridge"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/loader"
	"github.com/datahelix/datahelix/internal/metrics"
	"github.com/datahelix/datahelix/spmd"
)

// trainCommand is datahelix train.
var trainCommand = cli.Command{
	Name:    "train",
	Summary: "feed a real trainer: every rank starts PROGRAM (train.py) and hands it batches over shared memory",
	Run: func(ctx context.Context, stdout, stderr io.Writer, args []string) error {
		return runTrain(ctx, stdout, stderr, args, false)
	},
}

// serveCommand is datahelix serve.
var serveCommand = cli.Command{
	Name:    "serve",
	Summary: "feed trainers launched on their own (torchrun, srun --overlap): train without starting PROGRAM",
	Run: func(ctx context.Context, stdout, stderr io.Writer, args []string) error {
		return runTrain(ctx, stdout, stderr, args, true)
	},
}

// endlessSteps stands for --steps 0 in the loader: more than any job
// trains, so that the trainer decides when to stop.
const endlessSteps = 1 << 40

// trainFlags are the flags of datahelix train and serve.
type trainFlags struct {
	runFlags
	serve          bool
	connectTimeout time.Duration
	grace          time.Duration
	ringSlots      int
	ringSlotMiB    int64
	job            string
	program        []string // train's PROGRAM ARGS...
}

func (f *trainFlags) register(fs *flag.FlagSet) {
	f.registerData(fs, 0, "`steps` to train: the trainer's loop ends after them (0: until the trainer stops asking)")
	fs.Var(&f.loaders, "loader", "the loader: torch, local, static, helix, helix-nogate or helix-notrain (default helix)")
	fs.DurationVar(&f.stallTimeout, "stall-timeout", 10*time.Minute, "abort the job when a rank delivers no step for this `duration` (0: never)")
	fs.DurationVar(&f.connectTimeout, "connect-timeout", 2*time.Minute, "end the job when a rank's trainer has not connected (created its datahelix.Loader and iterated) within this `duration`")
	fs.DurationVar(&f.grace, "grace", 25*time.Second, "on SIGTERM or SIGINT (Slurm's time limit, scancel, Ctrl-C), give the trainer this `duration` to exit, e.g. after saving a checkpoint, before SIGKILL")
	fs.IntVar(&f.ringSlots, "ring-slots", 4, "batch `slots` in each rank's shared-memory ring: the trainer holds Loader(keep=...) of them, datahelix fills the others ahead")
	fs.Int64Var(&f.ringSlotMiB, "ring-slot-mib", 0, "`MiB` per ring slot (0: a batch of the largest samples the decoder's limits allow; the pages are touched only as batches fill them, but Loader(device=\"cuda\") pins the whole ring)")
	if f.serve {
		fs.StringVar(&f.job, "job", "", "the job `id` its trainers name in DATAHELIX_JOB (default $DATAHELIX_JOB, else $SLURM_JOB_ID, else one rank 0 prints)")
	}
}

func runTrain(ctx context.Context, stdout, stderr io.Writer, args []string, serve bool) error {
	f := trainFlags{serve: serve}
	name, synopsis := "train", "[flags] -- PROGRAM [ARGS...]"
	if serve {
		name, synopsis = "serve", "[flags]"
	}
	fs := cli.NewFlags(name, synopsis)
	f.register(fs)
	flagArgs, program := splitProgram(args)
	if err := cli.ParseFlags(fs, flagArgs, stdout); err != nil {
		return err
	}
	f.program = program
	if err := f.validate(); err != nil {
		return err
	}
	f.args = append([]string{name}, args...)
	return runWorld(ctx, f.world, stdout, stderr, func(ctx context.Context, c collective.Comm, out, errOut io.Writer) error {
		return trainJob(ctx, c, &f, out, errOut)
	})
}

// splitProgram splits train's arguments at the first "--" into the flags
// and the program with its arguments.
func splitProgram(args []string) (flags, program []string) {
	for i, a := range args {
		if a == "--" {
			return args[:i], args[i+1:]
		}
	}
	return args, nil
}

func (f *trainFlags) validate() error {
	switch {
	case !f.serve && len(f.program) == 0:
		return cli.Usagef("train: no PROGRAM: datahelix train [flags] -- python train.py (see datahelix train -h)")
	case f.serve && len(f.program) > 0:
		return cli.Usagef("serve starts no program (%q): launch the trainers on their own, or use datahelix train", f.program[0])
	case len(f.loaders) > 1:
		return cli.FlagErrorf("", "loader", f.loaders.String(), "%s feeds one trainer with one loader; give one", f.args0())
	case f.cfg.Steps < 0:
		return cli.FlagErrorf("", "steps", f.cfg.Steps, "want 0 (until the trainer stops asking) or more")
	case f.ringSlots < 3 || f.ringSlots > 1024:
		return cli.FlagErrorf("", "ring-slots", f.ringSlots, "want 3..1024")
	case f.ringSlotMiB < 0 || f.ringSlotMiB > maxBudgetMiB:
		return cli.FlagErrorf("", "ring-slot-mib", f.ringSlotMiB, "want 0..%d", maxBudgetMiB)
	case f.connectTimeout <= 0:
		return cli.FlagErrorf("", "connect-timeout", f.connectTimeout, "want a positive duration")
	case f.grace < 0:
		return cli.FlagErrorf("", "grace", f.grace, "want 0 or more")
	}
	if len(f.loaders) == 0 {
		f.loaders = loaderList{spmd.KindHelix}
	}
	if f.cfg.Steps == 0 {
		f.cfg.Steps = endlessSteps
	}
	f.cfg.LearnGPU = true
	f.gpuFrameMS = 0 // no simulated GPU: the trainer's steps are measured
	return f.runFlags.validate()
}

func (f *trainFlags) args0() string {
	if f.serve {
		return "serve"
	}
	return "train"
}

// slotBytes is the ring slot that holds any batch the decoder can make:
// B samples of the larger of a clip (F frames) and a document of the
// image limit, with their text and audio.
func (f *trainFlags) slotBytes() int64 {
	if f.ringSlotMiB > 0 {
		return f.ringSlotMiB << 20
	}
	l := f.cfg.Decode.Limits
	d := decode.DefaultLimits()
	if l.MaxImages <= 0 {
		l.MaxImages = d.MaxImages
	}
	if l.MaxTextBytes <= 0 {
		l.MaxTextBytes = d.MaxTextBytes
	}
	frames := int64(max(f.cfg.Decode.Frames, l.MaxImages, 1))
	s := int64(f.cfg.Decode.Size)
	return int64(f.cfg.Batch) * (frames*s*s*3 + l.MaxTextBytes + audioBytes(f.cfg.Decode))
}

// trainJob is the body every rank of train and serve runs: it opens the
// data as run does, connects the rank's trainer, starts the loader from
// where the trainer says, serves batches until the trainer is done, and
// reports the run as run does.
func trainJob(ctx context.Context, c collective.Comm, f *trainFlags, out, errOut io.Writer) error {
	j, err := openJob(ctx, c, &f.runFlags, errOut)
	if err != nil {
		return err
	}
	defer j.close()
	if err := shareCores(c, f.cfg.Workers, true); err != nil {
		return err
	}
	rv, err := agreeRendezvous(c, f.job)
	if err != nil {
		return err
	}
	end, err := c.Dup() // the ranks' agreement on how the trainers ended
	if err != nil {
		return err
	}
	if f.serve && c.Rank() == 0 {
		fmt.Fprintf(errOut, "datahelix: serving job %s: start each rank's trainer with DATAHELIX_JOB=%s and RANK set\n", rv.job, rv.job)
	}
	b, err := connectTrainer(ctx, c, f, rv, out, errOut)
	if b != nil {
		defer b.close(f.grace)
	}
	if err := withStatusAllRanks(cli.ExitTrainer, agreeOnError(c, err, "cannot start its trainer")); err != nil {
		if b != nil {
			bridge.SendText(b.conn, bridge.TypeRefuse, err.Error())
		}
		return err
	}
	// Every trainer must resume from the same state (or none).
	states, err := c.AllgatherVar(b.hello.Resume)
	if err != nil {
		return err
	}
	for r, s := range states {
		if string(s) != string(states[0]) {
			err := cli.WithStatus(cli.ExitDisagree, collective.AllRanks(fmt.Errorf("the trainers resume from different states: rank 0 from %s, rank %d from %s", orNone(states[0]), r, orNone(s))))
			bridge.SendText(b.conn, bridge.TypeRefuse, err.Error())
			return err
		}
	}
	cfg := f.cfg
	cfg.Loader = f.loaders[0]
	cfg.Log, cfg.SampleLog = errOut, loader.NewSampleLog()
	if len(b.hello.Resume) > 0 && string(b.hello.Resume) != "null" {
		cfg.Restore = b.hello.Resume
	}
	cfg.StallTimeout = f.stallTimeout // the loader's own watch
	// The loader outlives a signal for as long as the trainer does.
	lctx, stopLoader := context.WithCancel(context.Background())
	defer stopLoader()
	l, err := loader.NewLoader(lctx, stallAborts{c}, j.ds, cfg)
	if err != nil {
		if errors.Is(err, spmd.ErrState) {
			err = collective.AllRanks(fmt.Errorf("the trainers' Loader.load_state_dict: %w", err))
		}
		err = withStatusAllRanks(cli.ExitBadInput, err)
		bridge.SendText(b.conn, bridge.TypeRefuse, err.Error())
		return err
	}
	res, err := b.serve(ctx, c, end, l, cfg, f)
	if err != nil {
		return err
	}
	if c.Rank() != 0 {
		return nil
	}
	var trace []traceLine
	for _, r := range res.Records {
		trace = append(trace, traceLine{Loader: cfg.Loader.String(), StepRecord: r})
	}
	res.Summary.RingBytes = b.ring.Bytes()
	return reportJob(ctx, c, &f.runFlags, j, []caseResults{{data: j.data, runs: [][]metrics.Summary{{res.Summary}}}}, trace, out, errOut, nil)
}

func orNone(s []byte) string {
	if len(s) == 0 || string(s) == "null" {
		return "none (step 0)"
	}
	return string(s)
}

// rankBridge is one rank's connection to its trainer.
type rankBridge struct {
	rank    int
	conn    *bridge.Conn
	ring    *bridge.Ring
	tr      *trainer // nil for serve
	hello   bridge.Hello
	serving chan error // Serve's result, once it runs
}

// close stops the trainer if it still runs and releases the connection.
func (b *rankBridge) close(grace time.Duration) {
	if b.tr != nil {
		b.tr.stop(syscall.SIGTERM, min(grace, 5*time.Second))
	}
	b.conn.Close()
	if b.ring != nil {
		b.ring.Close()
	}
}

// connectTrainer starts the rank's trainer (train) or waits for it to
// connect (serve), and reads its HELLO, refusing a client of another
// protocol or job.
func connectTrainer(ctx context.Context, c collective.Comm, f *trainFlags, rv rendezvous, out, errOut io.Writer) (*rankBridge, error) {
	b := &rankBridge{rank: c.Rank()}
	deadline := time.Now().Add(f.connectTimeout)
	if f.serve {
		l, err := bridge.Listen(bridge.SocketName(rv.job, c.Rank()))
		if err != nil {
			return nil, err
		}
		defer l.Close()
		for {
			conn, uid, err := l.Accept(deadline)
			if errors.Is(err, bridge.ErrTimeout) {
				return nil, fmt.Errorf("no trainer connected within %v (--connect-timeout): start it with DATAHELIX_JOB=%s RANK=%d", f.connectTimeout, rv.job, c.Rank())
			}
			if err != nil {
				return nil, err
			}
			if uid != os.Getuid() {
				bridge.SendText(conn, bridge.TypeRefuse, fmt.Sprintf("datahelix serves the user of uid %d only; this client runs as uid %d", os.Getuid(), uid))
				conn.Close()
				continue
			}
			b.conn = conn
			break
		}
	} else {
		conn, child, err := bridge.Pair()
		if err != nil {
			return nil, err
		}
		b.conn = conn
		info := c.Info()
		env := []string{
			fmt.Sprintf("RANK=%d", c.Rank()), fmt.Sprintf("WORLD_SIZE=%d", c.Size()),
			fmt.Sprintf("LOCAL_RANK=%d", info.LocalRank), fmt.Sprintf("LOCAL_WORLD_SIZE=%d", info.LocalSize),
			"MASTER_ADDR=" + rv.addr, fmt.Sprintf("MASTER_PORT=%d", rv.port),
			"DATAHELIX_FD=3", "DATAHELIX_JOB=" + rv.job,
		}
		if os.Getenv("GLOO_SOCKET_IFNAME") == "" {
			if name := ifaceFor(rv.addr); name != "" {
				env = append(env, "GLOO_SOCKET_IFNAME="+name)
			}
		}
		if p, err := pythonPath(); err == nil {
			env = append(env, "PYTHONPATH="+p)
		} else {
			fmt.Fprintf(errOut, "datahelix: warning: %v; the trainer must find the datahelix package itself (pip install ./python)\n", err)
		}
		b.tr, err = startTrainer(f.program, env, child, fileOf(out), fileOf(errOut))
		child.Close()
		if err != nil {
			return b, err
		}
	}
	type helloResult struct {
		h   bridge.Hello
		err error
	}
	got := make(chan helloResult, 1)
	go func() {
		h, err := bridge.ReadHello(b.conn, deadline)
		got <- helloResult{h, err}
	}()
	var exited <-chan struct{}
	if b.tr != nil {
		exited = b.tr.exited
	}
	var r helloResult
	select {
	case r = <-got:
	case <-exited:
		select { // a HELLO that came just before the exit
		case r = <-got:
		case <-time.After(100 * time.Millisecond):
			if err := b.tr.exitError(c.Rank()); err != nil {
				return b, fmt.Errorf("%w before connecting", err)
			}
			return b, fmt.Errorf("the trainer of rank %d exited with status 0 without connecting (it never created a datahelix.Loader)", c.Rank())
		}
	case <-ctx.Done():
		return b, context.Cause(ctx)
	}
	switch {
	case errors.Is(r.err, bridge.ErrTimeout):
		return b, fmt.Errorf("the trainer of rank %d did not connect within %v (--connect-timeout): does it create a datahelix.Loader and iterate over it?", c.Rank(), f.connectTimeout)
	case errors.Is(r.err, bridge.ErrClosed) && b.tr != nil:
		<-b.tr.exited
		if err := b.tr.exitError(c.Rank()); err != nil {
			return b, fmt.Errorf("%w before connecting", err)
		}
		return b, fmt.Errorf("the trainer of rank %d closed its datahelix connection before saying hello", c.Rank())
	case r.err != nil:
		return b, fmt.Errorf("the trainer of rank %d: %w", c.Rank(), r.err)
	}
	b.hello = r.h
	if r.h.Protocol != bridge.Protocol {
		msg := fmt.Sprintf("the trainer of rank %d runs %s, of protocol %d; this datahelix (%s) speaks protocol %d: use the client that came with it (its python/ directory)",
			c.Rank(), r.h.Client, r.h.Protocol, version(), bridge.Protocol)
		bridge.SendText(b.conn, bridge.TypeRefuse, msg)
		return b, errors.New(msg)
	}
	if r.h.Job != rv.job || r.h.Rank != c.Rank() {
		msg := fmt.Sprintf("a client of job %q rank %d connected to job %s rank %d", r.h.Job, r.h.Rank, rv.job, c.Rank())
		bridge.SendText(b.conn, bridge.TypeRefuse, msg)
		return b, errors.New(msg)
	}
	ring, err := bridge.NewRing(f.ringSlots, f.slotBytes())
	if err != nil {
		return b, err
	}
	b.ring = ring
	return b, nil
}

// serve welcomes the trainer and hands it batches until it is done, then
// has the ranks agree on how their trainers ended and gathers the run's
// figures (rank 0's Result holds every rank's).
func (b *rankBridge) serve(ctx context.Context, c, end collective.Comm, l *loader.Loader, cfg spmd.Config, f *trainFlags) (*loader.Result, error) {
	st := l.State()
	var state loader.State
	if err := json.Unmarshal(st, &state); err != nil {
		return nil, err
	}
	steps := int64(cfg.Steps)
	if cfg.Steps == endlessSteps {
		steps = 0
	}
	w := bridge.Welcome{Protocol: bridge.Protocol, Server: version(), Job: b.hello.Job, Rank: c.Rank(), WorldSize: c.Size(),
		Batch: cfg.Batch, Steps: steps, FirstStep: state.Step, Frames: f.cfg.Decode.Frames, Size: f.cfg.Decode.Size,
		AudioRate: f.cfg.Decode.AudioRate, AudioChannels: audioChannels(f.cfg.Decode),
		Slots: b.ring.Slots, SlotBytes: b.ring.SlotBytes, RingBytes: b.ring.Bytes(), State: st}
	// On a failure the job ends (MPI_Abort, or the in-process world's
	// abort): the loader is left running, not closed, since its control
	// loop may wait in a collective for a rank that will never join.
	sctx, stopServe := context.WithCancelCause(context.Background())
	defer stopServe(nil)
	abandon := func(err error) (*loader.Result, error) {
		stopServe(err)
		return nil, err
	}
	if err := bridge.SendWelcome(b.conn, w, b.ring); err != nil {
		return abandon(fmt.Errorf("rank %d: welcome the trainer: %w", c.Rank(), err))
	}
	srv := &bridge.Server{Conn: b.conn, Ring: b.ring, Src: loaderSource{l, f.cfg.Decode.Size, f.cfg.Decode.AudioRate > 0}, First: state.Step, Stage: true}
	b.serving = make(chan error, 1)
	go func() { b.serving <- srv.Serve(sctx) }()

	var exited <-chan struct{}
	if b.tr != nil {
		exited = b.tr.exited
	}
	served := false
	signalled := ctx.Done()
	var graceOver <-chan time.Time
	for !served || exited != nil {
		select {
		case err := <-b.serving:
			served = true
			b.serving = nil
			if !errors.Is(err, bridge.ErrBye) && !errors.Is(err, bridge.ErrClosed) {
				// The loader failed: the trainer got an ERROR saying why.
				return abandon(fmt.Errorf("rank %d: %w", c.Rank(), err))
			}
			if exited != nil && errors.Is(err, bridge.ErrClosed) {
				// The trainer closed its end: it is exiting, or it
				// dropped the loader; its exit status says which.
				select {
				case <-exited:
				case <-time.After(f.connectTimeout):
					return abandon(cli.WithStatus(cli.ExitTrainer, fmt.Errorf("the trainer of rank %d closed its datahelix connection and still runs %v later", c.Rank(), f.connectTimeout)))
				}
			}
		case <-exited:
			exited = nil
			if err := b.tr.exitError(c.Rank()); err != nil {
				return abandon(err)
			}
		case <-signalled:
			signalled = nil
			ie, ok := cli.Interrupted(context.Cause(ctx))
			if !ok || b.tr == nil { // another rank failed (in-process world), or serve
				err := context.Cause(ctx)
				var rf collective.RankFailedError
				if errors.As(err, &rf) {
					// The in-process world was aborted (a stall watch, a
					// failed rank): its collectives say why, at once.
					if aerr := c.Barrier(); errors.Is(aerr, collective.ErrAborted) {
						err = aerr
					}
				}
				return abandon(err)
			}
			b.tr.signal(ie.Sig)
			graceOver = time.After(f.grace)
		case <-graceOver:
			b.tr.signal(syscall.SIGKILL)
			graceOver = nil
		}
		if exited != nil && b.tr.done() {
			exited = nil
			if err := b.tr.exitError(c.Rank()); err != nil {
				return abandon(err)
			}
		}
	}
	if ie, ok := cli.Interrupted(context.Cause(ctx)); ok {
		return abandon(ie)
	}
	endAt := time.Now()
	// Every rank's loader may stop only where every other's does.
	delivered := l.Delivered()
	counts := []int64{delivered, -delivered}
	if err := end.AllreduceInt64(counts, collective.OpMax); err != nil {
		return nil, err
	}
	if most, least := counts[0], -counts[1]; most != least {
		return nil, cli.WithStatus(cli.ExitTrainer, fmt.Errorf("the trainers stopped after different numbers of batches (between %d and %d; rank %d's after %d): the ranks' loaders cannot stop together, so the job ends here",
			least, most, c.Rank(), delivered))
	}
	if state.Step+delivered < int64(cfg.Steps) {
		l.Quiesce()
	}
	return loader.Finish(c, l, endAt)
}

// loaderSource serves a loader.Loader's batches through the bridge.
type loaderSource struct {
	l     *loader.Loader
	size  int  // S, the shape of a text sample's empty pixels
	audio bool // the audio output is on
}

func (s loaderSource) Next(ctx context.Context, gpuStep time.Duration) (*bridge.Batch, error) {
	s.l.ReportGPUStep(gpuStep)
	b, err := s.l.Next(ctx)
	if err != nil {
		return nil, err
	}
	return toBridge(b, s.size, s.audio), nil
}

func (s loaderSource) Peek(ctx context.Context, step int64) (*bridge.Batch, error) {
	b, err := s.l.Peek(ctx, step)
	if errors.Is(err, spmd.ErrDelivered) {
		return nil, bridge.ErrDelivered
	}
	if err != nil {
		return nil, err
	}
	return toBridge(b, s.size, s.audio), nil
}

// toBridge lays a decoded batch out for the ring: a clip is one
// [F,S,S,3] tensor, a sample's images [n,S,S,3], text and sound alone
// [0,S,S,3]; with audio, a sample's audio its [C,T] PCM.
func toBridge(b *spmd.Batch, size int, audio bool) *bridge.Batch {
	out := &bridge.Batch{Step: b.Step, Audio: audio}
	for _, s := range b.Samples {
		in := bridge.Input{Key: s.Key, Kind: bridge.Kind(s.Modality), Text: s.Text, Tokens: s.Tokens, Owner: s.Owner, ID: s.ID}
		if a := s.Audio; a != nil && a.Channels > 0 {
			in.Audio, in.AudioChannels, in.AudioRate = a.Bytes(), a.Channels, a.Rate
			if a.Missing {
				in.AudioFlags = bridge.AudioMissing
			}
		}
		n, h, w := 0, 0, 0
		for _, t := range s.Tensors {
			in.Pixels = append(in.Pixels, t.Data)
			switch len(t.Shape) {
			case 4:
				n += t.Shape[0]
				h, w = t.Shape[1], t.Shape[2]
			case 3:
				n++
				h, w = t.Shape[0], t.Shape[1]
			}
		}
		if n == 0 {
			h, w = size, size
		}
		in.Shape = [4]uint32{uint32(n), uint32(h), uint32(w), 3}
		out.Samples = append(out.Samples, in)
	}
	for _, d := range b.Dropped {
		out.Dropped = append(out.Dropped, bridge.Dropped{Key: d.Key, Err: d.Err.Error()})
	}
	return out
}

// fileOf returns the file behind w (the process's standard output or
// error, maybe behind a cli.SyncWriter), so that a child writes to it
// directly; else w itself.
func fileOf(w io.Writer) io.Writer {
	if sw, ok := w.(*cli.SyncWriter); ok {
		if f, ok := sw.W.(*os.File); ok {
			return f
		}
	}
	return w
}
