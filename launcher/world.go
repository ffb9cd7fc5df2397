package launcher

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/pkg/profile"

	"github.com/datahelix/datahelix/collective"
	"github.com/datahelix/datahelix/internal/cli"
	"github.com/datahelix/datahelix/internal/communicator"
	"github.com/datahelix/datahelix/internal/mpinode"
)

// worldFlags are the flags of every command that runs as an SPMD job.
type worldFlags struct {
	ranks       int
	peerTimeout time.Duration
	pin         cli.AutoBool // --pin: auto by default
	profile     string
	profileDir  string
}

func (f *worldFlags) register(fs *flag.FlagSet) {
	fs.IntVar(&f.ranks, "ranks", 0, "run `N` ranks (1..4096) as goroutines of this process instead of MPI processes (no mpirun needed); 0: the MPI world's ranks")
	f.pin = cli.AutoAuto
	fs.Var(&f.pin, "pin", "pin each rank to its share of the CPUs the node's ranks may use (together, as they started), by local rank: --pin or --pin=true always, --pin=false never, --pin=auto when the node runs more ranks than those CPUs, so each rank keeps a fixed share as on a real node. Ranks the launcher bound to CPU sets of their own (mpirun --bind-to core, srun --cpu-bind) keep them")
	fs.DurationVar(&f.peerTimeout, "peer-timeout", 30*time.Second, "end the job when a rank cannot reach its peers (no heartbeat) for this `duration`: a lost node or cut link, apart from training progress; 0: never")
	fs.StringVar(&f.profile, "profile", "", "write a pprof `kind` profile per rank: cpu, mem or block")
	fs.StringVar(&f.profileDir, "profile-dir", "profiles", "`dir`ectory for --profile output (one subdirectory per rank)")
}

func (f *worldFlags) validate(env launchEnv) error {
	switch f.profile {
	case "", "cpu", "mem", "block":
	default:
		return cli.FlagErrorf("", "profile", f.profile, "want cpu, mem or block")
	}
	if f.peerTimeout < 0 || f.peerTimeout > 0 && f.peerTimeout < time.Second {
		return cli.FlagErrorf("", "peer-timeout", f.peerTimeout, "want 0 (never) or at least 1s")
	}
	if f.ranks < 0 || f.ranks > 4096 {
		return cli.FlagErrorf("", "ranks", f.ranks, "want 1..4096 in-process ranks, or 0 (the default) for the MPI world's")
	}
	if f.ranks > 0 && env.Size > 1 {
		return cli.Usagef("--ranks %d runs an in-process world; it cannot be combined with a %d-rank %s launch", f.ranks, env.Size, env.Launcher)
	}
	return nil
}

// rankBody is the program every rank runs. stdout and stderr are the
// job's, shared by the ranks of an in-process world: writes of whole
// lines to them are serialized.
type rankBody func(ctx context.Context, c collective.Comm, stdout, stderr io.Writer) error

// runWorld runs body on every rank: on the MPI world, or on --ranks
// goroutines. An error marked collective.AllRanks is reported by every
// rank, which then exits cleanly; a signal (ctx cancelled with an
// cli.InterruptedError) ends each rank with its exit status; any other error
// aborts the whole job so that no rank is left waiting in a collective.
func runWorld(ctx context.Context, f worldFlags, stdout, stderr io.Writer, body rankBody) error {
	env := osLaunchEnv()
	if err := f.validate(env); err != nil {
		return err
	}
	out := &cli.SyncWriter{W: stdout}
	errOut := &cli.SyncWriter{W: stderr}
	if f.ranks > 0 {
		return runLocal(ctx, f, out, errOut, body)
	}
	if f.pin == cli.AutoTrue && env.LocalRank >= 0 && env.LocalSize > 0 {
		// Pin before MPI starts its threads; corrected below if MPI's
		// view of the node differs.
		if _, err := pinCPUs(env.LocalRank, env.LocalSize); err != nil {
			return err
		}
	}
	w, err := communicator.Init()
	if err != nil {
		return fmt.Errorf("cannot start MPI (%s): %w", env, err)
	}
	if err := env.checkWorld(w.Rank(), w.Size(), w.Info().Library); err != nil {
		err = cli.WithStatus(cli.ExitLaunch, err)
		if w.Size() > 1 {
			// Some ranks may agree with the launcher and wait in the
			// first collective: end them too.
			w.Abort(cli.ExitLaunch, err.Error())
		}
		// A world of one: every process of the launch finds the same
		// mismatch in a world of its own and exits with this message.
		w.Finalize()
		return err
	}
	peers, err := watchPeers(w, f.peerTimeout, func(msg string) {
		fmt.Fprintf(errOut, "datahelix: rank %d: %s: ending the job\n", w.Rank(), msg)
		abortOrExit(w, cli.ExitPeerLost, msg, 5*time.Second)
	})
	if err != nil {
		w.Abort(1, err.Error())
	}
	done := make(chan struct{})
	go abortWhenStuck(ctx, w, done)
	err = runRank(ctx, f, w, out, errOut, false, body)
	close(done)
	// A job that ends normally finalizes MPI on every rank; any other
	// error aborts it.
	peers.stop(err == nil || collective.IsAllRanks(err) || errors.Is(err, cli.ErrHelp))
	ie, stopped := cli.Interrupted(err)
	// A signal in a world of one (datahelix run without mpirun) has no
	// other rank to end: it leaves MPI as a success does, and Main
	// prints it.
	if err == nil || collective.IsAllRanks(err) || errors.Is(err, cli.ErrHelp) || stopped && w.Size() == 1 {
		if ferr := w.Finalize(); err == nil {
			err = ferr
		}
		if collective.IsAllRanks(err) {
			return cli.Reported(err) // rank 0 printed it for every rank
		}
		return err
	}
	// The abort has the launcher (mpirun, mpiexec.mpich) exit with the
	// status of err's class unless it ends with its own; a signal may
	// have reached this rank alone, and the abort ends the others with
	// its status.
	code := cli.ExitStatus(err)
	if stopped {
		code = ie.Status()
	}
	w.Abort(code, err.Error()) // says "rank R on HOST aborting the job: " and err
	return err                 // not reached: Abort ends the process
}

