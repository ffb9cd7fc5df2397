package main

import (
	"fmt"
	"os"
	"strconv"
)

// launchEnv is what the process learns about its place in the job from
// the environment before MPI starts: enough to name the rank in early
// messages and to pin CPUs. The real rank and size come from MPI.
type launchEnv struct {
	Launcher  string // "openmpi", "mpich", "pmix", "slurm" or "" (no launcher)
	Rank      int    // -1 when unknown
	Size      int    // -1 when unknown
	LocalRank int    // -1 when unknown
	LocalSize int    // -1 when unknown
}

// detectLaunch reads the variables the common launchers set. The first
// launcher that sets a rank wins, in the order mpirun (OpenMPI), Hydra
// (MPICH), PMIx, then Slurm (srun sets Slurm variables for every task, and
// an mpirun inside an allocation sets its own on top).
func detectLaunch(getenv func(string) string) launchEnv {
	num := func(name string) int {
		v, err := strconv.Atoi(getenv(name))
		if err != nil || v < 0 {
			return -1
		}
		return v
	}
	e := launchEnv{Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1}
	switch {
	case getenv("OMPI_COMM_WORLD_RANK") != "":
		e.Launcher = "openmpi"
		e.Rank = num("OMPI_COMM_WORLD_RANK")
		e.Size = num("OMPI_COMM_WORLD_SIZE")
		e.LocalRank = num("OMPI_COMM_WORLD_LOCAL_RANK")
		e.LocalSize = num("OMPI_COMM_WORLD_LOCAL_SIZE")
	case getenv("PMI_RANK") != "":
		e.Launcher = "mpich"
		e.Rank = num("PMI_RANK")
		e.Size = num("PMI_SIZE")
		e.LocalRank = num("MPI_LOCALRANKID")
		e.LocalSize = num("MPI_LOCALNRANKS")
	case getenv("PMIX_RANK") != "":
		e.Launcher = "pmix"
		e.Rank = num("PMIX_RANK")
		e.Size = num("PMIX_SIZE")
		e.LocalRank = num("PMIX_LOCAL_RANK")
		e.LocalSize = num("PMIX_LOCAL_SIZE")
		if e.LocalRank < 0 {
			e.LocalRank = num("SLURM_LOCALID")
		}
	case getenv("SLURM_PROCID") != "" && getenv("SLURM_STEP_ID") != "":
		e.Launcher = "slurm"
		e.Rank = num("SLURM_PROCID")
		e.Size = num("SLURM_NTASKS")
		e.LocalRank = num("SLURM_LOCALID")
		e.LocalSize = num("SLURM_NTASKS_PER_NODE")
	}
	return e
}

// String names the rank for messages printed before MPI starts.
func (e launchEnv) String() string {
	if e.Launcher == "" {
		return "no launcher"
	}
	return fmt.Sprintf("%s rank %d/%d local %d", e.Launcher, e.Rank, e.Size, e.LocalRank)
}

func osLaunchEnv() launchEnv { return detectLaunch(os.Getenv) }
