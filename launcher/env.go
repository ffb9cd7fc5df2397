package launcher

import (
	"fmt"
	"os"
	"strconv"
	"strings"
)

// launchEnv is what the process learns about its place in the job from
// the environment before MPI starts: enough to name the rank in early
// messages, to pin CPUs, and to check afterwards that MPI sees the same
// job. The real rank and size come from MPI.
type launchEnv struct {
	Launcher  string // "openmpi", "mpich", "pmix", "slurm" or "" (no launcher)
	Rank      int    // -1 when unknown
	Size      int    // -1 when unknown
	LocalRank int    // -1 when unknown
	LocalSize int    // -1 when unknown
	RankVar   string // the variable Rank came from, for messages
	SizeVar   string // the variable Size came from, for messages
	// Srun is set when srun started the ranks itself, as the tasks of a
	// Slurm step (with or without a PMI plugin: --mpi=pmix sets PMIX_RANK,
	// --mpi=pmi2 PMI_RANK), not an mpirun or mpiexec inside the allocation.
	Srun bool
}

// detectLaunch reads the variables the common launchers set. The first
// launcher that sets a rank wins, in the order mpirun (OpenMPI), Hydra
// (MPICH), PMIx, then Slurm (srun sets Slurm variables for every task, and
// an mpirun inside an allocation sets its own on top).
//
// Under Slurm the step's own counts (SLURM_STEP_NUM_TASKS,
// SLURM_STEP_TASKS_PER_NODE) win over the job's (SLURM_NTASKS,
// SLURM_NTASKS_PER_NODE), which srun --preserve-env leaves at the
// allocation's values.
func detectLaunch(getenv func(string) string) launchEnv {
	num := func(name string) int {
		v, err := strconv.Atoi(getenv(name))
		if err != nil || v < 0 {
			return -1
		}
		return v
	}
	e := launchEnv{Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1}
	inStep := getenv("SLURM_PROCID") != "" && getenv("SLURM_STEP_ID") != ""
	slurmSize := func() (int, string) {
		if n := num("SLURM_STEP_NUM_TASKS"); n >= 0 {
			return n, "SLURM_STEP_NUM_TASKS"
		}
		return num("SLURM_NTASKS"), "SLURM_NTASKS"
	}
	slurmLocalSize := func() int {
		if n := tasksOnNode(getenv("SLURM_STEP_TASKS_PER_NODE"), num("SLURM_NODEID")); n > 0 {
			return n
		}
		return num("SLURM_NTASKS_PER_NODE")
	}
	switch {
	case getenv("OMPI_COMM_WORLD_RANK") != "":
		e.Launcher = "openmpi"
		e.Rank, e.RankVar = num("OMPI_COMM_WORLD_RANK"), "OMPI_COMM_WORLD_RANK"
		e.Size, e.SizeVar = num("OMPI_COMM_WORLD_SIZE"), "OMPI_COMM_WORLD_SIZE"
		e.LocalRank = num("OMPI_COMM_WORLD_LOCAL_RANK")
		e.LocalSize = num("OMPI_COMM_WORLD_LOCAL_SIZE")
	case getenv("PMI_RANK") != "":
		e.Launcher = "mpich"
		e.Rank, e.RankVar = num("PMI_RANK"), "PMI_RANK"
		e.Size, e.SizeVar = num("PMI_SIZE"), "PMI_SIZE"
		e.LocalRank = num("MPI_LOCALRANKID")
		e.LocalSize = num("MPI_LOCALNRANKS")
		// srun --mpi=pmi2 sets PMI_RANK and PMI_SIZE but not the local
		// ones, which MPICH's mpiexec (Hydra) sets, also when it runs
		// its proxies as the tasks of a Slurm step.
		if inStep && getenv("MPI_LOCALRANKID") == "" {
			e.Srun = true
			e.LocalRank = num("SLURM_LOCALID")
			e.LocalSize = slurmLocalSize()
		}
	case getenv("PMIX_RANK") != "":
		e.Launcher = "pmix"
		e.Rank, e.RankVar = num("PMIX_RANK"), "PMIX_RANK"
		e.Size, e.SizeVar = num("PMIX_SIZE"), "PMIX_SIZE"
		e.LocalRank = num("PMIX_LOCAL_RANK")
		e.LocalSize = num("PMIX_LOCAL_SIZE")
		// srun --mpi=pmix sets the rank only; the Slurm step says the rest.
		if inStep {
			e.Srun = true
			if e.Size < 0 {
				e.Size, e.SizeVar = slurmSize()
			}
			if e.LocalRank < 0 {
				e.LocalRank = num("SLURM_LOCALID")
			}
			if e.LocalSize < 0 {
				e.LocalSize = slurmLocalSize()
			}
		}
	case inStep:
		e.Launcher, e.Srun = "slurm", true
		e.Rank, e.RankVar = num("SLURM_PROCID"), "SLURM_PROCID"
		e.Size, e.SizeVar = slurmSize()
		e.LocalRank = num("SLURM_LOCALID")
		e.LocalSize = slurmLocalSize()
	}
	if e.Size < 0 {
		e.SizeVar = ""
	}
	if e.Rank < 0 {
		e.RankVar = ""
	}
	return e
}