// abortWhenStuck aborts the job with the signal's status when a signal
// cancels ctx and done is not closed within communicator.StuckGrace.
func abortWhenStuck(ctx context.Context, w *communicator.World, done <-chan struct{}) {
	select {
	case <-done:
		return
	case <-ctx.Done():
	}
	ie, ok := cli.Interrupted(context.Cause(ctx))
	if !ok {
		return
	}
	select {
	case <-done:
	case <-time.After(communicator.StuckGrace):
		abortOrExit(w, ie.Status(), fmt.Sprintf("%v; still waiting %v later (for a rank that makes no progress?)", ie, communicator.StuckGrace), 5*time.Second)
	}
}

// runRank runs body on one rank (see rankSetup) and returns its error:
// the cause of ctx's cancellation when body failed only because ctx was
// cancelled. It prints the error, with the rank's number, where no one
// else reports it: an AllRanks error only on rank 0, which reports it
// for all; not an abort, whose cause the rank that aborted reports. On
// MPI ranks (local false) the abort that follows any other error prints
// it; on in-process ranks a signal is left to the caller, which reports
// it once for the process.
func runRank(ctx context.Context, f worldFlags, c collective.Comm, out, errOut io.Writer, local bool, body rankBody) error {
	err := cli.StopReason(ctx, rankSetup(ctx, f, c, out, errOut, body))
	_, stopped := cli.Interrupted(err)
	prefix := ""
	if c.Size() > 1 {
		prefix = fmt.Sprintf("rank %d: ", c.Rank())
	}
	switch {
	case err == nil, errors.Is(err, cli.ErrHelp), errors.Is(err, collective.ErrAborted):
	case collective.IsAllRanks(err):
		if c.Rank() == 0 {
			fmt.Fprintf(errOut, "datahelix: %v\n", err)
		}
	case local && !stopped:
		fmt.Fprintf(errOut, "datahelix: %s%v\n", prefix, err)
	}
	return err
}

// rankSetup pins and profiles the rank as f asks, then runs body.
func rankSetup(ctx context.Context, f worldFlags, c collective.Comm, out, errOut io.Writer, body rankBody) error {
	if w, ok := c.(*communicator.World); ok {
		if err := pinRank(f.pin, w, errOut); err != nil {
			return err
		}
	}
	if f.profile != "" {
		dir := filepath.Join(f.profileDir, fmt.Sprintf("rank-%d", c.Rank()))
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return fmt.Errorf("--profile-dir: %w", err)
		}
		mode := map[string]func(*profile.Profile){
			"cpu": profile.CPUProfile, "mem": profile.MemProfile, "block": profile.BlockProfile,
		}[f.profile]
		defer profile.Start(mode, profile.ProfilePath(dir), profile.NoShutdownHook, profile.Quiet).Stop()
	}
	return body(ctx, c, out, errOut)
}

// alreadyBound is what local rank 0 prints when --pin finds the node's
// ranks bound to CPU sets of their own.
const alreadyBound = "datahelix: --pin: ranks already bound by the launcher, keeping their CPU sets"

