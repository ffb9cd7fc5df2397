package launcher

import (
	"fmt"
	"strings"
	"testing"

	"github.com/datahelix/datahelix/internal/cli/clitest"
)

func TestDetectLaunch(t *testing.T) {
	none := launchEnv{Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1}
	tests := []struct {
		name string
		env  map[string]string
		want launchEnv
	}{
		{"none", map[string]string{}, none},
		{"openmpi", map[string]string{
			"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "8",
			"OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2",
			"SLURM_PROCID": "0", "SLURM_STEP_ID": "4",
		}, launchEnv{"openmpi", 3, 8, 1, 2, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false}},
		{"mpich hydra", map[string]string{
			"PMI_RANK": "5", "PMI_SIZE": "6", "MPI_LOCALRANKID": "2", "MPI_LOCALNRANKS": "3",
		}, launchEnv{"mpich", 5, 6, 2, 3, "PMI_RANK", "PMI_SIZE", false}},
		{"pmix, no slurm step", map[string]string{
			"PMIX_RANK": "7", "SLURM_LOCALID": "3", "SLURM_NTASKS": "8",
		}, launchEnv{"pmix", 7, -1, -1, -1, "PMIX_RANK", "", false}},
		{"pmix under srun: the step gives size and local rank", map[string]string{
			"PMIX_RANK": "7", "SLURM_LOCALID": "3", "SLURM_PROCID": "7", "SLURM_STEP_ID": "0",
			"SLURM_STEP_NUM_TASKS": "8", "SLURM_NTASKS": "16",
			"SLURM_STEP_TASKS_PER_NODE": "4(x2)", "SLURM_NODEID": "1",
		}, launchEnv{"pmix", 7, 8, 3, 4, "PMIX_RANK", "SLURM_STEP_NUM_TASKS", true}},
		{"slurm, job counts only", map[string]string{
			"SLURM_PROCID": "9", "SLURM_NTASKS": "16", "SLURM_LOCALID": "1",
			"SLURM_NTASKS_PER_NODE": "4", "SLURM_STEP_ID": "0",
		}, launchEnv{"slurm", 9, 16, 1, 4, "SLURM_PROCID", "SLURM_NTASKS", true}},
		{"slurm step counts win over the job's", map[string]string{
			"SLURM_PROCID": "2", "SLURM_STEP_ID": "1", "SLURM_LOCALID": "0",
			"SLURM_NTASKS": "16", "SLURM_NTASKS_PER_NODE": "8",
			"SLURM_STEP_NUM_TASKS": "3", "SLURM_STEP_TASKS_PER_NODE": "2,1", "SLURM_NODEID": "1",
		}, launchEnv{"slurm", 2, 3, 0, 1, "SLURM_PROCID", "SLURM_STEP_NUM_TASKS", true}},
		{"srun --mpi=pmi2: PMI_RANK without Hydra's local ranks", map[string]string{
			"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "2", "SLURM_LOCALID": "0",
			"SLURM_STEP_TASKS_PER_NODE": "2", "SLURM_NODEID": "0", "PMI_RANK": "0", "PMI_SIZE": "2",
		}, launchEnv{"mpich", 0, 2, 0, 2, "PMI_RANK", "PMI_SIZE", true}},
		{"mpiexec (Hydra) inside a Slurm step: not srun's ranks", map[string]string{
			"SLURM_PROCID": "0", "SLURM_STEP_ID": "0", "SLURM_STEP_NUM_TASKS": "1", "SLURM_LOCALID": "0",
			"PMI_RANK": "3", "PMI_SIZE": "4", "MPI_LOCALRANKID": "3", "MPI_LOCALNRANKS": "4",
		}, launchEnv{"mpich", 3, 4, 3, 4, "PMI_RANK", "PMI_SIZE", false}},
		{"slurm batch script, no step: not a rank", map[string]string{
			"SLURM_PROCID": "0", "SLURM_NTASKS": "16",
		}, none},
		{"garbage numbers", map[string]string{
			"OMPI_COMM_WORLD_RANK": "x", "OMPI_COMM_WORLD_SIZE": "-4",
		}, launchEnv{Launcher: "openmpi", Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := detectLaunch(func(k string) string { return tt.env[k] })
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestTasksOnNode(t *testing.T) {
	tests := []struct {
		spec string
		node int
		want int
	}{
		{"4", 0, 4},
		{"4", 1, -1},
		{"4(x2)", 1, 4},
		{"4(x2)", 2, -1},
		{"2(x3),1", 0, 2},
		{"2(x3),1", 2, 2},
		{"2(x3),1", 3, 1},
		{"3,2(x2),5", 3, 5},
		{"", 0, -1},
		{"4", -1, -1},
		{"x", 0, -1},
		{"2(x0)", 0, -1},
		{"2(x3", 0, -1},
		{"-1", 0, -1},
	}
	for _, tt := range tests {
		if got := tasksOnNode(tt.spec, tt.node); got != tt.want {
			t.Errorf("tasksOnNode(%q, %d): got %d, want %d", tt.spec, tt.node, got, tt.want)
		}
	}
}

// TestCheckWorld compares the world a launcher started with the MPI
// world a rank sees: a mismatch is an error (exit 4) that names the
// launcher, its variable, the library and the fix, as
// testdata/check_world.golden reads; agreement or no launcher is none.
func TestCheckWorld(t *testing.T) {
	const (
		ompi  = "Open MPI v4.1.4, package: Debian OpenMPI, ident: 4.1.4"
		mpich = "MPICH Version: 4.0.2\nMPICH Release date: Thu Apr  7 12:34:45 CDT 2022"
	)
	slurm := launchEnv{"slurm", 2, 4, 2, 4, "SLURM_PROCID", "SLURM_NTASKS", true}
	tests := []struct {
		name       string
		env        launchEnv
		rank, size int
		lib        string
		wantErr    bool // its message is in testdata/check_world.golden
	}{
		{"no launcher", launchEnv{Rank: -1, Size: -1, LocalRank: -1, LocalSize: -1}, 0, 1, ompi, false},
		{"slurm agrees", slurm, 2, 4, ompi, false},
		{"srun without --mpi=pmix: a singleton", slurm, 0, 1, ompi, true},
		{"srun without --mpi, MPICH build", slurm, 0, 1, mpich, true},
		{"slurm rank differs", slurm, 1, 4, ompi, true},
		{"srun --mpi=pmi2, Open MPI build", launchEnv{"mpich", 0, 2, 0, 2, "PMI_RANK", "PMI_SIZE", true}, 0, 1, ompi, true},
		{"srun --mpi=pmix, MPICH build", launchEnv{"pmix", 1, 2, 1, 2, "PMIX_RANK", "SLURM_STEP_NUM_TASKS", true}, 0, 1, mpich, true},
		{"srun --mpi=pmix, Open MPI build: the plugin is right", launchEnv{"pmix", 1, 2, 1, 2, "PMIX_RANK", "SLURM_STEP_NUM_TASKS", true}, 0, 1, ompi, true},
		{"size unknown, rank agrees", launchEnv{"pmix", 3, -1, -1, -1, "PMIX_RANK", "", false}, 3, 8, ompi, false},
		{"rank unknown, size agrees", launchEnv{"openmpi", -1, 2, -1, -1, "", "OMPI_COMM_WORLD_SIZE", false}, 1, 2, ompi, false},
		{"mpich binary under Open MPI's mpirun", launchEnv{"openmpi", 1, 2, 1, 2, "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", false}, 0, 1, mpich, true},
		{"open mpi binary under hydra", launchEnv{"mpich", 1, 2, 1, 2, "PMI_RANK", "PMI_SIZE", false}, 0, 1, ompi, true},
		{"pmix size from slurm", launchEnv{"pmix", 5, 8, 1, 4, "PMIX_RANK", "SLURM_STEP_NUM_TASKS", true}, 0, 1, ompi, true},
		{"pmix outside Slurm", launchEnv{"pmix", 5, 8, 1, 4, "PMIX_RANK", "PMIX_SIZE", false}, 0, 1, ompi, true},
	}
	var b strings.Builder
	for _, tt := range tests {
		err := tt.env.checkWorld(tt.rank, tt.size, tt.lib)
		if (err != nil) != tt.wantErr {
			t.Errorf("%s: got %v, want an error: %v", tt.name, err, tt.wantErr)
		}
		fmt.Fprintf(&b, "%s:\n\t%v\n", tt.name, err)
	}
	clitest.Golden(t, "check_world.golden", b.String())
}

func TestShortLibrary(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Open MPI v4.1.4, package: Debian OpenMPI", "Open MPI v4.1.4"},
		{"MPICH Version:\t4.0.2\nMPICH Release date: x", "MPICH Version:\t4.0.2"},
		{"in-process", "in-process"},
		{"", "an unknown MPI library"},
		{" ,x", "an unknown MPI library"},
	}
	for _, tt := range tests {
		if got := shortLibrary(tt.in); got != tt.want {
			t.Errorf("shortLibrary(%q): got %q, want %q", tt.in, got, tt.want)
		}
	}
}