// tasksOnNode reads Slurm's compressed tasks-per-node list ("2(x3),1":
// two tasks on each of the first three nodes, one on the fourth) and
// returns the count for node index node, or -1 when the list or the index
// is missing or malformed.
func tasksOnNode(spec string, node int) int {
	if spec == "" || node < 0 {
		return -1
	}
	for _, part := range strings.Split(spec, ",") {
		count, repeat := part, "1"
		if i := strings.Index(part, "(x"); i >= 0 && strings.HasSuffix(part, ")") {
			count, repeat = part[:i], part[i+2:len(part)-1]
		}
		n, err1 := strconv.Atoi(count)
		r, err2 := strconv.Atoi(repeat)
		if err1 != nil || err2 != nil || n < 0 || r < 1 {
			return -1
		}
		if node < r {
			return n
		}
		node -= r
	}
	return -1
}

// String names the rank for messages printed before MPI starts.
func (e launchEnv) String() string {
	if e.Launcher == "" {
		return "no launcher"
	}
	return fmt.Sprintf("%s rank %d/%d local %d", e.Launcher, e.Rank, e.Size, e.LocalRank)
}

// checkWorld compares what the launcher told this process about the job
// with the MPI world it joined (rank of size, built against library). A
// mismatch means the processes did not find each other — srun without
// the PMI plugin of this binary's MPI, or a binary built for another MPI
// than the launcher's — and every process would run as a job of its own,
// each reading every shard and writing the same outputs. Unknown values
// are not checked.
func (e launchEnv) checkWorld(rank, size int, library string) error {
	if e.Launcher == "" {
		return nil
	}
	var who, task, hint string
	lib := shortLibrary(library)
	switch {
	case e.Srun:
		who, task = "srun", "task"
		want := srunPlugin(library)
		used := map[string]string{"pmix": "pmix", "mpich": "pmi2"}[e.Launcher]
		if used == want {
			// The right plugin, yet the ranks did not meet: the library's
			// support for it does not match Slurm's.
			hint = fmt.Sprintf("this binary uses %s, which did not join srun's --mpi=%s job: that library's %s support may not match this cluster's Slurm (srun --mpi=list shows its plugins); or launch with that library's own mpirun inside the allocation (see docs/failures.md)",
				lib, used, map[string]string{"pmix": "PMIx", "pmi2": "PMI-2"}[used])
			break
		}
		hint = fmt.Sprintf("this binary uses %s: launch with srun --mpi=%s (srun --mpi=list shows the plugins this cluster has; see docs/failures.md)", lib, want)
	case e.Launcher == "pmix":
		who, task = "PMIx", "rank"
		hint = "launch with srun --mpi=pmix, or with the mpirun of " + lib + " (see docs/failures.md)"
	case e.Launcher == "openmpi":
		who, task = "Open MPI's mpirun", "rank"
		hint = fmt.Sprintf("this binary uses %s: launch it with that library's own mpirun or mpiexec (see docs/failures.md)", lib)
	case e.Launcher == "mpich":
		who, task = "MPICH's mpiexec", "rank"
		hint = fmt.Sprintf("this binary uses %s: launch it with that library's own mpirun or mpiexec, or build with -tags mpich (see docs/failures.md)", lib)
	default:
		return nil
	}
	if e.Size > 0 && e.Size != size {
		return fmt.Errorf("%s started %d %ss (%s) but MPI sees a %d-rank world: %s", who, e.Size, task, e.SizeVar, size, hint)
	}
	if e.Rank >= 0 && e.Rank != rank {
		return fmt.Errorf("%s made this process %s %d (%s) but MPI made it rank %d of %d: check that nothing in the launch command changes %s and that the launcher belongs to this binary's MPI (%s) (see docs/failures.md)",
			who, task, e.Rank, e.RankVar, rank, size, e.RankVar, lib)
	}
	return nil
}

// srunPlugin is the srun --mpi plugin a binary built against library
// needs: pmi2 for MPICH and its derivatives, which speak PMI-1/PMI-2;
// pmix for Open MPI (and any other library), whose ranks find each other
// through PMIx.
func srunPlugin(library string) string {
	if strings.Contains(library, "MPICH") || strings.Contains(library, "MVAPICH") {
		return "pmi2"
	}
	return "pmix"
}

// shortLibrary is the first phrase of an MPI library version string
// ("Open MPI v4.1.4, package: ..." becomes "Open MPI v4.1.4").
func shortLibrary(lib string) string {
	if i := strings.IndexAny(lib, ",\n"); i >= 0 {
		lib = lib[:i]
	}
	lib = strings.TrimSpace(lib)
	if lib == "" {
		return "an unknown MPI library"
	}
	return lib
}

func osLaunchEnv() launchEnv { return detectLaunch(os.Getenv) }