// pinRank applies --pin to an MPI rank. The ranks of its node first
// compare the CPU sets they started with (every rank, whatever its --pin,
// so that all call the same collectives); their union is the CPUs the
// node's ranks may use (mpinode.NodeCPUs), which --pin=auto compares
// with their number. When the sets are pairwise disjoint the launcher
// bound each rank to CPUs of its own (mpirun --bind-to core, srun
// --cpu-bind): splitting a rank's set again would leave it a fraction of
// what it was given, so the ranks keep them (undoing a pin made before
// MPI started) and local rank 0 says so. Otherwise each rank is pinned to
// its share of the union (pinCPUsOf).
func pinRank(pin cli.AutoBool, w *communicator.World, errOut io.Writer) error {
	info := w.Info()
	sets, err := w.ShareNodeCPUs()
	if err != nil {
		return err
	}
	if pin == cli.AutoFalse {
		return nil
	}
	if sets == nil { // some rank does not know its CPUs: split this one's
		if pin == cli.AutoTrue || info.LocalSize > mpinode.NodeCPUs() {
			_, err = pinCPUs(info.LocalRank, info.LocalSize)
		}
		return err
	}
	union, disjoint := mpinode.UnionCPUs(sets)
	if pin == cli.AutoAuto && info.LocalSize <= union.Count() {
		return nil
	}
	if disjoint && len(sets) > 1 {
		if err := unpinCPUs(); err != nil {
			return err
		}
		if info.LocalRank == 0 {
			fmt.Fprintln(errOut, alreadyBound)
		}
		return nil
	}
	_, err = pinCPUsOf(union, info.LocalRank, info.LocalSize)
	return err
}

// runLocal runs body on f.ranks goroutines sharing an in-process world
// (collective.RunLocal). A rank that fails prints its error and aborts
// the world, which stops the others with errors that match
// collective.ErrAborted, so they stay quiet (runRank): the log holds the
// one error that ended the job. A signal is returned, not printed, so
// that it is reported once.
func runLocal(ctx context.Context, f worldFlags, out, errOut io.Writer, body rankBody) error {
	if f.pin == cli.AutoTrue {
		return cli.FlagError{Flag: "pin", Reason: "needs MPI ranks (processes); it does not apply to --ranks"}
	}
	f.pin = cli.AutoFalse
	var abort abortStatus
	errs := collective.RunLocal(ctx, f.ranks, func(ctx context.Context, c collective.Comm) error {
		g := f
		if c.Rank() > 0 {
			g.profile = "" // one process, one profile
		}
		return runRank(ctx, g, abort.recordAborts(c), out, errOut, true, body)
	})
	var stop, failed, aborted error
	for _, err := range errs {
		_, ok := cli.Interrupted(err)
		switch {
		case ok:
			stop = err
		case errors.Is(err, collective.ErrAborted):
			// Rather the abort itself, which says why, than a rank's
			// "stopped because rank R failed".
			var rf collective.RankFailedError
			if aborted == nil || !errors.As(err, &rf) {
				aborted = err
			}
		case err != nil && failed == nil:
			failed = err
		}
	}
	// A signal first, whatever the ranks made of it: a rank may fail
	// with what the cancellation did to another (agreeOnError passes
	// rank 0's error on), and no rank prints an error a signal caused.
	if stop != nil {
		return stop
	}
	if failed != nil {
		// Each failing rank printed its error; the ranks its abort
		// stopped printed nothing.
		return cli.Reported(failed)
	}
	if aborted != nil {
		// No rank failed on its own (it would have printed its error,
		// returned above): a watchdog aborted the world, and its error
		// says why; the abort's code, the status.
		return cli.WithStatus(abort.get(), aborted)
	}
	return nil
}

// mpiWait returns how c's MPI binding waits, as DATAHELIX_MPI_WAIT
// spells it, in effect on this rank; ok is false for an in-process world.
func mpiWait(c collective.Comm) (wait string, ok bool) {
	w, ok := c.(*communicator.World)
	if !ok || w == nil {
		return "", false
	}
	return w.WaitPolicy(), true
}

// shareCores has an MPI world's ranks sleep in MPI waits when they, with
// their decode workers and trainers (datahelix train), outnumber the
// node's cores (communicator.World's ShareCores); an in-process world
// has no MPI waits. Every rank must call it, with the same arguments.
func shareCores(c collective.Comm, workers int, trainers bool) error {
	n, ok := c.(*communicator.World)
	if !ok || n == nil {
		return nil
	}
	threads := 1 + workers
	if trainers {
		threads++
	}
	return n.ShareCores(threads)
}
